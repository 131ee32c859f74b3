/*
 * queues.h: per-queue controls, stored in the database (onceq_queues) so
 * every worker of the fleet obeys them: pause and resume (`onceq pause`,
 * `onceq resume`), a concurrency limit and a rate limit (`onceq limit`).
 *
 * Terms:
 *  - paused: claims skip the queue. The claim statement reads the control
 *    itself, so a pause takes effect at every worker's next claim (within
 *    one poll interval), with no message to the workers. Items already
 *    claimed run on and are acknowledged, failed or released as usual;
 *    enqueue still works (items wait, ready, until a resume); the reap
 *    still releases an expired session's items (they wait too).
 *  - A control only decides where a claim looks; who may acknowledge an
 *    item is still decided by the ack's claim check alone (docs/design.md).
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_QUEUES_H
#define ONCEQ_QUEUES_H

#include <stdbool.h>
#include <stdint.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Pause queue (a non-empty name; the queue need not have items yet): no
 * claim takes its items until oq_queue_resume. Idempotent. Needs UPDATE
 * and INSERT on onceq_queues (the onceq_coordinator role,
 * deploy/grants). Inside oq_db_transact it is part of the caller's
 * transaction.
 * Blocks: one statement, retried on a serialization failure: bounded by
 * the deadline and the retry policy.
 */
OQ_MUST_CHECK oq_err oq_queue_pause(oq_db *db, const char *queue);
/* Resume queue: claims take its items again. Idempotent; resuming a queue
 * that was never paused is no error. Same rights as oq_queue_pause.
 * Blocks: as oq_queue_pause. */
OQ_MUST_CHECK oq_err oq_queue_resume(oq_db *db, const char *queue);
/*
 * Set queue's fleet-wide concurrency limit: at most max_running of its
 * items claimed at once across every worker and process (a crashed
 * worker's items count until its session is reaped); max_running < 0
 * removes the limit. A lower limit than what runs now claims nothing until
 * enough items finish; none are taken away. Takes effect at once for new
 * claims (a limited queue is claimed in a transaction that locks its
 * control row); workers notice a queue newly limited within 500 ms. Same
 * rights as oq_queue_pause.
 * Blocks: as oq_queue_pause.
 */
OQ_MUST_CHECK oq_err oq_queue_set_limits(oq_db *db, const char *queue,
                                         int max_running);
/*
 * Set queue's fleet-wide rate limit: at most starts claims per interval_ms
 * across the fleet, as a token bucket of `starts` tokens refilled at
 * `starts` per interval_ms (so a burst of up to `starts` after a quiet
 * spell; in the long run starts per interval; any one interval sees at most
 * 2 x starts). starts <= 0 removes it. Stored with the queue's other
 * controls and applied by the claim (like oq_queue_set_limits); setting it
 * refills the bucket. Same rights as oq_queue_pause.
 * Blocks: as oq_queue_pause.
 */
OQ_MUST_CHECK oq_err oq_queue_set_rate(oq_db *db, const char *queue, int starts,
                                       int64_t interval_ms);
/* *paused: whether queue is paused now (false for a queue with no
 * controls).
 * Blocks: one read, retried like a claim: bounded by the deadline. */
OQ_MUST_CHECK oq_err oq_queue_paused_get(oq_db *db, const char *queue,
                                         bool *paused);

/* A queue's controls as stored now (oq_queue_controls_get). */
typedef struct oq_queue_controls {
  bool paused;              /* claims skip the queue */
  int max_running;          /* concurrency limit; -1: none */
  int rate_limit;           /* starts per rate_interval_ms; -1: none */
  int64_t rate_interval_ms; /* the rate limit's interval; -1: none */
} oq_queue_controls;

/* *out: queue's controls (`onceq limit QUEUE` shows them): not paused and
 * -1 (no limit) everywhere for a queue that has none. Needs SELECT on
 * onceq_queues.
 * Blocks: one read, retried like a claim: bounded by the deadline. */
OQ_MUST_CHECK oq_err oq_queue_controls_get(oq_db *db, const char *queue,
                                           oq_queue_controls *out);

#ifdef __cplusplus
}
#endif
#endif
