/*
 * retention.h: deleting old history a batch at a time: the onceq_done rows
 * of acknowledged items, dead letters (onceq_dead) and kept outcomes
 * (onceq_results). The coordinator's janitor runs it (`onceq coordinator
 * --keep-done/--keep-dead/--keep-results`).
 *
 * Terms: an age is measured with the database's now() against done_at,
 * died_at or finished_at; each statement walks that column's index from
 * the oldest row, so no statement holds many locks or runs long.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_RETENTION_H
#define ONCEQ_RETENTION_H

#include <stdint.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most rows one oq_retention_delete deletes. */
#define OQ_RETENTION_BATCH 1000

typedef enum oq_retained {
  OQ_RETAINED_DONE,          /* onceq_done rows, by done_at */
  OQ_RETAINED_DEAD,          /* onceq_dead rows, by died_at */
  OQ_RETAINED_DEAD_NOTIFIED, /* onceq_dead rows already notified (a row
                                the webhook has not sent yet is kept) */
  OQ_RETAINED_RESULTS        /* onceq_results rows, by finished_at */
} oq_retained;

/*
 * Delete at most OQ_RETENTION_BATCH rows of `what` older than keep_ms,
 * oldest first, in the caller's transaction (run it in oq_db_transact).
 * *deleted (may be NULL) gets the count: under OQ_RETENTION_BATCH means
 * no older row is left.
 * Blocks: one statement, not retried: bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_retention_delete(oq_db *db, oq_retained what,
                                         int64_t keep_ms, long *deleted);

#ifdef __cplusplus
}
#endif
#endif
