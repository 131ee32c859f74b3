/*
 * jobs.c: the job lists the worker's threads share (runtime.h): the work
 * queue (claim loop -> executors), the ack queue (executors -> acker) and
 * the held list the reconciliation sweep compares with the database.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

uint64_t wk_now_ms(void)
{
  return oq_monotonic_ms();
}

bool wk_transient(oq_err e)
{
  return e == OQ_ERR_CONN || e == OQ_ERR_AMBIGUOUS || e == OQ_ERR_RETRY ||
         e == OQ_ERR_TIMEOUT;
}

void wk_retry_pause(int round, uint64_t *rng)
{
  oq_retry_policy p = oq_retry_policy_tx();
  p.cap_ms = 2000;
  if (*rng == 0)
    *rng = oq_backoff_seed();
  int ms = oq_backoff_delay_ms(&p, round, rng);
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Link j into the held list (mu held). */
static void hold(wk *w, wk_job *j)
{
  j->held_prev = NULL;
  j->held_next = w->held;
  if (w->held)
    w->held->held_prev = j;
  w->held = j;
  if (j->item.keyed || j->item.limited)
    w->gating++;
  if (j->item.limited)
    w->limited_held++;
}

void wk_jobs_push(wk *w, wk_gen *g, oq_item *items, size_t n)
{
  bool dropped = false;
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < n; i++) {
    wk_job *j = calloc(1, sizeof *j);
    if (!j) {
      dropped = true; /* still claimed: the sweep releases it */
      continue;       /* oq_items_free frees its strings */
    }
    j->item = items[i];
    j->g = g;
    j->payload_bytes = items[i].payload ? strlen(items[i].payload) : 0;
    w->held_bytes += (int64_t)j->payload_bytes;
    items[i].queue = items[i].payload = NULL; /* the job owns them now */
    hold(w, j);
    if (w->work_tail)
      w->work_tail->next = j;
    else
      w->work_head = j;
    w->work_tail = j;
    w->inflight++;
    wk_metrics_inflight(w->m, 1);
  }
  /* One job needs one executor: an idle worker's claims bring one item at
   * a time, and waking every executor for it puts them all on the CPU
   * (two cores in the peer benchmark) at the moment that item's latency
   * is decided. An executor that finishes its own turn takes whatever is
   * still queued before it waits, so no job waits for a wake-up. */
  if (n == 1)
    pthread_cond_signal(&w->work_cv);
  else
    pthread_cond_broadcast(&w->work_cv);
  pthread_mutex_unlock(&w->mu);
  if (dropped)
    wk_sweep_request(w, "out of memory for a claimed item");
}

void wk_job_free(wk *w, wk_job *j)
{
  pthread_mutex_lock(&w->mu);
  if (j->held_prev)
    j->held_prev->held_next = j->held_next;
  else
    w->held = j->held_next;
  if (j->held_next)
    j->held_next->held_prev = j->held_prev;
  w->held_bytes -= (int64_t)j->payload_bytes;
  if (j->item.keyed || j->item.limited)
    w->gating--;
  if (j->item.limited)
    w->limited_held--;
  pthread_cond_broadcast(&w->slot_cv); /* bytes freed: room to claim */
  pthread_mutex_unlock(&w->mu);
  bool unsettled = j->unsettled;
  free(j->item.queue);
  free(j->item.payload);
  free(j->result);
  free(j);
  if (unsettled)
    wk_sweep_request(w, "a job was dropped with its outcome unwritten");
}

void wk_next_begin(wk *w)
{
  pthread_mutex_lock(&w->mu);
  w->next_acks++;
  w->next_acks_started++;
  pthread_mutex_unlock(&w->mu);
}

void wk_next_end(wk *w)
{
  pthread_mutex_lock(&w->mu);
  w->next_acks--;
  pthread_mutex_unlock(&w->mu);
}

uint64_t wk_next_quiet(wk *w)
{
  pthread_mutex_lock(&w->mu);
  uint64_t v = w->next_acks > 0 ? UINT64_MAX : w->next_acks_started;
  pthread_mutex_unlock(&w->mu);
  return v;
}

bool wk_holds(wk *w, const char *item_id)
{
  bool found = false;
  pthread_mutex_lock(&w->mu);
  for (wk_job *j = w->held; j && !found; j = j->held_next)
    found = strcmp(j->item.id, item_id) == 0;
  pthread_mutex_unlock(&w->mu);
  return found;
}

void wk_job_done(wk *w)
{
  pthread_mutex_lock(&w->mu);
  w->inflight--;
  pthread_cond_broadcast(&w->slot_cv);
  pthread_mutex_unlock(&w->mu);
  wk_metrics_inflight(w->m, -1);
  wk_settle_wake(w);
}

void wk_settle_wake(wk *w)
{
  /* one byte per armed wait, not per settle: the pipe never fills and a
   * busy worker makes no system call for settles nobody waits for */
  if (w->wake_fd[1] < 0 || !atomic_exchange(&w->settle_armed, false))
    return;
  ssize_t r = write(w->wake_fd[1], "s", 1);
  (void)r; /* full (EAGAIN) means a byte is already there: woken anyway */
}

void wk_settle_arm(wk *w)
{
  if (w->wake_fd[0] < 0)
    return;
  char buf[64];
  while (read(w->wake_fd[0], buf, sizeof buf) > 0) {
  }
  atomic_store(&w->settle_armed, true);
}

void wk_ack_queue(wk *w, wk_job *j)
{
  pthread_mutex_lock(&w->mu);
  j->next = NULL;
  if (w->ack_tail)
    w->ack_tail->next = j;
  else
    w->ack_head = j;
  w->ack_tail = j;
  w->acks_pending++;
  pthread_cond_signal(&w->ack_cv);
  pthread_mutex_unlock(&w->mu);
}

int wk_gating(wk *w)
{
  pthread_mutex_lock(&w->mu);
  int n = w->gating;
  pthread_mutex_unlock(&w->mu);
  return n;
}

int wk_busy(wk *w)
{
  pthread_mutex_lock(&w->mu);
  int n = w->inflight + w->acks_pending;
  pthread_mutex_unlock(&w->mu);
  return n;
}

void wk_sweep_request(wk *w, const char *why)
{
  if (!atomic_exchange(&w->sweep_due, true))
    OQ_LOG(OQ_LOG_DEBUG, NULL, NULL, "reconcile: sweep requested (%s)", why);
  pthread_mutex_lock(&w->mu);
  pthread_cond_broadcast(&w->slot_cv); /* wake the claim loop */
  pthread_mutex_unlock(&w->mu);
}

int wk_limited_held(wk *w)
{
  pthread_mutex_lock(&w->mu);
  int n = w->limited_held;
  pthread_mutex_unlock(&w->mu);
  return n;
}

void wk_wait_idle(wk *w, const oq_session *s, int ms)
{
  struct timespec until = oq_monotonic_deadline(ms);
  pthread_mutex_lock(&w->mu);
  while (w->inflight + w->acks_pending > 0 && !atomic_load(&w->sweep_due) &&
         !atomic_load(&w->hard_stop) &&
         oq_session_state_get(s) == OQ_SESSION_LIVE &&
         pthread_cond_timedwait(&w->slot_cv, &w->mu, &until) == 0) {
  }
  pthread_mutex_unlock(&w->mu);
}

void wk_wait_slot(wk *w, int ms)
{
  /* the condvars use the monotonic clock */
  struct timespec until = oq_monotonic_deadline(ms);
  pthread_mutex_lock(&w->mu);
  pthread_cond_timedwait(&w->slot_cv, &w->mu, &until);
  pthread_mutex_unlock(&w->mu);
}

bool wk_wait_settled(wk *w, int busy_then, int ms)
{
  struct timespec until = oq_monotonic_deadline(ms);
  pthread_mutex_lock(&w->mu);
  /* checked before waiting, under the lock the settling threads broadcast
   * under: their broadcast may have gone by while the loop was claiming */
  bool settled = w->inflight + w->acks_pending < busy_then;
  if (!settled) {
    pthread_cond_timedwait(&w->slot_cv, &w->mu, &until);
    settled = w->inflight + w->acks_pending < busy_then;
  }
  pthread_mutex_unlock(&w->mu);
  return settled;
}
