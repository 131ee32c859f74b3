/*
 * reconcile.c: the reconciliation sweep (reconcile.h).
 */
#include <stdlib.h>

#include "reconcile.h"

oq_err wk_reconcile(wk *w, oq_db *db, wk_gen *g, const char *trigger,
                    size_t *released)
{
  if (released)
    *released = 0;
  const char *sid = oq_session_id(g->session);
  oq_item *claims = NULL;
  size_t n = 0;
  /* an --sql ack may claim keyed items' next items (docs/design.md 5a)
   * on another thread: those rows are ours before a job holds them, so
   * an unheld keyed row is released only if no such ack ran from before
   * the listing to after the check; else it waits for a later sweep. An
   * unheld row without a key is never a next item: released at once. */
  uint64_t quiet = wk_next_quiet(w);
  oq_err e = oq_session_claims_read(db, g->session, &claims, &n);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, sid, NULL, "reconcile (%s): cannot read claims: %s",
           trigger, oq_db_errmsg(db));
    return e;
  }
  /* keep the unheld ones at the front */
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!wk_holds(w, claims[i].id))
      claims[k++] = claims[i];
  if (k > 0 && (quiet == UINT64_MAX || wk_next_quiet(w) != quiet)) {
    size_t plain = 0;
    for (size_t i = 0; i < k; i++)
      if (!claims[i].keyed)
        claims[plain++] = claims[i];
    if (plain < k) {
      OQ_LOG(OQ_LOG_DEBUG, sid, NULL,
             "reconcile (%s): %zu keyed claim(s) not held while an ack took "
             "next items; later",
             trigger, k - plain);
      wk_sweep_request(w, "an ack claimed next items during a sweep");
    }
    k = plain;
  }
  size_t nrel = 0;
  if (k > 0) {
    e = oq_release(db, g->session, claims, k, &nrel);
    if (e != OQ_OK)
      OQ_LOG(OQ_LOG_WARN, sid, NULL,
             "reconcile (%s): cannot release %zu unheld claim(s): %s", trigger,
             k, oq_db_errmsg(db));
  }
  if (nrel > 0) {
    wk_metrics_add(w->m, WK_C_RECONCILED, nrel);
    for (size_t i = 0; i < k; i++)
      OQ_LOG(OQ_LOG_DEBUG, sid, claims[i].id, "reconcile: not held, released");
    OQ_LOG(OQ_LOG_WARN, sid, NULL,
           "reconcile: released %zu claim(s) no job held (trigger: %s; %zu "
           "claimed in all)",
           nrel, trigger, n);
  } else {
    OQ_LOG(OQ_LOG_DEBUG, sid, NULL, "reconcile (%s): %zu claim(s), all held",
           trigger, n);
  }
  oq_items_free(claims, n);
  if (released)
    *released = nrel;
  return e;
}
