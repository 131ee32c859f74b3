/*
 * wait.h: waiting for items' outcomes (`onceq wait`, `onceq push --wait`).
 *
 * Terms:
 *  - keep_result: the onceq_items column by which an item asks for its
 *    outcome to be kept (a plain INSERT may set it; oq_wait sets it on the
 *    live items it waits for).
 *  - outcome: done (acknowledged: a row in onceq_results written by the
 *    ack's own statement, with the handler's result, bounded to
 *    OQ_RESULT_MAX_CHARS), dead (a row in onceq_dead), cancelled (a row in
 *    onceq_results written by `onceq cancel`).
 *
 * Every check reads the tables in ONE statement (one snapshot), so an ack
 * that rolled back is never seen: its item is still live. A waiter is
 * woken on PostgreSQL by NOTIFY onceq_finished (sent by a trigger when a
 * keep_result item leaves onceq_items, with the item's id as payload;
 * delivered at commit, so a rolled back ack wakes nobody): it re-checks
 * only the ids a notification names (every id when one carries no id),
 * so other items' completions cost it no query, and re-checks every id
 * every 2 s anyway, so a lost notification is still found. On CockroachDB
 * (no LISTEN) it polls with capped exponential backoff and jitter.
 *
 * Design: docs/design.md §4c.
 *
 * Thread safety: uses the caller's db, on one thread. On PostgreSQL the
 * connection LISTENs while oq_wait runs and UNLISTENs before it returns.
 */
#ifndef ONCEQ_WAIT_H
#define ONCEQ_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include "onceq/db.h"
#include "onceq/item.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oq_wait_state {
  OQ_WAIT_PENDING = 0,   /* still live (time ran out, or stopped) */
  OQ_WAIT_DONE = 1,      /* acknowledged; result is the kept result */
  OQ_WAIT_DEAD = 2,      /* dead-lettered; error is its last error */
  OQ_WAIT_CANCELLED = 3, /* deleted by `onceq cancel`; error is its last
                            error then (NULL: no attempt had failed) */
  OQ_WAIT_UNKNOWN = 4    /* not live and no record: no such item, or its
                            record's retention has passed */
} oq_wait_state;

typedef struct oq_wait_result {
  char id[OQ_UUID_LEN + 1];
  oq_wait_state state;
  char *result;   /* DONE: the kept result, or NULL (none kept); owned */
  bool truncated; /* DONE: result is cut (OQ_RESULT_MAX_CHARS, or the
                     handler's own bound: oq_ack_opts.result_truncated) */
  char *error;    /* DEAD, CANCELLED: last_error (may be NULL); owned */
  int attempts;   /* DEAD: attempts made */
} oq_wait_result;

/* Polled about every 100 ms while waiting: true stops the wait. */
typedef bool (*oq_wait_stop_fn)(void *ud);

typedef struct oq_wait_opts {
  long timeout_ms;      /* < 0: no limit; 0: check once */
  oq_wait_stop_fn stop; /* may be NULL */
  void *stop_ud;
  int poll_min_ms; /* CockroachDB: first poll delay (0: 50 ms) */
  int poll_max_ms; /* CockroachDB: poll delay cap (0: 1000 ms) */
  /* may be NULL: LISTEN for wake-ups on this connection instead of db (a
   * direct one when db goes through a transaction pooler, which cannot
   * carry LISTEN: oq_db_pooled); the caller's, reconnected when it drops,
   * not closed; used from oq_wait's thread only while it runs */
  oq_db *listen;
} oq_wait_opts;

/*
 * Wait until every one of the n items (ids: UUID text) has an outcome, the
 * timeout passes or stop() says so. out[i] describes ids[i]; each is
 * settled once and then no longer read. Returns OQ_OK when all settled,
 * OQ_ERR_TIMEOUT when time ran out (the unsettled ones are PENDING),
 * OQ_ERR_CALLBACK when stopped, OQ_ERR_INVALID for an id that is not a
 * UUID, or a database error (lost connections are reconnected within the
 * db's retry policy). Free the strings with oq_wait_results_free, also
 * after an error. opts may be NULL (wait forever).
 * Blocks: until every item has an outcome; bounded by opts->timeout_ms (< 0: no
 * limit) and, while the database is away, the retry policy; cancel by:
 * opts->stop (polled about every 100 ms).
 */
OQ_MUST_CHECK oq_err oq_wait(oq_db *db, const char *const *ids, size_t n,
                             const oq_wait_opts *opts, oq_wait_result *out);

/* Free the strings of n results (not the array). NULL is fine.
 * Blocks: never. */
void oq_wait_results_free(oq_wait_result *out, size_t n);

/* "pending", "done", "dead", "cancelled" or "unknown".
 * Blocks: never. */
const char *oq_wait_state_name(oq_wait_state s);

#ifdef __cplusplus
}
#endif
#endif
