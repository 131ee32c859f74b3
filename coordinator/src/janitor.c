/* janitor.c: retention of onceq_done / onceq_dead (janitor.h). */
#include <stdio.h>

#include "rows.h"
#include "janitor.h"

#define BATCH_S "1000"
_Static_assert(CO_RETENTION_BATCH == 1000, "BATCH_S must match");

/* The subquery walks the done_at / died_at index from the oldest row. */
static const char SQL_DONE[] =
    "DELETE FROM onceq_done WHERE item_id IN (SELECT item_id FROM onceq_done"
    " WHERE done_at < now() - $1::int8 * interval '1 millisecond'"
    " ORDER BY done_at LIMIT " BATCH_S ")";
/* $2: true when every old row may go; false keeps the unnotified ones. */
static const char SQL_DEAD[] =
    "DELETE FROM onceq_dead WHERE id IN (SELECT id FROM onceq_dead"
    " WHERE died_at < now() - $1::int8 * interval '1 millisecond'"
    " AND ($2::bool OR notified_at IS NOT NULL)"
    " ORDER BY died_at LIMIT " BATCH_S ")";

/* Kept outcomes (`onceq wait`, schema v3), by the finished_at index. */
static const char SQL_RESULTS[] =
    "DELETE FROM onceq_results WHERE item_id IN (SELECT item_id FROM"
    " onceq_results WHERE finished_at < now() - $1::int8 * interval"
    " '1 millisecond' ORDER BY finished_at LIMIT " BATCH_S ")";

static oq_err sweep(oq_db *db, const char *sql, int64_t keep_ms,
                    const char *all, const cm_signal_count *stop, long *deleted)
{
  char ms[32];
  snprintf(ms, sizeof ms, "%lld", (long long)keep_ms);
  const char *p[2] = {ms, all};
  for (int i = 0; i < CO_RETENTION_MAX_BATCHES && !*stop; i++) {
    long n = 0;
    oq_err e = qv_exec(db, sql, all ? 2 : 1, p, &n);
    if (e != OQ_OK)
      return e;
    *deleted += n;
    if (n < CO_RETENTION_BATCH)
      break;
  }
  return OQ_OK;
}

oq_err co_retention_run(oq_db *db, const co_retention *r,
                        const cm_signal_count *stop, long *done_deleted,
                        long *dead_deleted)
{
  oq_err e = OQ_OK;
  *done_deleted = *dead_deleted = 0;
  if (r->keep_done_ms >= 0)
    e = sweep(db, SQL_DONE, r->keep_done_ms, NULL, stop, done_deleted);
  if (e == OQ_OK && r->keep_dead_ms >= 0)
    e = sweep(db, SQL_DEAD, r->keep_dead_ms,
              r->keep_unnotified ? "false" : "true", stop, dead_deleted);
  if (e == OQ_OK && r->keep_results_ms > 0) /* counted with the history */
    e = sweep(db, SQL_RESULTS, r->keep_results_ms, NULL, stop, done_deleted);
  return e;
}
