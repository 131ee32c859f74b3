/*
 * due.h: what the coordinator's leader finds due on a pass: the schedules
 * whose next occurrence has come, and the dead letters the webhook has not
 * delivered yet. Their writes (the schedule's compare-and-set, the
 * notification mark) are libonceq's (onceq/schedule.h, onceq/dead.h).
 * Also the bulk push's probe that the queue's tables exist.
 *
 * Thread safety: each call uses the caller's db, on one thread.
 */
#ifndef ONCEQ_QUERY_DUE_H
#define ONCEQ_QUERY_DUE_H

#include "onceq/onceq.h"
#include "rows.h"

/* The most due schedules and dead letters one call reads. */
#define QV_DUE_BATCH 100

/* Up to QV_DUE_BATCH due schedules, the earliest first: name, cron, queue,
 * payload (text), next_run_at (text, as the database wrote it, to go back
 * into the compare-and-set unchanged) and next_run_at in seconds since the
 * epoch (float8). One transaction; *out: free with qv_rows_free. */
OQ_MUST_CHECK oq_err qv_schedules_due(oq_db *db, qv_rows *out);

/* One schedule's next_run_at (text) and its seconds since the epoch: no
 * row when the schedule is gone. One transaction. */
OQ_MUST_CHECK oq_err qv_schedule_next(oq_db *db, const char *name,
                                      qv_rows *out);

/* Up to QV_DUE_BATCH dead letters not notified yet, the oldest death first
 * (through the onceq_dead_unnotified partial index): id, died_at (text),
 * the webhook's JSON body (built by the database, so the payload goes out
 * as the JSON it is, up to QV_PAYLOAD_SHOWN characters (figures.h): past
 * that its first ones as a JSON string, with "payload_truncated": true),
 * and the death's instant in microseconds since the epoch (for the
 * Idempotency-Key). One transaction. */
OQ_MUST_CHECK oq_err qv_dead_unnotified(oq_db *db, qv_rows *out);

/* OQ_OK when onceq_items can be read (no row is read), the error on db
 * otherwise (a missing schema: OQ_ERR_SQL with undefined_table). */
OQ_MUST_CHECK oq_err qv_items_probe(oq_db *db);

#endif
