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

/* The next single statement on db is a claim (or a batch ack): outside a
 * transaction, on PostgreSQL, its implicit transaction sets
 * OQ__PLAN_SETTINGS (no JIT, one generic plan, made without sequential or
 * bitmap scans; db_tx.c has the reasons), transaction-local (pooler-safe);
 * inside the caller's transaction it is sent unnamed, with no setting
 * (oq__db_query_prepared_retry).
 * A claim's estimated cost grows with the queue and passes jit_above_cost
 * near 100,000 ready items, where compiling it took about 35 ms of a
 * 60 ms claim; its plan is an index walk that JIT does not speed up. */
void oq__db_claim_next(oq_db *db);
/* The same, and the claim's implicit transaction (the prelude, the claim,
 * one Sync: one round trip) starts with the statement lock, whose $1 is
 * whether the commit may skip the WAL flush (oq_db_set_async_commits) and
 * $2.. the nargs (3) args; lock sets the claim's settings itself
 * (OQ__PLAN_SETTINGS). Used for a keyed queue's key locks (claim.c,
 * OQ__SQL_KEY_LOCK): taken before the claim's snapshot, held to its commit.
 * Inside a transaction the lock goes first as a statement of its own, with
 * $1 NULL (no setting changes).
 * lock and args must outlive the next oq__db_query_prepared_retry, which
 * forgets them. */
void oq__db_claim_next_locked(oq_db *db, const char *lock, int nargs,
                              const char *const *args);
/* The next single statement is the library's own, prepared (its plan is
 * kept): the same settings, also inside a transaction, sent in the same
 * pipeline (after the BEGIN when that is still owed). There they hold to
 * the transaction's end, so the statement must be the transaction's last
 * before the library's own COMMIT: ack.c's single ack, never a claim or
 * anything else inside a caller's transaction, whose later statements are
 * the caller's (oq__db_claim_next's statement is sent unnamed there). */
void oq__db_plan_next(oq_db *db);

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
