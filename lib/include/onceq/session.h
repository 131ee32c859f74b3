/*
 * session.h: a worker's registration row in onceq_sessions and its
 * liveness state.
 *
 * Terms:
 *  - expiry: how long after its last heartbeat a session may be reaped;
 *    stored on the row so every reaper honours the owner's setting.
 *  - fenced: the owner's own monotonic clock says its last successful
 *    heartbeat was sent more than (expiry - fence margin) ago, so it stops
 *    its children and starts no work. Safety never depends on it; it
 *    avoids needless duplicate external effects.
 *  - lost: the row is gone (reaped or deleted), or the last successful
 *    heartbeat is older than the expiry on our clock (a reaper may delete
 *    the row at any moment, and the heartbeat refuses to revive an expired
 *    row). Final: a lost session never becomes live again. Every claim it
 *    held is released by whichever reaper deletes the row.
 *
 * The state is computed from the monotonic clock whenever it is read
 * (oq_session_state_get), so no blocked call (a heartbeat stuck on a dead
 * network) can hold a fence off.
 *
 * Thread safety: a session is created and ended on one thread; its state
 * and id may be read from any thread (the library writes the state
 * atomically).
 */
#ifndef ONCEQ_SESSION_H
#define ONCEQ_SESSION_H

#include <stdint.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_session oq_session;

typedef struct oq_session_opts {
  int heartbeat_interval_ms; /* 0: 1000 */
  int expiry_ms;             /* 0: 5000; must be >= 3 * interval + 1000 */
  const char *queues;        /* informational, comma separated; may be NULL */
  const char *version;       /* informational; NULL: the library version */
  int fence_margin_ms;       /* 0: OQ_FENCE_MARGIN_MS; how long before the
                                expiry the owner fences itself: it must
                                cover stopping children (their kill grace) */
} oq_session_opts;

typedef enum oq_session_state {
  OQ_SESSION_LIVE = 0,   /* heartbeats are landing */
  OQ_SESSION_FENCED = 1, /* heartbeat overdue on our clock: start no work */
  OQ_SESSION_LOST = 2    /* the row is gone: re-register to go on */
} oq_session_state;

/* The default fencing margin: fenced once the last good heartbeat is older
 * than expiry_ms - OQ_FENCE_MARGIN_MS. */
#define OQ_FENCE_MARGIN_MS 1000

/* Check settings (with defaults applied). OQ_ERR_CONFIG and one line in
 * errbuf naming the fix when they are unusable: expiry must be at least
 * 3 x interval + 1000 ms, and expiry - margin at least 2 x interval (a
 * fence must not engage between two healthy beats).
 * Blocks: never. */
OQ_MUST_CHECK oq_err oq_session_validate(const oq_session_opts *opts,
                                         char *errbuf, size_t errlen);

/*
 * Register a new session row. On success *out must be freed with
 * oq_session_free (after oq_session_end for a graceful exit). Errors are
 * reported on db; a missing schema gives OQ_ERR_SCHEMA.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy.
 */
OQ_MUST_CHECK oq_err oq_session_open(oq_db *db, const oq_session_opts *opts,
                                     oq_session **out);
/* Graceful end: delete the row, which releases every claim at once.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy. If it fails, a reaper deletes the row after its expiry. */
OQ_MUST_CHECK oq_err oq_session_end(oq_db *db, oq_session *s);
/* Free the handle (does not touch the database). NULL is allowed.
 * Blocks: never. */
void oq_session_free(oq_session *s);

/* The session id (UUID text); owned by s.
 * Blocks: never (this and the accessors below read memory). */
const char *oq_session_id(const oq_session *s);
int oq_session_expiry_ms(const oq_session *s);
int oq_session_interval_ms(const oq_session *s);
int oq_session_fence_margin_ms(const oq_session *s);
/* The state now, from the monotonic clock and the last landed heartbeat.
 * Blocks: never, so no stuck call can hold a fence off. */
oq_session_state oq_session_state_get(const oq_session *s);
/* Monotonic ms at which the last successful heartbeat was *sent*. */
uint64_t oq_session_last_ok_ms(const oq_session *s);
/* Monotonic ms at which s fences / is lost unless a heartbeat lands. */
uint64_t oq_session_fence_at_ms(const oq_session *s);
uint64_t oq_session_expires_at_ms(const oq_session *s);

#ifdef __cplusplus
}
#endif
#endif
