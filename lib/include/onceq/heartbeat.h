/*
 * heartbeat.h: the thread that keeps a session alive, on its OWN connection.
 *
 * Every interval it runs UPDATE onceq_sessions SET heartbeated_at = now()
 * WHERE id = $1 AND heartbeated_at + expiry >= now(). One row: the session
 * is live. Zero rows: the session is lost (reaped, or expired and about to
 * be: an expired session is never revived), reported through the callback,
 * never silently. A connection error is not fatal: it reconnects on the
 * next beat. Fencing does not depend on this thread: the session computes
 * its state from the clock when read (session.h). Every statement has the
 * connection's deadline (oq_db_opts.deadline_ms), so stop() returns within
 * about that long even when the network is gone.
 *
 * Thread safety: start/stop/pause from the owning thread. The callback
 * runs on the heartbeat thread; keep it short and thread-safe.
 */
#ifndef ONCEQ_HEARTBEAT_H
#define ONCEQ_HEARTBEAT_H

#include <stdbool.h>
#include "onceq/db.h"
#include "onceq/session.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_heartbeat oq_heartbeat;

/* Called on the heartbeat thread whenever the session state changes. */
typedef void (*oq_session_event_fn)(void *ud, oq_session *s,
                                    oq_session_state state);

/*
 * Start beating for s (which must outlive the heartbeat) on a connection
 * made with dbo (copied) by the heartbeat's thread. On success free with
 * oq_heartbeat_stop. On failure (memory, a thread) nothing needs cleaning
 * up and errbuf holds one line. A connection that cannot be made is
 * logged and retried at each beat time, like a lost one; the session
 * fences itself by its clock meanwhile.
 * Blocks: starting a thread; connecting and the beats run on that thread.
 */
OQ_MUST_CHECK oq_err oq_heartbeat_start(const oq_db_opts *dbo, oq_session *s,
                                        oq_session_event_fn cb, void *ud,
                                        oq_heartbeat **out, char *errbuf,
                                        size_t errlen);
/* Stop the thread (within about one interval), close its connection and
 * free. NULL is allowed.
 * Blocks: joins the thread: about one interval, at most one beat's statement
 * more (bounded by dbo's deadline), or one connection attempt (bounded by
 * dbo's connect timeout). */
void oq_heartbeat_stop(oq_heartbeat *hb);

/* Heartbeats that landed since start.
 * Blocks: never. */
uint64_t oq_heartbeat_count(const oq_heartbeat *hb);

#ifdef __cplusplus
}
#endif
#endif
