/*
 * db_tx.c: running statements and transactions: one statement (oq_db_exec,
 * oq_db_query, through the prepared-statement cache or not), the
 * transaction runner (oq_db_transact) and the restart retries. BEGIN is
 * owed until the first statement carries it (db_state.h, oq__db_tx),
 * COMMIT's unknown outcome is OQ_ERR_AMBIGUOUS, and 40001/40P01 re-run per
 * the connection's policy. The top of the four connection files: it uses
 * the other three, none of them uses it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_state.h"

static bool send_stmt(oq_db *db, const char *sql, int nparams,
                      const unsigned int *types, const char *const *params,
                      const char *name)
{
  db->statements++;
  return (name ? PQsendQueryPrepared(db->conn, name, nparams, params, NULL,
                                     NULL, 0)
               : PQsendQueryParams(db->conn, sql, nparams, (const Oid *)types,
                                   params, NULL, NULL, 0)) == 1;
}

/*
 * Send one statement (prepared as `name`, or sql) and collect its answer
 * like oq__db_await. A transaction's pending BEGIN (oq_db_transact) goes in
 * the same round trip, pipelined ahead of it: BEGIN, the statement, Sync
 * (PostgreSQL docs, libpq "Pipeline Mode"; on CockroachDB the same shape
 * as oq__db_pipeline's batches, whose pgwire runs extended-protocol
 * messages up to the Sync: cockroachdb/cockroach#51194; not run against a
 * CockroachDB server here). An idle worker's item then waits for
 * one answer fewer before its handler's statement runs. The answer is the
 * BEGIN's failure if it failed, else the statement's; the transaction is
 * left open, as a separate BEGIN would have left it.
 */
/* A claim's settings (oq__db_claim_next), transaction-local: no JIT, and
 * one generic plan per connection. plan_cache_mode is read at the claim's
 * Bind, which the server takes after this prelude's Execute. Left to
 * choose, the plan cache planned the claim afresh at every Bind (its
 * generic plan's estimate never beat the custom ones'): about 1 ms of a
 * 12 ms claim of 1,000, on the claim loop's one connection; the generic
 * plan is the same index walk (docs/benchmarks.md, "The claim planned
 * once, and the drain's last wait"), and ANALYZE of the tables it reads
 * makes it anew. Sequential and bitmap scans are off while it is planned,
 * because that one plan is made at the connection's first claim, and a
 * worker often starts on an empty table (a new queue; a drained one, whose
 * empty pages VACUUM truncates): costed for no pages, the plan scanned the
 * table and compared every row with every claimed id, and kept doing so for
 * a backlog enqueued later, until an ANALYZE (a drain of 100,000 items:
 * 18 to 25 s instead of about 3; it_lib_cold_plan, docs/benchmarks.md "A
 * claim planned on an empty table"). The claim's every table access has an
 * index made for it, so the settings only take away the choices an empty
 * table's costs would wrongly make. The acks, also prepared, get the same
 * settings (oq__db_plan_next): their plan is kept from about the sixth ack
 * of the connection, when an idle worker's table may hold one row. */
#define PLAN_SETTINGS OQ__PLAN_SETTINGS

static const char begin_sql[] = "BEGIN";

static PGresult *send_and_await(oq_db *db, const char *sql, int nparams,
                                const unsigned int *types,
                                const char *const *params, const char *name,
                                bool *timed_out)
{
  *timed_out = false;
  /* oq_db_set_async_commits: the statement's own implicit transaction
   * (everything up to the Sync) commits without waiting for the WAL
   * flush; set_config(..., true) ends with it, so nothing outlives it */
  bool idle = PQtransactionStatus(db->conn) == PQTRANS_IDLE;
  bool owed = db->tx == OQ__DB_TX_BEGIN_OWED;
  bool claim = db->claim_next && idle;
  /* oq__db_plan_next: the settings inside the transaction too (after its
   * BEGIN when that is still owed) */
  bool in_tx = db->claim_next && db->plan_in_tx && (owed || !idle);
  db->claim_next = false;
  db->plan_in_tx = false;
  /* oq__db_claim_next_locked: the lock statement sets the claim's settings
   * (and the commit's, from $1) itself */
  const char *lock = claim ? db->claim_lock : NULL;
  const char *lock_params[4] = {db->async_commits ? "async" : "sync"};
  int nlock = lock ? 1 + db->claim_lock_nargs : 0;
  for (int i = 1; i < nlock && i < 4; i++)
    lock_params[i] = db->claim_lock_args[i - 1];
  const char *prelude =
      owed   ? begin_sql
      : lock ? lock
      : db->async_commits && idle && claim
          ? "SELECT set_config('synchronous_commit', 'off', true),"
            " " PLAN_SETTINGS
      : db->async_commits && idle
          ? "SELECT set_config('synchronous_commit', 'off', true)"
      : claim || in_tx ? "SELECT " PLAN_SETTINGS
                       : NULL;
  const char *second = owed && in_tx ? "SELECT " PLAN_SETTINGS : NULL;
  if (!prelude)
    return send_stmt(db, sql, nparams, types, params, name)
               ? oq__db_await(db, timed_out)
               : NULL;
  bool locking = lock && prelude == lock;
  /* The settings' prelude goes before every claim: parsed once per
   * connection like the claim (unnamed behind a transaction pooler). Left
   * unnamed, its Parse and Bind were about 20 us of each claim's round trip
   * on the server (pgbench -M extended against -M prepared, 96 against
   * 74 us a call), on an idle worker's latency path. Only with a prepared
   * statement, whose loss (a pooler, 26000) run_typed already turns into
   * a retry that prepares both again; unprepared (the cache could not take
   * it) it runs unnamed as before. */
  char pname[32] = "";
  if (name && !locking && prelude != begin_sql &&
      oq__db_prepare_as(db, prelude, 0, NULL, pname, sizeof pname, NULL,
                        "query failed") != OQ_OK) {
    pname[0] = '\0';
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
      return NULL;
    oq__db_clear(db); /* run unnamed: its failure is not this call's */
  }
  if (!PQenterPipelineMode(db->conn))
    return NULL; /* still pending: the caller's rollback clears it */
  db->tx = OQ__DB_TX_NONE;
  if (!(pname[0]
            ? PQsendQueryPrepared(db->conn, pname, 0, NULL, NULL, NULL, 0)
            : PQsendQueryParams(db->conn, prelude, locking ? nlock : 0, NULL,
                                locking ? lock_params : NULL, NULL, NULL, 0)) ||
      (second &&
       !PQsendQueryParams(db->conn, second, 0, NULL, NULL, NULL, NULL, 0)) ||
      !send_stmt(db, sql, nparams, types, params, name) ||
      !PQpipelineSync(db->conn)) {
    /* nothing can have committed; a half-sent pipeline is unusable */
    oq__db_give_up(db);
    return NULL;
  }
  PGresult *begin = oq__db_await(db, timed_out);
  if (!db->conn)
    return NULL; /* deadline or COPY: oq__db_await closed it */
  if (second) {  /* the settings' failure, unless the BEGIN's came first */
    PGresult *set = oq__db_await(db, timed_out);
    if (!db->conn) {
      PQclear(begin);
      return NULL;
    }
    bool begun = begin && PQresultStatus(begin) == PGRES_COMMAND_OK;
    bool set_ok = set && PQresultStatus(set) == PGRES_TUPLES_OK;
    if (begun && !set_ok) {
      PQclear(begin);
      begin = set;
    } else {
      PQclear(set);
    }
  }
  PGresult *res = oq__db_await(db, timed_out);
  if (!db->conn) {
    PQclear(begin);
    PQclear(res);
    return NULL;
  }
  if (!begin || (PQresultStatus(begin) != PGRES_COMMAND_OK &&
                 PQresultStatus(begin) != PGRES_TUPLES_OK)) {
    PQclear(res); /* skipped: PGRES_PIPELINE_ABORTED */
    res = begin;
  } else {
    PQclear(begin);
  }
  /* the Sync's answer, then back to one statement at a time; an error
   * before it is the COMMIT's, and it undid what res reports */
  PGresult *commit_err = NULL;
  if (!oq__db_pipeline_end_err(db, timed_out, &commit_err)) {
    PQclear(res);
    PQclear(commit_err);
    oq__db_give_up(db);
    return NULL;
  }
  if (commit_err) {
    PQclear(res);
    return commit_err;
  }
  return res;
}

/* prepared: parse and plan sql once per connection (oq__db_prepare_once),
 * for the library's statements that run per claim or per ack. */
static oq_err run_typed(oq_db *db, const char *sql, int nparams,
                        const unsigned int *types, const char *const *params,
                        oq_row_fn fn, void *ud, long *affected, char **row_json,
                        bool prepared)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL,
                       "not connected to %s; the connection was lost",
                       db->masked);
  char name[32];
  bool cached = prepared && oq__db_prepared_cached(db, sql);
  if (prepared) {
    oq_err pe = oq__db_prepare_as(db, sql, nparams, types, name, sizeof name,
                                  NULL, "query failed");
    if (pe != OQ_OK)
      return pe;
  }
  bool timed_out = false;
  PGresult *res = send_and_await(db, sql, nparams, types, params,
                                 prepared && name[0] ? name : NULL, &timed_out);
  if (!res && !db->conn && !timed_out && db->link != OQ__DB_CLOSED_BY_COPY &&
      db->last == OQ_ERR_CONN)
    return OQ_ERR_CONN; /* oq__db_give_up: the reason is recorded */
  if (timed_out)
    return oq__db_deadline_passed(db, "query failed");
  oq_err e = OQ_OK;
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    e = oq__db_fail_result(db, res, "query failed");
    /* 0A000 says the server threw a cached plan away ("cached plan must
     * not change result type") only for a statement named by an earlier
     * call; from one prepared in this call it is the statement's own
     * failure (a plan it cannot have, a function raising 0A000), which
     * preparing it again would only repeat: an --sql handler's attempt
     * then fails instead of restarting its transaction again and again */
    if (prepared && name[0] && e != OQ_ERR_CONN &&
        oq__sqlstate_prepared_gone(db->sqlstate) &&
        (cached ||
         !oq__sqlstate_is(db->sqlstate, OQ_SQLSTATE_FEATURE_NOT_SUPPORTED))) {
      if (oq__sqlstate_is(db->sqlstate, OQ_SQLSTATE_INVALID_STATEMENT_NAME))
        oq__db_vanished(db);
      e = oq__db_lost_prepared(db);
    }
    goto out;
  }
  if (affected)
    *affected = st == PGRES_TUPLES_OK && oq__db_affected_rows(res) < 0
                    ? PQntuples(res)
                    : oq__db_affected_rows(res);
  if (row_json)
    *row_json = PQntuples(res) > 0 ? oq__pgresult_row_json(res, 0) : NULL;
  if (fn) {
    int nrows = PQntuples(res), ncols = PQnfields(res);
    const char *vals[64];
    if (ncols > 64)
      ncols = 64;
    for (int r = 0; r < nrows && e == OQ_OK; r++) {
      for (int c = 0; c < ncols; c++)
        vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
      e = fn(ud, ncols, vals);
    }
  }
out:
  PQclear(res);
  return e;
}

static oq_err run(oq_db *db, const char *sql, int nparams,
                  const char *const *params, oq_row_fn fn, void *ud,
                  long *affected)
{
  return run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                   false);
}

oq_err oq_db_exec_typed(oq_db *db, const char *sql, int nparams,
                        const unsigned int *types, const char *const *params,
                        long *affected)
{
  return run_typed(db, sql, nparams, types, params, NULL, NULL, affected, NULL,
                   false);
}

oq_err oq_db_exec_typed_json(oq_db *db, const char *sql, int nparams,
                             const unsigned int *types,
                             const char *const *params, char **row_json)
{
  *row_json = NULL;
  return run_typed(db, sql, nparams, types, params, NULL, NULL, NULL, row_json,
                   false);
}

oq_err oq_db_exec_prepared_json(oq_db *db, const char *sql, int nparams,
                                const unsigned int *types,
                                const char *const *params, char **row_json)
{
  *row_json = NULL;
  return run_typed(db, sql, nparams, types, params, NULL, NULL, NULL, row_json,
                   true);
}

oq_err oq_db_exec(oq_db *db, const char *sql, int nparams,
                  const char *const *params, long *affected)
{
  return run(db, sql, nparams, params, NULL, NULL, affected);
}

oq_err oq_db_query(oq_db *db, const char *sql, int nparams,
                   const char *const *params, oq_row_fn fn, void *ud)
{
  return run(db, sql, nparams, params, fn, ud, NULL);
}

oq_err oq__db_query_prepared(oq_db *db, const char *sql, int nparams,
                             const char *const *params, oq_row_fn fn, void *ud,
                             long *affected)
{
  return run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                   true);
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

/* oq__db_claim_next_locked inside a transaction (or with its BEGIN still
 * owed), where no prelude goes with the claim: the locks as a statement of
 * their own first, held to the transaction's end, changing no setting of
 * the transaction ($1 NULL); under READ COMMITTED the claim's statement
 * snapshot comes after them all the same. */
static oq_err lock_in_transaction(oq_db *db)
{
  const char *lock = db->claim_lock;
  if (!lock || !db->conn ||
      (db->tx != OQ__DB_TX_BEGIN_OWED &&
       PQtransactionStatus(db->conn) == PQTRANS_IDLE))
    return OQ_OK;
  db->claim_lock = NULL;
  const char *params[4] = {NULL};
  for (int i = 0; i < db->claim_lock_nargs && i < 3; i++)
    params[i + 1] = db->claim_lock_args[i];
  return run_typed(db, lock, 1 + db->claim_lock_nargs, NULL, params, NULL, NULL,
                   NULL, NULL, false);
}

static oq_err query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected, bool prepared)
{
  uint64_t start = policy_now(&db->retry);
  /* read before the key lock, whose own statement clears them */
  bool claim = db->claim_next, in_tx = db->plan_in_tx;
  oq_err le = lock_in_transaction(db);
  if (le != OQ_OK)
    return le;
  /* A claim (or batch ack) inside the caller's transaction gets none of
   * the plan settings (they would hold into the caller's later
   * statements): planned afresh each time, it leaves no plan in the cache
   * for the connection's later claims to reuse, as a plan the server chose
   * for a tiny table would be (it_lib_cold_plan). */
  if (prepared && claim && !in_tx && db->conn &&
      (db->tx == OQ__DB_TX_BEGIN_OWED ||
       PQtransactionStatus(db->conn) != PQTRANS_IDLE))
    prepared = false;
  /* a re-run claim is planned the same way */
  for (int attempt = 1;; attempt++) {
    db->claim_next = claim;
    db->plan_in_tx = in_tx;
    oq_err e = run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                         prepared);
    db->claim_next = false; /* even when the statement was never sent */
    db->plan_in_tx = false;
    if (e != OQ_ERR_RETRY) {
      db->claim_lock = NULL;
      return e;
    }
    /* Inside a transaction the restart is the transaction's: rerunning the
     * statement would only meet 25P02 in the aborted one. */
    if ((db->conn && PQtransactionStatus(db->conn) != PQTRANS_IDLE) ||
        policy_exhausted(&db->retry, attempt, start)) {
      db->claim_lock = NULL;
      if (db->conn && PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        return e;
      return oq__db_fail(db, OQ_ERR_RETRY, db->sqlstate,
                         "gave up after %d restarts (SQLSTATE %s): %s", attempt,
                         db->sqlstate, db->errmsg);
    }
    db->restarts++;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}

void oq__db_claim_next(oq_db *db)
{
  db->claim_next = db->engine == OQ_ENGINE_POSTGRES;
  db->claim_lock = NULL;
  db->plan_in_tx = false;
}

void oq__db_plan_next(oq_db *db)
{
  oq__db_claim_next(db);
  db->plan_in_tx = db->claim_next;
}

void oq__db_claim_next_locked(oq_db *db, const char *lock, int nargs,
                              const char *const *args)
{
  oq__db_claim_next(db);
  db->claim_lock = db->claim_next ? lock : NULL;
  nargs = nargs < 3 ? nargs : 3; /* the lock statement takes three */
  db->claim_lock_nargs = nargs;
  db->claim_lock_args = args;
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
