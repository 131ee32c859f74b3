/*
 * acker.c: the acker thread (acker.h).
 */
#include <string.h>
#include <time.h>

#include "acker.h"
#include "settle.h"

#define ACK_BATCH_MAX 1024

/* Acknowledge n jobs of one session in one statement. */
static void ack_group(wk *w, oq_db *db, wk_job **jobs, size_t n, uint64_t *rng)
{
  const char *ids[ACK_BATCH_MAX];
  bool acked[ACK_BATCH_MAX];
  for (size_t i = 0; i < n; i++)
    ids[i] = jobs[i]->item.id;
  oq_ack_opts ao = {.history = w->cfg->history};
  /* each job's handler result (exec stdout tail, HTTP body): kept in the
   * history and for items that asked for it (keep_result) */
  const char *results[ACK_BATCH_MAX];
  bool cut[ACK_BATCH_MAX];
  for (size_t i = 0; i < n; i++) {
    results[i] = jobs[i]->result;
    cut[i] = jobs[i]->result_cut;
  }
  ao.results = results;
  ao.results_truncated = cut;
  oq_session *s = jobs[0]->g->session;
  size_t nacked = 0;
  for (int round = 1;; round++) {
    oq_err e = oq_ack_batch(db, s, ids, n, acked, &nacked, &ao);
    if (e == OQ_OK)
      break;
    if (!wk_transient(e) || !wk_keep_trying(w, jobs[0], round)) {
      OQ_LOG(OQ_LOG_ERROR, oq_session_id(s), NULL,
             "batch ack of %zu items failed (a reconciliation sweep releases "
             "what is still claimed; they run again): %s",
             n, oq_db_errmsg(db));
      for (size_t i = 0; i < n; i++)
        jobs[i]->unsettled = true;
      return;
    }
    wk_retry_pause(round, rng);
    wk_db_revive(db);
  }
  wk_metrics_add(w->m, WK_C_ACKED, nacked);
  wk_metrics_add(w->m, WK_C_LOST, n - nacked);
  for (size_t i = 0; i < n; i++)
    if (!acked[i])
      OQ_LOG(OQ_LOG_WARN, oq_session_id(s), ids[i],
             "ack rejected: claim lost (reaped, cancelled or taken over)");
}

/* Wait for acks and take up to max of them; 0 when told to exit. */
static size_t take_batch(wk *w, wk_job **batch, size_t max)
{
  pthread_mutex_lock(&w->mu);
  while (!w->ack_head && !w->exit_acker)
    pthread_cond_wait(&w->ack_cv, &w->mu);
  /* group commit: while executors are still finishing, give them up to
   * 2 ms to add to this batch (one commit for many items) */
  struct timespec until = oq_monotonic_deadline(2);
  while (w->ack_head && !w->exit_acker &&
         w->acks_pending < w->cfg->concurrency && w->inflight > 0 &&
         pthread_cond_timedwait(&w->ack_cv, &w->mu, &until) == 0) {
  }
  size_t n = 0;
  while (w->ack_head && n < max) {
    batch[n++] = w->ack_head;
    w->ack_head = w->ack_head->next;
  }
  if (!w->ack_head)
    w->ack_tail = NULL;
  pthread_mutex_unlock(&w->mu);
  return n;
}

void *wk_acker_main(void *arg)
{
  wk *w = arg;
  oq_db *db = NULL;
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-ack";
  wk_job *batch[ACK_BATCH_MAX];
  uint64_t restarts_seen = 0;
  uint64_t rng = oq_backoff_seed();
  size_t n;
  while ((n = take_batch(w, batch, ACK_BATCH_MAX)) > 0) {
    if (!db)
      db = wk_connect_for(w, &o, "acker", batch[0], NULL, &rng);
    /* one statement per session generation (almost always one) */
    bool grouped[ACK_BATCH_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
      if (grouped[i])
        continue;
      wk_job *group[ACK_BATCH_MAX];
      size_t k = 0;
      for (size_t g = i; g < n; g++)
        if (!grouped[g] && batch[g]->g == batch[i]->g) {
          grouped[g] = true;
          group[k++] = batch[g];
        }
      if (db) {
        ack_group(w, db, group, k, &rng);
      } else {
        OQ_LOG(OQ_LOG_ERROR, oq_session_id(batch[i]->g->session), NULL,
               "cannot connect to ack %zu items (a reconciliation sweep "
               "releases them; they run again)",
               k);
        for (size_t g = 0; g < k; g++)
          group[g]->unsettled = true;
      }
    }
    if (db) {
      uint64_t r = oq_db_restarts(db);
      if (r > restarts_seen)
        wk_metrics_add(w->m, WK_C_RESTARTS, r - restarts_seen);
      restarts_seen = r;
      if (!oq_db_connected(db)) {
        oq_db_close(db);
        db = NULL;
        restarts_seen = 0;
      }
    }
    for (size_t i = 0; i < n; i++)
      wk_job_free(w, batch[i]);
    pthread_mutex_lock(&w->mu);
    w->acks_pending -= (int)n;
    pthread_cond_broadcast(&w->slot_cv);
    pthread_mutex_unlock(&w->mu);
    wk_settle_wake(w);
  }
  oq_db_close(db);
  return NULL;
}
