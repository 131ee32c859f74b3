/*
 * session.h: a worker's registration row in onceq_sessions and its
 * liveness state.
 *
 * Terms:
 *  - expiry: how long after its last heartbeat a session may be reaped;
 *    stored on the row so every reaper honours the owner's setting.
 *  - fenced: the owner's own monotonic clock says its last successful
 *    heartbeat was sent more than (expiry - margin) ago, so it stops starting
 *    work. Safety never depends on it; it avoids needless duplicate
 *    external effects.
 *  - lost: the row is gone (reaped or deleted). Every claim it held has
 *    been released; its acks can no longer match.
 *
 * Thread safety: a session is created and ended on one thread; its state
 * and id may be read from any thread (the heartbeat thread writes the
 * state atomically).
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
} oq_session_opts;

typedef enum oq_session_state {
  OQ_SESSION_LIVE = 0,   /* heartbeats are landing */
  OQ_SESSION_FENCED = 1, /* heartbeat overdue on our clock: start no work */
  OQ_SESSION_LOST = 2    /* the row is gone: re-register to go on */
} oq_session_state;

/* The fencing margin: fenced once the last good heartbeat is older than
 * expiry_ms - OQ_FENCE_MARGIN_MS. */
#define OQ_FENCE_MARGIN_MS 1000

/* Check settings (with defaults applied). OQ_ERR_CONFIG and one line in
 * errbuf naming the fix when they are unusable. */
OQ_MUST_CHECK oq_err oq_session_validate(const oq_session_opts *opts,
                                         char *errbuf, size_t errlen);

/*
 * Register a new session row. On success *out must be freed with
 * oq_session_free (after oq_session_end for a graceful exit). Errors are
 * reported on db; a missing schema gives OQ_ERR_SCHEMA.
 */
OQ_MUST_CHECK oq_err oq_session_open(oq_db *db, const oq_session_opts *opts,
                                     oq_session **out);
/* Graceful end: delete the row, which releases every claim at once. */
OQ_MUST_CHECK oq_err oq_session_end(oq_db *db, oq_session *s);
/* Free the handle (does not touch the database). NULL is allowed. */
void oq_session_free(oq_session *s);

/* The session id (UUID text); owned by s. */
const char *oq_session_id(const oq_session *s);
int oq_session_expiry_ms(const oq_session *s);
int oq_session_interval_ms(const oq_session *s);
oq_session_state oq_session_state_get(const oq_session *s);
/* Monotonic ms at which the last successful heartbeat was *sent*. */
uint64_t oq_session_last_ok_ms(const oq_session *s);

/* Used by the heartbeat: record a landed heartbeat sent at sent_ms, or a
 * state change. A LOST session never becomes LIVE again. */
void oq_session_mark_ok(oq_session *s, uint64_t sent_ms);
void oq_session_mark(oq_session *s, oq_session_state st);
/* Re-evaluate fencing against now_ms; returns the resulting state. */
oq_session_state oq_session_check_fence(oq_session *s, uint64_t now_ms);

#ifdef __cplusplus
}
#endif
#endif
