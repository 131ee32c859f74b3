/*
 * reaper.h: deletes sessions whose heartbeat is older than their own expiry.
 *
 * The transaction that deletes a session also releases every item it held
 * (claim = NULL; schema v8, where each claim locks its session row instead
 * of a foreign key checking every claimed row), and so does
 * oq_session_end; a reap also releases items whose session row was deleted
 * by hand. Items abandoned on their
 * last attempt (attempts >= max_attempts, unclaimed) are then moved to
 * onceq_dead: a poison item that kills its worker every time still ends.
 * Reaping is idempotent, so any number of reapers may run at once; the
 * database's now() decides expiry, never a worker clock.
 *
 * Thread safety: oq_reap uses the caller's db (one thread); the reaper
 * thread owns its own connection.
 */
#ifndef ONCEQ_REAPER_H
#define ONCEQ_REAPER_H

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One reap pass. *sessions / *dead (either may be NULL) get the number of
 * sessions deleted and abandoned items dead-lettered.
 * Blocks: two statements, rerun on restarts; bounded by the deadline and the
 * retry policy. */
OQ_MUST_CHECK oq_err oq_reap(oq_db *db, int *sessions, int *dead);

typedef struct oq_reaper oq_reaper;

/* Start a thread that reaps every interval_ms, +/- 25% jitter, on its own
 * connection. Free with oq_reaper_stop.
 * Blocks: connecting (like oq_db_open with dbo) and starting a thread. */
OQ_MUST_CHECK oq_err oq_reaper_start(const oq_db_opts *dbo, int interval_ms,
                                     oq_reaper **out, char *errbuf,
                                     size_t errlen);
/* Stop, close and free. NULL is allowed.
 * Blocks: joins the thread: at most one reap pass (bounded by dbo's deadline).
 */
void oq_reaper_stop(oq_reaper *r);

#ifdef __cplusplus
}
#endif
#endif
