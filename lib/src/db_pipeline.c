/*
 * db_pipeline.c: many statements in one round trip (oq__db_pipeline:
 * libpq pipeline mode, one Sync), and the Parse+Describe pipeline that
 * checks a statement without running it (oq__db_describe_unnamed).
 *
 * Pipeline mode is a libpq feature over the v3 extended protocol, which
 * both engines speak: "it is a client-side feature which doesn't require
 * special server support" (PostgreSQL docs, libpq "Pipeline Mode").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_state.h"

/* Rows of one pipelined result to its statement's callback. */
static oq_err deliver_rows(PGresult *res, oq__pstmt *st)
{
  ExecStatusType es = PQresultStatus(res);
  st->affected = es == PGRES_TUPLES_OK && oq__db_affected_rows(res) < 0
                     ? PQntuples(res)
                     : oq__db_affected_rows(res);
  if (st->first_row && !*st->first_row && es == PGRES_TUPLES_OK &&
      PQntuples(res) > 0) {
    *st->first_row = oq__pgresult_row_json(res, 0);
    if (!*st->first_row)
      return OQ_ERR_NOMEM;
  }
  if (!st->rows)
    return OQ_OK;
  int nrows = PQntuples(res), ncols = PQnfields(res);
  const char *vals[64];
  if (ncols > 64)
    ncols = 64;
  oq_err e = OQ_OK;
  for (int r = 0; r < nrows && e == OQ_OK; r++) {
    for (int c = 0; c < ncols; c++)
      vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
    e = st->rows(st->ud, ncols, vals);
  }
  return e;
}

/*
 * Send stmts[i]: its prepared statement, else its text. Through a pooler
 * (prepared set but empty: unnamed) a run of the same statement, a batch's
 * items, is parsed once, by the first of the run; the others bind the
 * unnamed statement it left, which lasts until the next Parse. The whole
 * run is in one pipeline, so on one server connection.
 */
static bool send_pstmt(oq_db *db, const oq__pstmt *stmts, size_t i)
{
  const oq__pstmt *s = &stmts[i];
  bool unnamed = s->prepared && !s->prepared[0];
  bool parsed = unnamed && i > 0 && stmts[i - 1].prepared &&
                !stmts[i - 1].prepared[0] &&
                strcmp(stmts[i - 1].sql, s->sql) == 0;
  if ((s->prepared && !unnamed) || parsed)
    return PQsendQueryPrepared(db->conn, s->prepared, s->nparams, s->params,
                               NULL, NULL, 0) == 1;
  return PQsendQueryParams(db->conn, s->sql, s->nparams, (const Oid *)s->types,
                           s->params, NULL, NULL, 0) == 1;
}

/* Send stmts[from..to) after the ones already sent; then a Sync when to is
 * the end, else a flush so their results come back while the transaction
 * stays open. False when the connection could not take them. */
static bool pipeline_send(oq_db *db, oq__pstmt *stmts, size_t from, size_t to,
                          size_t n)
{
  bool ok = true;
  /* a flush request after each statement makes the server send each
   * result as it completes, not all at the Sync, so progress is visible and
   * the deadline is per statement */
  db->statements += to - from;
  for (size_t i = from; i < to && ok; i++)
    ok = (i == 0 || PQsendFlushRequest(db->conn) == 1) &&
         send_pstmt(db, stmts, i);
  if (ok && to == n)
    ok = PQpipelineSync(db->conn) == 1;
  else if (ok)
    ok = PQsendFlushRequest(db->conn) == 1 && PQflush(db->conn) == 0;
  return ok;
}

/* Where the next segment ends: the next statement with a before hook. */
static size_t segment_end(const oq__pstmt *stmts, size_t from, size_t n)
{
  for (size_t i = from + 1; i < n; i++)
    if (stmts[i].before)
      return i;
  return n;
}

oq_err oq__db_pipeline(oq_db *db, oq__pstmt *stmts, size_t n, long *failed)
{
  *failed = -1;
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL,
                       "not connected to %s; the connection was lost",
                       db->masked);
  oq_err be = oq__db_flush_begin(db);
  if (be != OQ_OK)
    return be;
  if (!PQenterPipelineMode(db->conn))
    return oq__db_fail_result(db, NULL, "cannot enter pipeline mode");
  for (size_t i = 0; i < n; i++)
    if (stmts[i].first_row)
      *stmts[i].first_row = NULL;
  size_t sent = segment_end(stmts, 0, n);
  if (!pipeline_send(db, stmts, 0, sent, n)) {
    /* the server runs each message as it arrives: if the last statement
     * (a COMMIT) was among those sent, part of it may have gone through */
    oq_err e = oq__db_fail(db, sent == n ? OQ_ERR_AMBIGUOUS : OQ_ERR_CONN, NULL,
                           "pipeline to %s could not be sent: %s", db->masked,
                           PQerrorMessage(db->conn));
    oq__db_drop(db); /* a half-sent pipeline leaves no usable state */
    return e;
  }
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  oq_err first = OQ_OK;
  size_t next = 0; /* the statement whose results come next */
  bool synced = false, lost = false, timed_out = false, copy = false;
  while (!synced) {
    if (sent < n && (next == sent || first != OQ_OK)) {
      /* every result so far is in: the next segment; or, after a
       * failure, at once the Sync that ends the pipeline (the server
       * skips to it) */
      size_t to = first == OQ_OK ? segment_end(stmts, sent, n) : n;
      if (first == OQ_OK && stmts[sent].before) {
        oq_err e = stmts[sent].before(stmts[sent].before_ud, &stmts[sent]);
        if (e != OQ_OK) {
          first = oq__db_fail(
              db, e, NULL, "pipelined statement %zu: could not be made", sent);
          *failed = (long)sent;
          to = n;
        }
      }
      size_t from = first == OQ_OK ? sent : n;
      bool ok = pipeline_send(db, stmts, from, to, n);
      sent = to; /* handed to the connection, perhaps in part (see above) */
      if (!ok) {
        lost = true;
        break;
      }
    }
    if (!oq__db_wait_readable(db, until, &timed_out)) {
      lost = true;
      break;
    }
    PGresult *res = PQgetResult(db->conn);
    if (!res) {
      if (PQstatus(db->conn) == CONNECTION_BAD) {
        lost = true;
        break;
      }
      next++; /* the end of one statement's results */
      /* the deadline is for each statement: the server is making
       * progress, so the next one gets the whole of it again */
      if (until)
        until = oq_monotonic_ms() + (uint64_t)db->opts.deadline_ms;
      continue;
    }
    ExecStatusType es = PQresultStatus(res);
    if (es == PGRES_COPY_IN || es == PGRES_COPY_OUT || es == PGRES_COPY_BOTH) {
      /* as in oq__db_await: libpq would answer this state forever. The
       * COMMIT behind it may still run (a COPY TO STDOUT needs nothing
       * from us), so the outcome is unknown like any lost connection */
      PQclear(res);
      lost = true;
      copy = true;
      break;
    }
    if (es == PGRES_PIPELINE_SYNC) {
      synced = true;
    } else if (es == PGRES_PIPELINE_ABORTED) {
      /* skipped after an earlier failure */
    } else if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
      if (next < n && first == OQ_OK) {
        oq_err e = deliver_rows(res, &stmts[next]);
        if (e != OQ_OK) {
          first = oq__db_fail(db, e, NULL,
                              "pipelined statement %zu: rows "
                              "callback failed",
                              next);
          *failed = (long)next;
        }
      }
    } else if (PQstatus(db->conn) == CONNECTION_BAD) {
      PQclear(res); /* libpq's report of the lost connection */
      lost = true;
      break;
    } else if (first == OQ_OK) {
      first = oq__db_fail_result(db, res, "query failed");
      *failed = (long)(next < n ? next : n - 1);
    }
    PQclear(res);
  }
  if (lost) {
    /* a COMMIT that was never sent cannot have run */
    bool before_failure = first == OQ_OK && sent == n;
    const char *why = copy ? "a COPY ... FROM STDIN / TO STDOUT, which is not "
                             "supported: nothing would feed or read its data"
                      : timed_out ? "no answer within the deadline"
                                  : PQerrorMessage(db->conn);
    char msg[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", why);
    oq__db_drop(db);
    if (before_failure)
      return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL,
                         "pipeline outcome unknown: connection to %s lost "
                         "(%s)",
                         db->masked, msg);
    /* the failure itself said the outcome is unknown (40003, 08007 on the
     * COMMIT): the drop after it does not make it a plain loss */
    if (first == OQ_ERR_AMBIGUOUS)
      return oq__db_fail(db, OQ_ERR_AMBIGUOUS, db->sqlstate,
                         "pipeline outcome unknown: %s; then the connection "
                         "to %s was lost (%s)",
                         db->errmsg, db->masked, msg);
    return oq__db_fail(db, OQ_ERR_CONN, db->sqlstate,
                       "connection to %s lost after: %s", db->masked,
                       db->errmsg[0] ? db->errmsg : msg);
  }
  /* a failure left the explicit transaction aborted: end it, so the
   * connection is usable (the caller runs the batch again) */
  if (PQtransactionStatus(db->conn) == PQTRANS_INERROR ||
      PQtransactionStatus(db->conn) == PQTRANS_INTRANS) {
    bool t = false;
    PQexitPipelineMode(db->conn);
    PGresult *rb = oq__db_exec_simple(db, "ROLLBACK", &t);
    PQclear(rb);
    if (t || !db->conn)
      return first != OQ_OK
                 ? first
                 : oq__db_fail(db, OQ_ERR_CONN, NULL,
                               "ROLLBACK on %s timed out", db->masked);
  }
  if (db->conn && PQpipelineStatus(db->conn) != PQ_PIPELINE_OFF &&
      !PQexitPipelineMode(db->conn)) {
    oq__db_drop(db);
    if (first == OQ_OK)
      return oq__db_fail(db, OQ_ERR_CONN, NULL,
                         "cannot leave pipeline mode on %s", db->masked);
  }
  return first;
}

/*
 * End a short pipeline whose results were read: wait (within the deadline)
 * for the Sync's answer and leave pipeline mode. false when that failed;
 * the caller gives the connection up (oq__db_give_up). For the pipelines
 * of a fixed few messages: a statement with its BEGIN (db_tx.c,
 * send_and_await) and Parse+Describe (oq__db_describe_unnamed).
 */
bool oq__db_pipeline_end_err(oq_db *db, bool *timed_out, PGresult **err)
{
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  bool synced = false;
  if (err)
    *err = NULL;
  while (!synced && oq__db_wait_readable(db, until, timed_out)) {
    PGresult *r = PQgetResult(db->conn);
    if (!r && PQstatus(db->conn) == CONNECTION_BAD)
      break;
    synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    /* an error before the Sync is the implicit transaction's COMMIT
     * failing (a deferred constraint, a serialization failure found at
     * commit): what the statements did is rolled back */
    if (err && !*err && r && PQresultStatus(r) == PGRES_FATAL_ERROR) {
      *err = r;
      continue;
    }
    PQclear(r);
  }
  return synced && PQexitPipelineMode(db->conn);
}

bool oq__db_pipeline_end(oq_db *db, bool *timed_out)
{
  return oq__db_pipeline_end_err(db, timed_out, NULL);
}

/*
 * Parse sql as the unnamed statement and describe it, in one pipeline (one
 * Sync): behind a transaction pooler both messages then reach the same
 * server connection, which separate round trips do not promise. *nparams
 * and *ncols (each may be NULL) get its parameter and column counts.
 * Nothing in sql runs. Called for the start-up check of a statement
 * (oq_stmt_check) and, through a pooler, once per statement and
 * connection for the pipelines' column counts (oq__db_prepare_as).
 */
oq_err oq__db_describe_unnamed(oq_db *db, const char *sql, int nparams,
                               const unsigned int *types, int *nparams_out,
                               int *ncols_out, const char *what)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  oq_err e = oq__db_flush_begin(db);
  if (e != OQ_OK)
    return e;
  if (!PQenterPipelineMode(db->conn))
    return oq__db_fail_result(db, NULL, what);
  if (!PQsendPrepare(db->conn, "", sql, nparams, (const Oid *)types) ||
      !PQsendDescribePrepared(db->conn, "") || !PQpipelineSync(db->conn)) {
    oq__db_give_up(db);
    return OQ_ERR_CONN;
  }
  bool timed_out = false;
  PGresult *parsed = oq__db_await(db, &timed_out);
  PGresult *described = db->conn ? oq__db_await(db, &timed_out) : NULL;
  if (!db->conn) {
    PQclear(parsed);
    PQclear(described);
    return timed_out ? oq__db_deadline_passed(db, what) : db->last;
  }
  if (!oq__db_pipeline_end(db, &timed_out)) {
    PQclear(parsed);
    PQclear(described);
    oq__db_give_up(db);
    return OQ_ERR_CONN;
  }
  if (!parsed || PQresultStatus(parsed) != PGRES_COMMAND_OK) {
    e = oq__db_fail_result(db, parsed, what); /* parsed: cleared below */
  } else if (!described || PQresultStatus(described) != PGRES_COMMAND_OK) {
    e = oq__db_fail_result(db, described, what);
  } else {
    if (nparams_out)
      *nparams_out = PQnparams(described);
    if (ncols_out)
      *ncols_out = PQnfields(described);
  }
  PQclear(parsed);
  PQclear(described);
  return e;
}
