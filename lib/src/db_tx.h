/*
 * db_tx.h: the transaction runner and the restart retries (db_tx.c;
 * oq_db_transact is public, onceq/db.h).
 * Included through internal.h; see db_state.h for the connection files.
 */
#ifndef ONCEQ_DB_TX_H
#define ONCEQ_DB_TX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

/* The next single statement on db (outside a transaction) is a claim:
 * on PostgreSQL it runs with jit = off and plan_cache_mode =
 * force_generic_plan, transaction-local (pooler-safe).
 * A claim's estimated cost grows with the queue and passes jit_above_cost
 * near 100,000 ready items, where compiling it took about 35 ms of a
 * 60 ms claim; its plan is an index walk that JIT does not speed up. */
void oq__db_claim_next(oq_db *db);
/* oq_db_set_async_commits' setting: a claim in a transaction of its own
 * asks for the same commit (claim.c, OQ__SQL_KEY_LOCK) */
bool oq__db_async_commits(const oq_db *db);

/*
 * Run one statement as its own implicit transaction, re-running it on
 * 40001/40P01 per the db's retry policy (claim, heartbeat, reap, batch ack
 * are single statements; on CockroachDB the server retries them too).
 */
oq_err oq__db_query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected);
/*
 * oq_db_query and oq__db_query_retry through a statement prepared once per
 * connection (oq__db_prepare_once): for the few library statements that
 * run per claim or per ack, so the server parses and plans them
 * once (a 1-row claim: about 1 ms less, measured in docs/benchmarks.md).
 * A Parse error fails as "query failed", like the unprepared call.
 */
oq_err oq__db_query_prepared(oq_db *db, const char *sql, int nparams,
                             const char *const *params, oq_row_fn fn, void *ud,
                             long *affected);
oq_err oq__db_query_prepared_retry(oq_db *db, const char *sql, int nparams,
                                   const char *const *params, oq_row_fn fn,
                                   void *ud, long *affected);

#endif
