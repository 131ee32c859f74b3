/*
 * jobs.c: the job lists the worker's threads share (runtime.h): the work
 * queue (claim loop -> executors), the ack queue (executors -> acker) and
 * the held list the reconciliation sweep compares with the database.
 */
#include <inttypes.h>
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

/* ---- the held jobs by item id ------------------------------------------
 * A claim that returns an item a job of the same session already holds is
 * a second claim of it: the first one's commit was lost (claims commit
 * asynchronously, and a server crash loses the last ones; docs/design.md
 * §4a) and the row went back to ready, so the claim-checked ack of either
 * run would match. Running both would overlap the item with itself, and
 * the first run's ack would free its ordering key while the second still
 * runs. The table finds such an item in O(1) per claimed item (a claim
 * round brings up to 1,000 while 2,000 are held); the sweep's "is it held"
 * uses it too. */

static size_t id_hash(const char *id)
{
  uint64_t h = 1469598103934665603ULL; /* FNV-1a: any id text works */
  for (const char *c = id; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  return (size_t)h;
}

/* The slot of id, or of the empty slot where it would go (cap > 0). */
static size_t ids_slot(wk_job *const *t, size_t cap, const char *id)
{
  size_t i = id_hash(id) & (cap - 1);
  while (t[i] && strcmp(t[i]->item.id, id) != 0)
    i = (i + 1) & (cap - 1);
  return i;
}

static wk_job *ids_find(const wk *w, const char *id)
{
  return w->held_ids_cap
             ? w->held_ids[ids_slot(w->held_ids, w->held_ids_cap, id)]
             : NULL;
}

/* Make j the job of its id. False: out of memory; then held_ids_lossy
 * sends wk_holds back to the held list. */
static bool ids_put(wk *w, wk_job *j)
{
  if ((w->held_ids_n + 1) * 2 > w->held_ids_cap) {
    size_t cap = w->held_ids_cap ? w->held_ids_cap * 2 : 64;
    wk_job **t = calloc(cap, sizeof *t);
    if (!t)
      return false;
    for (size_t i = 0; i < w->held_ids_cap; i++)
      if (w->held_ids[i])
        t[ids_slot(t, cap, w->held_ids[i]->item.id)] = w->held_ids[i];
    free(w->held_ids);
    w->held_ids = t;
    w->held_ids_cap = cap;
  }
  size_t i = ids_slot(w->held_ids, w->held_ids_cap, j->item.id);
  if (!w->held_ids[i])
    w->held_ids_n++;
  w->held_ids[i] = j;
  return true;
}

/* j is no longer held: drop it if it is its id's job (linear probing:
 * the entries after it that hash before the hole move up). */
static void ids_drop(wk *w, const wk_job *j)
{
  if (!w->held_ids_cap)
    return;
  size_t cap = w->held_ids_cap, i = ids_slot(w->held_ids, cap, j->item.id);
  if (w->held_ids[i] != j)
    return;
  w->held_ids[i] = NULL;
  w->held_ids_n--;
  for (size_t k = (i + 1) & (cap - 1); w->held_ids[k];
       k = (k + 1) & (cap - 1)) {
    size_t home = id_hash(w->held_ids[k]->item.id) & (cap - 1);
    /* k's entry may fill the hole at i unless its home lies in (i, k] */
    bool stays = i <= k ? (home > i && home <= k) : (home > i || home <= k);
    if (stays)
      continue;
    w->held_ids[i] = w->held_ids[k];
    w->held_ids[k] = NULL;
    i = k;
  }
}

void wk_jobs_fini(wk *w)
{
  free(w->held_ids);
  w->held_ids = NULL;
  w->held_ids_cap = w->held_ids_n = 0;
}

/* Link j into the held list (mu held). */
static void hold(wk *w, wk_job *j)
{
  if (!ids_put(w, j))
    w->held_ids_lossy = true;
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
  uint64_t again = 0;
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < n; i++) {
    wk_job *held = ids_find(w, items[i].id);
    if (held && held->g == g) {
      /* claimed again by its own session (see ids_find's comment): the
       * running job is the item's attempt, and its claim-checked ack
       * matches the new claim. Its claimed_at stays the first claim's
       * (its executor reads it without the lock): should it fail rather
       * than succeed, that write finds no row of its claim, and the
       * sweep releases the row as held by no job */
      again++;
      continue;
    }
    wk_job *j = calloc(1, sizeof *j);
    if (!j) {
      dropped = true; /* still claimed: the sweep releases it */
      continue;       /* oq_items_free frees its strings */
    }
    j->item = items[i];
    j->g = g;
    j->payload_bytes = items[i].payload ? strlen(items[i].payload) : 0;
    w->held_bytes += (int64_t)j->payload_bytes;
    /* the job owns them now */
    items[i].queue = items[i].payload = items[i].ordering_key = NULL;
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
  w->reclaimed += again;
  pthread_mutex_unlock(&w->mu);
  /* after the unlock: a waiter woken while we still held the mutex would
   * only block on it again (two more context switches per hand-over on
   * an idle worker's latency path) */
  if (n == 1)
    pthread_cond_signal(&w->work_cv);
  else
    pthread_cond_broadcast(&w->work_cv);
  if (again)
    OQ_LOG(OQ_LOG_WARN, oq_session_id(g->session), NULL,
           "a claim brought %" PRIu64 " item(s) this session already runs "
           "(an earlier claim's commit was lost, e.g. in a server crash); "
           "the running attempt goes on, alone",
           again);
  if (dropped)
    wk_sweep_request(w, "out of memory for a claimed item");
}

void wk_job_free(wk *w, wk_job *j)
{
  pthread_mutex_lock(&w->mu);
  ids_drop(w, j);
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
  free(j->item.ordering_key);
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
  pthread_mutex_lock(&w->mu);
  bool found = ids_find(w, item_id) != NULL;
  /* a job the table could not take (out of memory) is only in the list */
  for (wk_job *j = w->held; j && !found && w->held_ids_lossy; j = j->held_next)
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
  pthread_mutex_unlock(&w->mu);
  pthread_cond_signal(&w->ack_cv); /* after the unlock: wk_jobs_push */
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
