/*
 * executor.c: the executor threads (executor.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor.h"
#include "handler.h"
#include "settle.h"

typedef struct cancel_ctx {
  wk *w;
  wk_job *j;
} cancel_ctx;

int wk_fence_margin_ms(const wk_config *cfg)
{
  if (!cfg->handler || !cfg->handler->children)
    return OQ_FENCE_MARGIN_MS;
  int64_t m = cfg->kill_grace_ms + WK_FENCE_SLACK_MS;
  int64_t most = cfg->session_expiry_ms - 3 * cfg->heartbeat_interval_ms;
  if (m > most)
    m = most;
  if (m < OQ_FENCE_MARGIN_MS)
    m = OQ_FENCE_MARGIN_MS;
  return m > INT32_MAX ? INT32_MAX : (int)m;
}

int wk_fence_grace_ms(const wk_config *cfg)
{
  int64_t g = wk_fence_margin_ms(cfg) - WK_FENCE_SLACK_MS;
  if (g > cfg->kill_grace_ms)
    g = cfg->kill_grace_ms;
  return g > 0 ? (int)g : 0;
}

/* The handler's cancel check: stop when the worker stops now or the
 * session is not live (computed from the clock: a blocked heartbeat cannot
 * hold it off). */
static bool job_cancelled(void *ctx)
{
  cancel_ctx *c = ctx;
  return atomic_load(&c->w->hard_stop) ||
         oq_session_state_get(c->j->g->session) != OQ_SESSION_LIVE;
}

/* The handler's kill check: no grace left before the session may expire. */
static bool job_kill_now(void *ctx)
{
  cancel_ctx *c = ctx;
  oq_session *s = c->j->g->session;
  oq_session_state st = oq_session_state_get(s);
  if (st == OQ_SESSION_LOST)
    return true;
  return st == OQ_SESSION_FENCED &&
         wk_now_ms() + WK_KILL_BEFORE_EXPIRY_MS >= oq_session_expires_at_ms(s);
}

/* Add the transaction restarts db took since the last call to the
 * metrics (each thread keeps its own *seen for its own connection). */
static void count_restarts(wk *w, oq_db *db, uint64_t *seen)
{
  if (!db)
    return;
  uint64_t now = oq_db_restarts(db);
  if (now > *seen)
    wk_metrics_add(w->m, WK_C_RESTARTS, now - *seen);
  *seen = now;
}

/* Monotonic microseconds: handler times for the claim sizing. */
static uint64_t now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Report n items run in the time since t0_us to the claim sizing
 * (claim_size.h): the next claims and --sql batches follow it. */
static void observe_work(wk *w, size_t n, uint64_t t0_us)
{
  uint64_t us = now_us() - t0_us;
  pthread_mutex_lock(&w->mu);
  wk_claim_size_observe(&w->sizing, n, us);
  pthread_mutex_unlock(&w->mu);
}

static void observe_latency(wk *w, const wk_job *j)
{
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t now_us = (int64_t)rt.tv_sec * 1000000 + rt.tv_nsec / 1000;
  if (j->item.enqueued_at_us > 0 && now_us > j->item.enqueued_at_us)
    wk_metrics_observe(w->m, WK_H_LATENCY,
                       (double)(now_us - j->item.enqueued_at_us) / 1e6);
}

/* An executor's handle for its handler (the row's state_new: the --http
 * client), NULL while it cannot be set up (out of memory), and how many
 * jobs in a row found it so. */
typedef struct state_slot {
  void *state;
  int failures;
} state_slot;

/*
 * Before a job of a handler with a per-thread handle: the handle, created
 * again if it could not be before. False when it still cannot be: the job
 * is released, not failed (the item is not at fault, and another executor
 * or worker may run it), after a pause that grows with the failures in a
 * row, so a worker out of memory does not claim and release in a loop.
 */
static bool state_for(wk *w, oq_db *db, state_slot *ss, wk_job *j,
                      uint64_t *rng)
{
  const wk_handler *h = w->cfg->handler;
  if (!h->state_new)
    return true;
  if (!ss->state)
    ss->state = h->state_new(w->cfg);
  if (ss->state) {
    ss->failures = 0;
    return true;
  }
  ss->failures++;
  OQ_LOG(OQ_LOG_WARN, oq_session_id(j->g->session), j->item.id,
         "cannot set up %s (out of memory); item released, not failed",
         h->state_what);
  wk_settle_release(w, db, j);
  wk_job_free(w, j);
  wk_retry_pause(ss->failures, rng);
  return false;
}

/* Run one job and settle it. Frees j unless the acker took it. */
static void run_job(wk *w, oq_db *db, state_slot *ss, wk_job *j, uint64_t *rng)
{
  const wk_handler *h = w->cfg->handler;
  const char *sid = oq_session_id(j->g->session);
  if (atomic_load(&w->draining) || atomic_load(&w->hard_stop) ||
      oq_session_state_get(j->g->session) != OQ_SESSION_LIVE) {
    wk_settle_release(w, db, j);
    wk_job_free(w, j);
    return;
  }
  if (!state_for(w, db, ss, j, rng))
    return;
  observe_latency(w, j);
  OQ_LOG(OQ_LOG_DEBUG, sid, j->item.id, "start attempt %d/%d queue=%s",
         j->item.attempt, j->item.max_attempts, j->item.queue);
  uint64_t t0 = wk_now_ms();
  uint64_t t0_us = now_us();
  if (h->handle) {
    h->handle(w, db, j);
    observe_work(w, 1, t0_us);
    wk_metrics_observe(w->m, WK_H_HANDLER, (double)(wk_now_ms() - t0) / 1e3);
    wk_job_free(w, j);
    return;
  }
  cancel_ctx cc = {w, j};
  wk_task t = {.item = &j->item,
               .session_id = sid,
               .cancelled = job_cancelled,
               .kill_now = job_kill_now,
               .cancel_ctx = &cc};
  wk_result *r = malloc(sizeof *r);
  if (!r) {
    wk_settle_release(w, db, j);
    wk_job_free(w, j);
    return;
  }
  wk_result_init(r);
  h->run(ss->state, w->cfg, &t, r);
  observe_work(w, 1, t0_us);
  wk_metrics_observe(w->m, WK_H_HANDLER, (double)(wk_now_ms() - t0) / 1e3);
  switch (r->outcome) {
  case WK_OK:
    /* exec stdout tail or HTTP body: kept with the ack for items that
     * keep their result (and in the history); out of memory: none */
    j->result = r->output[0] ? strdup(r->output) : NULL;
    j->result_cut = r->output_cut;
    wk_ack_queue(w, j); /* the acker owns it now */
    j = NULL;
    break;
  case WK_FAILED:
    wk_settle_failure(w, db, j, r->error[0] ? r->error : "failed",
                      r->retry_after_ms);
    break;
  case WK_ABANDONED:
    OQ_LOG(OQ_LOG_WARN, sid, j->item.id, "stopped: %s",
           atomic_load(&w->hard_stop) ? "worker stopping now"
                                      : "session fenced or lost");
    /* a fenced session may recover: give the item back so it runs again
     * (a lost one's claims are released by the reap); when the worker
     * stops now, deleting the session releases it */
    if (!atomic_load(&w->hard_stop))
      wk_settle_release(w, db, j);
    break;
  }
  free(r);
  if (j)
    wk_job_free(w, j);
}

/*
 * Take the next jobs: one, or for a batching handler what this executor
 * runs within the claim horizon, of one session (wk_claim_size_take: the
 * horizon, not a share among idle executors, spreads a large claim; a
 * fast --sql so commits up to --batch items per ack transaction; keyed
 * items: an even share of those in flight, wk_claim_size_keyed_share).
 * Returns 0 when told to exit.
 */
static size_t next_jobs(wk *w, wk_job **out, size_t max)
{
  pthread_mutex_lock(&w->mu);
  while (!w->work_head && !w->exit_executors)
    pthread_cond_wait(&w->work_cv, &w->mu);
  size_t queued = 0;
  for (wk_job *q = w->work_head; q && queued < max; q = q->next)
    queued++;
  max = wk_claim_size_take(&w->sizing, queued, max);
  if (w->work_head && w->work_head->item.keyed)
    max = wk_claim_size_keyed_share(&w->sizing, (size_t)w->inflight, max);
  size_t n = 0;
  while (w->work_head && n < max && (n == 0 || w->work_head->g == out[0]->g)) {
    wk_job *j = w->work_head;
    w->work_head = j->next;
    if (!w->work_head)
      w->work_tail = NULL;
    out[n++] = j;
  }
  pthread_mutex_unlock(&w->mu);
  return n;
}

/* A batching handler's turn (--sql): run the live jobs in one
 * transaction, release the rest (not live any more), free them all. */
static void run_batch(wk *w, oq_db *db, wk_job **jobs, size_t n)
{
  wk_job *live[n];
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    wk_job *j = jobs[i];
    if (atomic_load(&w->draining) || atomic_load(&w->hard_stop) ||
        oq_session_state_get(j->g->session) != OQ_SESSION_LIVE) {
      wk_settle_release(w, db, j);
      wk_job_free(w, j);
      continue;
    }
    observe_latency(w, j);
    live[k++] = j;
  }
  if (k == 0)
    return;
  uint64_t t0 = wk_now_ms();
  uint64_t t0_us = now_us();
  w->cfg->handler->handle_batch(w, db, live, k);
  observe_work(w, k, t0_us);
  double each = (double)(wk_now_ms() - t0) / 1e3 / (double)k;
  for (size_t i = 0; i < k; i++) {
    wk_metrics_observe(w->m, WK_H_HANDLER, each);
    wk_job_free(w, live[i]);
  }
}

/* oq_db_set_give_up's function: the session the running jobs were claimed
 * under is lost, so their acks would be rejected anyway, and a dead server
 * that does not answer (its host silent after a failover) need not hold
 * the thread until the statement deadline (30 s or --timeout) while the
 * new session waits for executors. g outlives the jobs' run: the claim
 * loop retires a lost session only once no job is in flight. */
static bool session_lost(void *ud)
{
  const wk_gen *g = ud;
  return oq_session_state_get(g->session) == OQ_SESSION_LOST;
}

void *wk_executor_main(void *arg)
{
  wk_executor *et = arg;
  wk *w = et->w;
  oq_db *db = NULL;
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-exec";
  /* a statement handler's (--sql) statements are the user's work and may
   * run long (a batch runs several): their deadline is --timeout, at least
   * WK_SQL_DEADLINE_MS, not the fence. Past the fence the ack's claim
   * check keeps them safe; the deadline only bounds a call stuck on a dead
   * network. */
  const wk_handler *h = w->cfg->handler;
  if (h->handle) {
    int64_t d = w->cfg->timeout_ms > WK_SQL_DEADLINE_MS ? w->cfg->timeout_ms
                                                        : WK_SQL_DEADLINE_MS;
    if (d > o.deadline_ms)
      o.deadline_ms = d > INT32_MAX ? INT32_MAX : (int)d;
  }
  state_slot ss = {NULL, 0};
  uint64_t restarts_seen = 0;
  uint64_t rng = oq_backoff_seed();
  /* now, so the first item finds a warm handle; if this fails, each job
   * tries again (state_for) */
  if (h->state_new)
    ss.state = h->state_new(w->cfg);
  size_t max = (size_t)wk_handler_batch_max(w->cfg);
  bool batched = max > 1;
  wk_job **jobs = calloc(max, sizeof *jobs);
  size_t n;
  while (jobs && (n = next_jobs(w, jobs, max)) > 0) {
    if (!db)
      db = wk_connect_for(w, &o, "executor", jobs[0], jobs[0]->item.id, &rng);
    if (!db) {
      OQ_LOG(OQ_LOG_WARN, oq_session_id(jobs[0]->g->session), NULL,
             "executor cannot reach the database; dropping %zu job(s) (a "
             "reconciliation sweep or the reap releases their claims)",
             n);
      for (size_t i = 0; i < n; i++) {
        jobs[i]->unsettled = true;
        wk_job_free(w, jobs[i]);
      }
    } else {
      oq_db_set_give_up(db, session_lost, jobs[0]->g);
      if (batched)
        run_batch(w, db, jobs, n);
      else
        run_job(w, db, &ss, jobs[0], &rng);
      oq_db_set_give_up(db, NULL, NULL);
      count_restarts(w, db, &restarts_seen);
      if (!oq_db_connected(db)) {
        oq_db_close(db);
        db = NULL;
        restarts_seen = 0;
      }
    }
    for (size_t i = 0; i < n; i++)
      wk_job_done(w);
  }
  free(jobs);
  if (h->state_free)
    h->state_free(ss.state);
  oq_db_close(db);
  return NULL;
}
