/*
 * settle.h: bringing a job's outcome to the database while its session
 * lives: a failed attempt (retry later or dead-letter) or a release (the
 * job never ran, or was stopped). Every call is matched by the claim's
 * identity (session plus claimed_at), so a retry whose first reply was lost
 * cannot touch a newer claim of the same item. A job whose outcome cannot
 * be written asks for a reconciliation sweep (runtime.h), never strands
 * its claim.
 *
 * Thread safety: each call uses the caller's db, on the caller's thread.
 */
#ifndef ONCEQ_WORKER_SETTLE_H
#define ONCEQ_WORKER_SETTLE_H

#include "runtime.h"

/* Whether to retry settling j after a transient error in round `round`:
 * not once the worker stops now, the session is lost (its reap releases the
 * claim) or 1000 rounds passed. */
bool wk_keep_trying(wk *w, const wk_job *j, int round);

/* Open a connection for a thread that has job j to settle (lazily: an
 * outage at start-up is not fatal there), retrying while wk_keep_trying
 * says j may still be settled. The first failure is logged once as
 * "<who>: <error>" with j's session and item_id (NULL: none). Returns the
 * connection (close with oq_db_close) or NULL when it gave up. */
oq_db *wk_connect_for(wk *w, const oq_db_opts *o, const char *who,
                      const wk_job *j, const char *item_id, uint64_t *rng);

/* Record a failed attempt of j: retry after retry_after_ms (< 0: the item
 * backoff) or dead-letter. Retries transient errors with backoff. */
void wk_settle_failure(wk *w, oq_db *db, wk_job *j, const char *why,
                       int retry_after_ms);

/* Give j back without counting the attempt (draining, fenced, stopped). */
void wk_settle_release(wk *w, oq_db *db, wk_job *j);

/* Reconnect db when its connection is gone (best effort). */
void wk_db_revive(oq_db *db);

#endif
