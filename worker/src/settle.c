/*
 * settle.c: failed attempts and releases (settle.h).
 */
#include <stdio.h>

#include "settle.h"

bool wk_keep_trying(wk *w, const wk_job *j, int round)
{
  if (atomic_load(&w->hard_stop) || round > 1000)
    return false;
  return oq_session_state_get(j->g->session) != OQ_SESSION_LOST;
}

oq_db *wk_connect_for(wk *w, const oq_db_opts *o, const char *who,
                      const wk_job *j, const char *item_id, uint64_t *rng)
{
  char err[OQ_ERRBUF_SIZE] = "";
  oq_db *db = NULL;
  for (int round = 1;; round++) {
    if (oq_db_open(o, &db, err, sizeof err) == OQ_OK)
      return db;
    if (round == 1)
      OQ_LOG(OQ_LOG_WARN, oq_session_id(j->g->session), item_id, "%s: %s", who,
             err);
    if (!wk_keep_trying(w, j, round))
      return NULL;
    wk_retry_pause(round, rng);
  }
}

void wk_db_revive(oq_db *db)
{
  if (!oq_db_connected(db)) {
    oq_err e = oq_db_reconnect(db);
    (void)e; /* the next call reports it */
  }
}

void wk_settle_failure(wk *w, oq_db *db, wk_job *j, const char *why,
                       int retry_after_ms)
{
  const char *sid = oq_session_id(j->g->session);
  uint64_t rng = oq_backoff_seed();
  int delay = retry_after_ms >= 0
                  ? retry_after_ms
                  : oq_backoff_delay_ms(&w->item_retry, j->item.attempt, &rng);
  for (int round = 1;; round++) {
    oq_fail_outcome out = OQ_FAIL_RETRY;
    oq_err e = oq_fail(db, j->g->session, &j->item, why, delay, &out);
    if (e == OQ_OK) {
      /* oq_fail has logged the attempt (one line per event). */
      wk_metrics_add(w->m, WK_C_FAILED, 1);
      if (out == OQ_FAIL_DEAD)
        wk_metrics_add(w->m, WK_C_DEAD, 1);
      return;
    }
    if (e == OQ_ERR_CLAIM_LOST) {
      wk_metrics_add(w->m, WK_C_LOST, 1);
      OQ_LOG(OQ_LOG_WARN, sid, j->item.id, "failure not recorded: %s",
             oq_db_errmsg(db));
      return;
    }
    if (!wk_transient(e) || !wk_keep_trying(w, j, round)) {
      OQ_LOG(OQ_LOG_ERROR, sid, j->item.id,
             "cannot record the failed attempt (a reconciliation sweep "
             "releases the claim): %s",
             oq_db_errmsg(db));
      j->unsettled = true;
      return;
    }
    wk_retry_pause(round, &rng);
    wk_db_revive(db);
  }
}

void wk_settle_release(wk *w, oq_db *db, wk_job *j)
{
  const char *sid = oq_session_id(j->g->session);
  uint64_t rng = oq_backoff_seed();
  for (int round = 1;; round++) {
    if (oq_session_state_get(j->g->session) == OQ_SESSION_LOST)
      return; /* the reap releases it */
    size_t n = 0;
    oq_err e = oq_release(db, j->g->session, &j->item, 1, &n);
    if (e == OQ_OK)
      return;
    /* a release is retried briefly only: a sweep catches it later */
    if (!wk_transient(e) || round >= 3 || !wk_keep_trying(w, j, round)) {
      OQ_LOG(OQ_LOG_WARN, sid, j->item.id,
             "release failed (a reconciliation sweep releases it once the "
             "database answers): %s",
             oq_db_errmsg(db));
      j->unsettled = true;
      return;
    }
    wk_retry_pause(round, &rng);
    wk_db_revive(db);
  }
}
