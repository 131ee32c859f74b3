/* janitor.c: retention of onceq_done / onceq_dead / onceq_results
 * (janitor.h), a batch per statement through oq_retention_delete. */
#include "janitor.h"

/* One batch, in its own transaction (re-run on a restart). */
typedef struct batch {
  oq_retained what;
  int64_t keep_ms;
  long deleted;
} batch;

static oq_err batch_tx(oq_db *db, void *ud)
{
  batch *b = ud;
  return oq_retention_delete(db, b->what, b->keep_ms, &b->deleted);
}

static oq_err sweep(oq_db *db, oq_retained what, int64_t keep_ms,
                    const cm_signal_count *stop, long *deleted)
{
  for (int i = 0; i < CO_RETENTION_MAX_BATCHES && !*stop; i++) {
    batch b = {what, keep_ms, 0};
    oq_err e = oq_db_transact(db, batch_tx, &b);
    if (e != OQ_OK)
      return e;
    *deleted += b.deleted;
    if (b.deleted < CO_RETENTION_BATCH)
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
    e = sweep(db, OQ_RETAINED_DONE, r->keep_done_ms, stop, done_deleted);
  if (e == OQ_OK && r->keep_dead_ms >= 0)
    e = sweep(db,
              r->keep_unnotified ? OQ_RETAINED_DEAD_NOTIFIED : OQ_RETAINED_DEAD,
              r->keep_dead_ms, stop, dead_deleted);
  if (e == OQ_OK && r->keep_results_ms > 0) /* counted with the history */
    e = sweep(db, OQ_RETAINED_RESULTS, r->keep_results_ms, stop, done_deleted);
  return e;
}
