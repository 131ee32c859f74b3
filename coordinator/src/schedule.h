/*
 * schedule.h: cron schedules kept in onceq_schedules: adding, listing and
 * removing them (`onceq schedule`), and firing the due ones (the
 * coordinator leader).
 *
 * Terms:
 *  - occurrence: one time at which a schedule's cron matches; next_run_at
 *    is the first occurrence not yet enqueued.
 *  - firing an occurrence, in ONE transaction:
 *      oq_schedule_advance (onceq/schedule.h): next_run_at of the row
 *        name = $1 AND next_run_at = $due becomes the following
 *        occurrence;                               -- compare-and-set
 *      -- only if that updated 1 row: oq_enqueue (the library's
 *      -- INSERT ... ON CONFLICT (unique_key) DO NOTHING) of
 *      -- (queue, payload, unique_key 'schedule:<name>:<due, Unix seconds>')
 *    Two firers (a deposed leader and the new one) race on the same row:
 *    only one UPDATE matches; the other matches 0 rows (READ COMMITTED
 *    re-checks the WHERE after the winner commits; SERIALIZABLE aborts it
 *    with 40001 and the re-run matches 0 rows). So each occurrence is
 *    enqueued exactly once, across leader changes and crashes: a crash
 *    before COMMIT leaves next_run_at at $due, and the next leader fires it.
 *  - catch-up: occurrences missed while no leader ran are all enqueued,
 *    oldest first, at most CO_SCHEDULE_CATCHUP per schedule per pass.
 *  - cron times are UTC; "now" is the database's now().
 *
 * Thread safety: uses the caller's db.
 */
#ifndef ONCEQ_COORD_SCHEDULE_H
#define ONCEQ_COORD_SCHEDULE_H

#include "signals.h"
#include <stdbool.h>

#include "onceq/onceq.h"

#define CO_SCHEDULE_CATCHUP 10

/* The unique_key of an occurrence: "schedule:<name>:<epoch seconds>". */
void co_schedule_key(char *buf, size_t len, const char *name, long long due_s);

/*
 * Fire every due occurrence (see above). *fired gets the items enqueued.
 * Stops early (OQ_OK) when *stop becomes non-zero.
 */
OQ_MUST_CHECK oq_err co_schedule_fire_due(oq_db *db,
                                          const cm_signal_count *stop,
                                          long *fired);

#endif
