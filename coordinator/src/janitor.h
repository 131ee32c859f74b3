/*
 * janitor.h: history retention, run by the coordinator leader: deletes
 * onceq_done rows older than --keep-done and onceq_dead rows older than
 * --keep-dead, CO_RETENTION_BATCH rows per statement so no statement holds
 * many locks or runs long, and at most CO_RETENTION_MAX_BATCHES statements
 * per table per pass (the rest waits for the next interval).
 *
 * Terms: an age is measured with the database's now() against done_at /
 * died_at. While notifications are on, a dead row that was not notified
 * yet is kept past its age: retention never drops a notification.
 *
 * Thread safety: uses the caller's db.
 */
#ifndef ONCEQ_COORD_JANITOR_H
#define ONCEQ_COORD_JANITOR_H

#include "signals.h"
#include <stdbool.h>
#include <stdint.h>

#include "onceq/onceq.h"

#define CO_RETENTION_BATCH OQ_RETENTION_BATCH
#define CO_RETENTION_MAX_BATCHES 50

typedef struct co_retention {
  int64_t keep_done_ms;    /* < 0: keep onceq_done rows forever */
  int64_t keep_dead_ms;    /* < 0: keep onceq_dead rows forever */
  bool keep_unnotified;    /* notifications on: keep dead rows not notified */
  int64_t keep_results_ms; /* onceq_results rows older than this go (their
                              count is added to *done_deleted); <= 0: kept */
} co_retention;

/*
 * One pass. *done_deleted / *dead_deleted get the rows deleted. Stops
 * early (OQ_OK) when *stop becomes non-zero between statements.
 */
OQ_MUST_CHECK oq_err co_retention_run(oq_db *db, const co_retention *r,
                                      const cm_signal_count *stop,
                                      long *done_deleted, long *dead_deleted);

#endif
