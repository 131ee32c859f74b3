/*
 * item.h: claiming items, and what a claimed item looks like.
 *
 * A claim sets claim = <session>, claimed_at = now() and attempts + 1 on up
 * to n ready items (queue in the set, run_at <= now(), attempts left), in
 * priority order, in one statement. The attempt count goes up at claim time
 * so an item that crashes its worker every time still runs out of attempts.
 * Claiming only decides where to look; the ack's claim check decides who
 * may acknowledge.
 *
 * Thread safety: uses the caller's db; items are plain memory.
 */
#ifndef ONCEQ_ITEM_H
#define ONCEQ_ITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "onceq/db.h"
#include "onceq/session.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_UUID_LEN 36

typedef struct oq_item {
  char id[OQ_UUID_LEN + 1];
  char *queue;            /* owned by the array */
  char *payload;          /* JSON text, owned by the array */
  int attempt;            /* this run's number, 1-based */
  int max_attempts;       /* dead-lettered when a failure hits this */
  int priority;           /* higher runs first */
  int64_t enqueued_at_us; /* created_at, microseconds since the epoch */
  int64_t claimed_at_us;  /* claimed_at, microseconds since the epoch */
  int slot;               /* onceq_items.part, 0..1023: its part is
                             oq_parts_of_slot(slot, P) (partition.h) */
  bool keyed;             /* carries an ordering key: its key's next item
                             is claimable once this one is settled */
  bool limited;           /* claimed under its queue's concurrency or rate
                             limit (the limited queues' claim) */
  char *ordering_key;     /* its ordering key, owned by the array; NULL:
                             none (or not read: oq_session_claims_read) */
} oq_item;

/*
 * Claim up to max items of the given queues (nqueues > 0). On OQ_OK,
 * *items (free with oq_items_free) holds *n items, possibly 0. A session
 * whose row is gone or expired gives OQ_ERR_SESSION_LOST (the claim locks
 * its session row once, schema v8). OQ_ERR_NOMEM (out of memory
 * while copying the rows) returns no item, yet the statement may have
 * claimed rows for s: release them now (oq_session_claims_read, then
 * oq_release of those not held, ack.h), or they wait for the session's
 * reap.
 * Blocks: one statement (on CockroachDB one per queue, in turn), rerun on
 * restarts; bounded by the deadline and the retry policy. Never waits for
 * items: with none ready it returns 0 of them.
 */
OQ_MUST_CHECK oq_err oq_claim(oq_db *db, const oq_session *s,
                              const char *const *queues, size_t nqueues,
                              int max, oq_item **items, size_t *n);
/*
 * oq_claim with a byte budget as well as a count: the claim stops taking
 * items once max_bytes of payload (the JSON text, as item->payload holds
 * it) are taken. The item that crosses the budget is the last one taken,
 * so one item always comes however large it is, and a claim goes over the
 * budget by less than one payload (at most OQ_MAX_PAYLOAD_BYTES, enqueue.h)
 * per statement. max_bytes <= 0: no byte budget (oq_claim).
 * On PostgreSQL the statement itself stops (a running sum over the rows it
 * chose, no extra round trip); on CockroachDB, whose claim is one UPDATE
 * ... LIMIT per queue, only the count bounds a statement and the budget
 * stops the next one.
 * Blocks: as oq_claim.
 */
OQ_MUST_CHECK oq_err oq_claim_bytes(oq_db *db, const oq_session *s,
                                    const char *const *queues, size_t nqueues,
                                    int max, int64_t max_bytes, oq_item **items,
                                    size_t *n);
/* Free an array from oq_claim. NULL is allowed.
 * Blocks: never. */
void oq_items_free(oq_item *items, size_t n);

#ifdef __cplusplus
}
#endif
#endif
