/*
 * dead.h: what is recorded on a dead letter (a row of onceq_dead) after it
 * died: that the dead-job webhook delivered it (`onceq coordinator
 * --notify-url`). Retrying and deleting dead letters are retry.h and
 * retention.h.
 *
 * Terms: a death is one row's (id, died_at): an item that is retried and
 * dies again is a new death, with its own mark.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_DEAD_H
#define ONCEQ_DEAD_H

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Mark the death (id, died_at as the database wrote it) notified now, with
 * the receiver's HTTP status: one statement in its own transaction (run
 * again on a restart). A death already marked (by another leader) is left
 * as it is: *marked (may be NULL) is 0 then, 1 otherwise.
 * Blocks: one round trip, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_dead_mark_notified(oq_db *db, const char *id,
                                           const char *died_at,
                                           long http_status, long *marked);

#ifdef __cplusplus
}
#endif
#endif
