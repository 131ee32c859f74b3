/*
 * db_tx.c: the transaction runner (oq_db_transact) and the restart
 * retries of single statements: BEGIN is owed until the first statement
 * carries it (db_state.h, oq__db_tx), COMMIT's unknown outcome is
 * OQ_ERR_AMBIGUOUS, and 40001/40P01 re-run per the connection's policy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_state.h"

/* Send a pending BEGIN on its own (the old way), for the calls that cannot
 * carry it: the simple protocol and the pipelines. */
oq_err oq__db_flush_begin(oq_db *db)
{
  if (db->tx != OQ__DB_TX_BEGIN_OWED)
    return OQ_OK;
  db->tx = OQ__DB_TX_NONE;
  bool timed_out = false;
  PGresult *res = oq__db_exec_simple(db, "BEGIN", &timed_out);
  if (timed_out)
    return oq__db_deadline_passed(db, "BEGIN failed");
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
    e = oq__db_fail_result(db, res, "BEGIN failed");
  PQclear(res);
  return e;
}

struct pg_conn *oq_db_pgconn(oq_db *db)
{
  /* raw libpq inside oq_db_transact must run inside its transaction: a
   * BEGIN still waiting for the first statement goes now, and, since the
   * caller may keep this pointer, every later transaction's BEGIN goes at
   * once too */
  db->begin = OQ__DB_BEGIN_AT_ONCE;
  if (db->tx == OQ__DB_TX_BEGIN_OWED && db->conn) {
    oq_err e = oq__db_flush_begin(db);
    (void)e; /* a failed BEGIN means a lost connection: raw calls fail too */
  }
  return db->conn;
}

/* True once the policy says stop re-running after `attempt` restarts. */
static bool policy_exhausted(const oq_retry_policy *p, int attempt,
                             uint64_t start_ms)
{
  if (p->max_attempts > 0 && attempt > p->max_attempts)
    return true;
  if (p->max_total_ms > 0) {
    uint64_t now = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
    if (now - start_ms >= (uint64_t)p->max_total_ms)
      return true;
  }
  return false;
}

static uint64_t policy_now(const oq_retry_policy *p)
{
  return p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
}

static oq_err query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected, bool prepared)
{
  uint64_t start = policy_now(&db->retry);
  for (int attempt = 1;; attempt++) {
    oq_err e = oq__db_run(db, sql, nparams, NULL, params, fn, ud, affected,
                          NULL, prepared);
    if (e != OQ_ERR_RETRY)
      return e;
    if (policy_exhausted(&db->retry, attempt, start))
      return oq__db_fail(db, OQ_ERR_RETRY, db->sqlstate,
                         "gave up after %d restarts (SQLSTATE %s): %s", attempt,
                         db->sqlstate, db->errmsg);
    db->restarts++;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}

oq_err oq__db_query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected)
{
  return query_retry(db, sql, nparams, params, fn, ud, affected, false);
}

oq_err oq__db_query_prepared_retry(oq_db *db, const char *sql, int nparams,
                                   const char *const *params, oq_row_fn fn,
                                   void *ud, long *affected)
{
  return query_retry(db, sql, nparams, params, fn, ud, affected, true);
}

/*
 * COMMIT through the simple protocol. An aborted transaction "commits" as
 * ROLLBACK, which is a failure. No answer means the outcome is unknown.
 */
static oq_err commit(oq_db *db)
{
  if (db->tx == OQ__DB_TX_BEGIN_OWED) { /* the transaction ran no statement */
    db->tx = OQ__DB_TX_NONE;
    return OQ_OK;
  }
  bool timed_out = false;
  PGresult *res = oq__db_exec_simple(db, "COMMIT", &timed_out);
  if (timed_out) {
    oq__db_deadline_passed(db, "COMMIT");
    return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL, "COMMIT outcome unknown: %s",
                       db->errmsg);
  }
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  oq_err e = OQ_OK;
  if (st == PGRES_COMMAND_OK) {
    if (strcmp(PQcmdStatus(res), "ROLLBACK") == 0)
      e = oq__db_fail(db, OQ_ERR_SQL, NULL,
                      "COMMIT rolled back: the transaction had failed");
  } else {
    e = oq__db_fail_result(db, res, "COMMIT failed");
    if (e == OQ_ERR_CONN)
      e = oq__db_fail(db, OQ_ERR_AMBIGUOUS, db->sqlstate,
                      "COMMIT outcome unknown: %s", db->errmsg);
  }
  PQclear(res);
  return e;
}

static void rollback_quietly(oq_db *db)
{
  db->tx = OQ__DB_TX_NONE;
  if (db->conn && PQstatus(db->conn) == CONNECTION_OK &&
      PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
    bool timed_out = false;
    PGresult *res = oq__db_exec_simple(db, "ROLLBACK", &timed_out);
    PQclear(res);
  }
}

oq_err oq_db_transact(oq_db *db, oq_tx_fn fn, void *ud)
{
  uint64_t start = policy_now(&db->retry);
  for (int attempt = 1;; attempt++) {
    oq__db_clear(db);
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
      return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                         db->masked);
    /* sent with fn's first statement, unless raw libpq may come first */
    db->tx = OQ__DB_TX_BEGIN_OWED;
    oq_err e =
        db->begin == OQ__DB_BEGIN_AT_ONCE ? oq__db_flush_begin(db) : OQ_OK;
    if (e != OQ_OK)
      return e;
    e = fn(db, ud);
    if (e == OQ_OK) {
      e = commit(db);
      if (e == OQ_OK)
        return OQ_OK;
    } else {
      /* keep fn's error details; ROLLBACK must not overwrite them */
      bool restart = e == OQ_ERR_RETRY || oq__sqlstate_is_restart(db->sqlstate);
      rollback_quietly(db);
      if (!restart)
        return e;
      e = OQ_ERR_RETRY;
    }
    if (e != OQ_ERR_RETRY)
      return e;
    rollback_quietly(db);
    if (policy_exhausted(&db->retry, attempt, start))
      return oq__db_fail(db, OQ_ERR_RETRY, db->sqlstate,
                         "transaction gave up after %d restarts: %s", attempt,
                         db->errmsg);
    db->restarts++;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}
