/*
 * schedule.h: the rows of onceq_schedules, written: `onceq schedule add`
 * and `rm` make and remove them, the coordinator's leader advances each
 * due one and records the item it enqueued (through oq_enqueue with the
 * occurrence's unique key, in the same transaction). Reading them for an
 * operator is the read layer's (`onceq schedule list`); the cron
 * arithmetic is the caller's: these calls take times as text.
 *
 * Terms:
 *  - occurrence: one due time of a schedule, next_run_at as the database
 *    wrote it (text that round-trips exactly through timestamptz).
 *  - advance: the compare-and-set that moves next_run_at from the
 *    occurrence being fired to the following one, so that of two leaders
 *    (or a leader and a retried transaction) one fires it.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_SCHEDULE_H
#define ONCEQ_SCHEDULE_H

#include <stdbool.h>

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Add the schedule name (cron text, queue, payload JSON text, first
 * next_run_at as a timestamptz text) unless one of that name exists:
 * *added says which. One statement in its own transaction (run again on a
 * restart); a payload that is not JSON is the server's class 22 error
 * (OQ_ERR_INVALID, oq_db_errmsg says why).
 * Blocks: one round trip, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_schedule_add(oq_db *db, const char *name,
                                     const char *cron, const char *queue,
                                     const char *payload,
                                     const char *next_run_at, bool *added);

/*
 * Remove the schedule name in the caller's transaction (oq_db_transact):
 * *removed (may be NULL) is the number of rows removed, 0 when there was
 * none of that name.
 * Blocks: one statement, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_schedule_remove(oq_db *db, const char *name,
                                        long *removed);

/*
 * Advance name from the occurrence due_at to next_at (both timestamptz
 * text) in the caller's transaction, if next_run_at is still due_at.
 * *advanced: the compare-and-set matched (false: another leader fired it,
 * or the schedule changed or went). *still_due: the new next_run_at is due
 * too (catching up after downtime).
 * Blocks: one statement, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_schedule_advance(oq_db *db, const char *name,
                                         const char *due_at,
                                         const char *next_at, bool *advanced,
                                         bool *still_due);

/*
 * Record item_id as the item the schedule name last enqueued, in the
 * caller's transaction (the one that advanced it and enqueued the item).
 * Blocks: one statement, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_schedule_set_last_item(oq_db *db, const char *name,
                                               const char *item_id);

#ifdef __cplusplus
}
#endif
#endif
