/*
 * ack.h: acknowledging, failing and releasing claimed items.
 *
 * The guarantee lives here, in one predicate checked inside the ack
 * transaction:
 *
 *   BEGIN;
 *     -- the handler's own writes (oq_ack_fn)
 *     DELETE FROM onceq_items WHERE id = $1 AND claim = $2;  -- 1 row or
 * ROLLBACK COMMIT;
 *
 * Of all the transactions that try to acknowledge an item, at most one
 * commits. An ambiguous commit is reconciled from the database, never re-run
 * blindly: item gone -> it was acknowledged (exactly once, by someone);
 * item still claimed by us -> the transaction is run again; anything else ->
 * the claim was lost. After OQ_ERR_AMBIGUOUS, calling oq_ack again for the
 * same item on the same db reconciles first; it never re-runs blindly.
 *
 * Thread safety: every call uses the caller's db, on one thread.
 */
#ifndef ONCEQ_ACK_H
#define ONCEQ_ACK_H

#include <stdbool.h>
#include <stddef.h>
#include "onceq/db.h"
#include "onceq/item.h"
#include "onceq/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The handler's database effects, run on db inside the open ack transaction
 * (use oq_db_exec / oq_db_query or raw libpq via oq_db_pgconn). It may run
 * more than once when the transaction restarts; only the run that commits
 * counts. Return OQ_OK to go on to the claim check; anything else rolls back
 * and is returned from oq_ack.
 */
typedef oq_err (*oq_ack_fn)(oq_db *db, const oq_item *item, void *ud);

/* A kept result is cut to this many characters (onceq_results.truncated
 * then says so); see wait.h. */
#define OQ_RESULT_MAX_CHARS 65536

typedef struct oq_ack_opts {
  bool history;       /* also write onceq_done in the same transaction */
  const char *result; /* result text kept in history and, for an item with
                         keep_result, in onceq_results; may be NULL. For
                         oq_ack_batch: every item's, unless results is set */
  const char *const *results; /* oq_ack_batch only: results[i] for ids[i]
                                 (NULL entries: none); may be NULL */
  /* The caller already cut the result (a handler's output past its own
   * bound): onceq_results.truncated is set as for a cut at
   * OQ_RESULT_MAX_CHARS, so a waiter sees that it is not all of it.
   * result_truncated goes with result, results_truncated[i] (may be NULL:
   * none cut) with results[i]. */
  bool result_truncated;
  const bool *results_truncated;
  /* oq_ack_many_sql only, PostgreSQL only: next != NULL asks the batch
   * to claim, in each committing round's transaction after the claim
   * check, the next item of every acknowledged keyed item's key (a round
   * without an item whose .keyed is set sends nothing more): the key's
   * first remaining item by enqueue_seq, if it is unclaimed, ready, has
   * attempts left and its queue is neither paused nor limited (those keep
   * the normal claim), with the claim's session lock (docs/design.md 5a,
   * "The ack's next item"). The claim check is unchanged. *next (free with
   * oq_items_free) and *nnext get the items of the rounds whose COMMIT
   * succeeded, claimed for s exactly as oq_claim claims them. *next_unknown
   * (may be NULL) is set when a round that asked for them ended with its
   * commit unknown or its rows unread: rows may then be claimed by s that
   * are not in *next, so run the reconciliation (docs/design.md 4a). On
   * CockroachDB nothing is asked and *nnext is 0. The keys are the items'
   * own ordering_key, as the claim returned them: the statement relies on
   * the acknowledged item being its key's claimed one, so a key that is
   * not the item's may claim that key's head while another of its items
   * runs (an item with keyed set and no ordering_key has its key read from
   * the database instead). */
  oq_item **next;
  size_t *nnext;
  bool *next_unknown;
  /* With next: a partitioned session's claims look in its own parts only,
   * and so do its next items: only items whose slot (oq_item.slot) is one
   * of next_slots[0..nnext_slots) are taken (a key's items share one slot,
   * so pass the slots of its keyed items that the session may still claim
   * from, oq_parts_claimable; none: no next item at all). NULL: any slot,
   * for a session that is not partitioned. */
  const int *next_slots;
  size_t nnext_slots;
} oq_ack_opts;

/*
 * Acknowledge one item: fn's writes (fn may be NULL) plus the claim-checked
 * DELETE, in one transaction, retried on restarts. Returns OQ_OK when the
 * item is acknowledged, OQ_ERR_CLAIM_LOST (fn's writes rolled back) when the
 * claim is no longer ours, OQ_ERR_AMBIGUOUS only when reconciliation itself
 * could not reach the database (call oq_ack again later: it reconciles
 * first). opts may be NULL. When fn's own writes deleted the item's
 * onceq_items row or changed its claim, the claim check finds nothing to
 * delete while the item, read back after the rollback, is still ours: that
 * is OQ_ERR_CALLBACK (a failed attempt: oq_fail it), with a message naming
 * onceq_items, never a lost claim (which would leave the attempt uncounted
 * and the item running forever).
 *
 * *reconciled (may be NULL) is set true when the verdict came from
 * reconciling an ambiguous commit.
 * Blocks: one transaction (fn, the claim check, COMMIT), rerun on restarts; a
 * lost connection is reconnected and the commit reconciled; bounded by the
 * deadline per statement and the retry policy (30 s by default) for restarts
 * and reconnecting; cancel by: return an error from fn (the ack rolls back).
 */
OQ_MUST_CHECK oq_err oq_ack(oq_db *db, const oq_session *s, const oq_item *item,
                            oq_ack_fn fn, void *ud, const oq_ack_opts *opts,
                            bool *reconciled);

/*
 * Acknowledge many items whose handlers wrote nothing in the database, in
 * one statement: DELETE ... WHERE id = ANY($ids) AND claim = $s RETURNING id.
 * acked[i] is set for each ids[i] that was acknowledged by this call; the
 * others were lost. *nacked (may be NULL) gets the count.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy.
 */
OQ_MUST_CHECK oq_err oq_ack_batch(oq_db *db, const oq_session *s,
                                  const char *const *ids, size_t n, bool *acked,
                                  size_t *nacked, const oq_ack_opts *opts);

typedef enum oq_fail_outcome {
  OQ_FAIL_RETRY = 0, /* released; runs again at now() + backoff */
  OQ_FAIL_DEAD = 1   /* attempts ran out: moved to onceq_dead */
} oq_fail_outcome;

/*
 * Record a failed attempt, with the claim check on the claim's identity
 * (session plus item->claimed_at_us, as oq_claim returned it; 0 matches any
 * claim of s): release the item with run_at = now() + delay and last_error
 * kept, or, when attempts are exhausted, move it to onceq_dead in the same
 * statement. delay_ms < 0 means the default item policy
 * (oq_retry_policy_item) for this attempt. OQ_ERR_CLAIM_LOST when that
 * claim is no longer ours, so a retry of a call whose reply was lost cannot
 * touch a newer claim of the same item. error (NULL: "failed") is stored as
 * clean text (text.h: invalid UTF-8 becomes '?'), as are kept results.
 * Blocks: one statement (two when the item dies), rerun on restarts; bounded by
 * the deadline and the retry policy.
 */
OQ_MUST_CHECK oq_err oq_fail(oq_db *db, const oq_session *s,
                             const oq_item *item, const char *error,
                             int delay_ms, oq_fail_outcome *outcome);

/*
 * Give claimed items back without counting the attempt (graceful shutdown,
 * fencing, giving up a partition, the reconciliation sweep). Each item is
 * matched by its claim's identity (id and claimed_at_us; 0 matches any
 * claim of s). *nreleased (may be NULL) gets the count; items no longer
 * claimed by that claim are skipped.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy.
 */
OQ_MUST_CHECK oq_err oq_release(oq_db *db, const oq_session *s,
                                const oq_item *items, size_t n,
                                size_t *nreleased);

/*
 * Every item claimed by s in the database, as items carrying only id and
 * claimed_at_us (queue and payload NULL): what the reconciliation sweep
 * compares with what the worker holds in memory. Free *items with
 * oq_items_free(*items, *n).
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy.
 */
OQ_MUST_CHECK oq_err oq_session_claims_read(oq_db *db, const oq_session *s,
                                            oq_item **items, size_t *n);

/*
 * Batches: several items acknowledged in ONE transaction, each with its own
 * effects, and one claim-checked DELETE ... WHERE id = ANY($ids) AND
 * claim = $session that fails the transaction unless it deleted every id.
 * An item's effects commit if and only if that item is acknowledged: when
 * an item's effects fail, or a claim turns out lost, the transaction rolls
 * back and runs again without that item. An item whose effects delete or
 * unclaim its own onceq_items row is OQ_ACK_FAILED (as for oq_ack; the
 * check cannot say which item did it, so the rest then run one item per
 * transaction). Restarts (40001/40P01) run it again whole; an ambiguous commit
 * is reconciled per item (gone: done; still ours: run again; else lost). One
 * call costs one transaction when nothing goes wrong.
 */
typedef enum oq_ack_verdict {
  OQ_ACK_PENDING = 0, /* not settled: the call returned an error first */
  OQ_ACK_DONE = 1,    /* acknowledged; its effects committed with it */
  OQ_ACK_FAILED = 2,  /* its effects failed (error text kept): nothing of
                         it committed; record the attempt with oq_fail */
  OQ_ACK_LOST = 3     /* no longer claimed by s: nothing of it committed */
} oq_ack_verdict;

typedef struct oq_ack_result {
  oq_ack_verdict verdict;
  char error[512]; /* OQ_ACK_FAILED: why (one line, password masked) */
} oq_ack_result;

/*
 * The batch form of the ack callback: write item's effects on db inside
 * the open batch transaction (it may run again when the batch reruns).
 * Return OQ_OK, or an error: the item is then OQ_ACK_FAILED (unless the
 * error is a restart or a lost connection, which rerun the batch).
 * opts->results is read after the round's callbacks ran, so a callback may
 * fill in its own item's entry (results[i] for items[i]).
 * Blocks: one transaction per round; a round that fails an item or finds a
 * claim lost runs again without it (at most n + 1 rounds); restarts and
 * reconnects as in oq_ack; bounded by the deadline per statement and the retry
 * policy; cancel by: return an error from fn (that item fails).
 */
OQ_MUST_CHECK oq_err oq_ack_many(oq_db *db, const oq_session *s,
                                 const oq_item *items, size_t n, oq_ack_fn fn,
                                 void *ud, const oq_ack_opts *opts,
                                 oq_ack_result *results);

/*
 * oq_ack_many with one SQL statement per item as the effects, pipelined
 * (libpq pipeline mode): BEGIN, the n statements, the check and COMMIT go
 * out together, so a batch costs about one round trip. The statement's
 * parameters, any subset of them: $1 payload (jsonb), $2 item id (uuid),
 * $3 queue (text), $4 attempt (int). An item's result (history, and
 * onceq_results when it keeps one) is opts' result for it if given, else
 * the first row its statement returned, as JSON (oq_db_exec_typed_json's
 * shape). A statement that returns rows costs one more round trip: the
 * check is sent when the rows are in, inside the same transaction.
 * Blocks: like oq_ack_many, each round one pipelined round trip; bounded by the
 * deadline per statement and the retry policy.
 */
OQ_MUST_CHECK oq_err oq_ack_many_sql(oq_db *db, const oq_session *s,
                                     const oq_item *items, size_t n,
                                     const char *sql, const oq_ack_opts *opts,
                                     oq_ack_result *results);

#ifdef __cplusplus
}
#endif
#endif
