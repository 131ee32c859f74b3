/*
 * worker.c: the worker runtime (worker.h).
 *
 * Claim loop states (stepped in run_loop, never blocking more than 250 ms so
 * signals are seen promptly):
 *   RUNNING   - claim into free slots; wait for NOTIFY / poll / a free slot
 *   REJOINING - the session was lost: wait for its jobs to stop, then
 *               register a new session
 *   DRAINING  - first signal: no claims; wait for in-flight work until the
 *               shutdown timeout, then stop it
 *   DONE      - leave the loop and shut down
 *
 * The only decision about who may acknowledge is made by the database:
 * oq_ack / oq_ack_batch check claim = session. This file only decides what
 * to claim and when.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handler_exec.h"
#include "handler_http.h"
#include "onceq/onceq.h"
#include "worker.h"

typedef enum loop_state {
  RUNNING,   /* claiming */
  REJOINING, /* session lost; waiting to re-register */
  DRAINING,  /* first signal seen; finishing in-flight work */
  DONE       /* leave the loop */
} loop_state;

/* One session registration; jobs keep theirs. Freed at shutdown. */
typedef struct gen {
  oq_session *session;
  oq_heartbeat *hb;
  struct gen *older; /* previous generations, kept until shutdown */
} gen;

typedef struct job {
  oq_item item;     /* owns queue and payload */
  gen *g;           /* the session it was claimed under */
  struct job *next; /* in the work or ack list */
} job;

typedef struct wk {
  const wk_config *cfg;
  wk_metrics *m;
  oq_db_opts dbo;
  pthread_mutex_t mu;
  pthread_cond_t work_cv;     /* jobs queued, or executors told to exit */
  pthread_cond_t slot_cv;     /* a slot freed */
  pthread_cond_t ack_cv;      /* acks queued, or acker told to exit */
  job *work_head, *work_tail; /* guarded by mu */
  job *ack_head, *ack_tail;   /* guarded by mu */
  int inflight;               /* jobs queued or running (mu) */
  int acks_pending;           /* jobs in the ack list or being acked (mu) */
  bool exit_executors;        /* mu */
  bool exit_acker;            /* mu */
  _Atomic bool hard_stop;     /* cancel running handlers now */
  _Atomic bool draining;      /* start no queued job */
  gen *current;               /* claim loop only */
  oq_retry_policy item_retry;
} wk;

static uint64_t now_ms(void)
{
  return oq_monotonic_ms();
}

static void free_job(job *j)
{
  free(j->item.queue);
  free(j->item.payload);
  free(j);
}

/* --------------------------------------------------------------------- */
/* Settling: ack, fail and release must eventually reach the database while
 * the session lives, or the item would stay claimed by a live session. */

static bool transient(oq_err e)
{
  return e == OQ_ERR_CONN || e == OQ_ERR_AMBIGUOUS || e == OQ_ERR_RETRY ||
         e == OQ_ERR_TIMEOUT;
}

static bool keep_trying(wk *w, const job *j, int round)
{
  if (atomic_load(&w->hard_stop) || round > 1000)
    return false;
  return oq_session_state_get(j->g->session) != OQ_SESSION_LOST;
}

static void pause_before_retry(oq_db *db, int round)
{
  oq_retry_policy p = oq_retry_policy_tx();
  p.cap_ms = 2000;
  uint64_t rng = (uint64_t)round * 7919u + 1;
  struct timespec ts;
  int ms = oq_backoff_delay_ms(&p, round, &rng);
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
  if (!oq_db_connected(db)) {
    oq_err e = oq_db_reconnect(db);
    (void)e;
  }
}

/* Record a failed attempt: retry later (backoff or Retry-After) or dead. */
static void record_failure(wk *w, oq_db *db, job *j, const char *why,
                           int retry_after_ms)
{
  const char *sid = oq_session_id(j->g->session);
  int delay = retry_after_ms >= 0
                  ? retry_after_ms
                  : oq_backoff_delay_ms(&w->item_retry, j->item.attempt,
                                        &(uint64_t){(uint64_t)now_ms()});
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
    if (!transient(e) || !keep_trying(w, j, round)) {
      OQ_LOG(OQ_LOG_ERROR, sid, j->item.id,
             "cannot record failure (the claim is released when the "
             "session ends or is reaped): %s",
             oq_db_errmsg(db));
      return;
    }
    pause_before_retry(db, round);
  }
}

/* Give a job that never ran back at once (draining, fenced). */
static void release_job(wk *w, oq_db *db, job *j)
{
  const char *ids[1] = {j->item.id};
  size_t n = 0;
  if (oq_session_state_get(j->g->session) == OQ_SESSION_LOST)
    return; /* the reap already released it */
  oq_err e = oq_release(db, j->g->session, ids, 1, &n);
  if (e != OQ_OK)
    OQ_LOG(OQ_LOG_WARN, oq_session_id(j->g->session), j->item.id,
           "release failed (freed when the session ends): %s",
           oq_db_errmsg(db));
  (void)w;
}

/* --------------------------------------------------------------------- */
/* The SQL handler: the statement runs inside the ack transaction. */

typedef struct sql_ctx {
  const char *sql;
} sql_ctx;

static oq_err run_sql(oq_db *db, const oq_item *it, void *ud)
{
  sql_ctx *c = ud;
  static const unsigned int types[4] = {OQ_OID_JSONB, OQ_OID_UUID, OQ_OID_TEXT,
                                        OQ_OID_INT4};
  char attempt[16];
  snprintf(attempt, sizeof attempt, "%d", it->attempt);
  const char *params[4] = {it->payload, it->id, it->queue, attempt};
  oq_err e = oq_db_exec_typed(db, c->sql, 4, types, params, NULL);
  if (e == OQ_OK || e == OQ_ERR_RETRY || e == OQ_ERR_CONN)
    return e;
  return OQ_ERR_CALLBACK; /* the handler failed: a failed attempt */
}

static void handle_sql(wk *w, oq_db *db, job *j)
{
  sql_ctx c = {w->cfg->sql};
  oq_ack_opts ao = {.history = w->cfg->history};
  const char *sid = oq_session_id(j->g->session);
  for (int round = 1;; round++) {
    bool rec = false;
    oq_err e = oq_ack(db, j->g->session, &j->item, run_sql, &c, &ao, &rec);
    if (e == OQ_OK) {
      wk_metrics_add(w->m, WK_C_ACKED, 1);
      OQ_LOG(OQ_LOG_DEBUG, sid, j->item.id, "acked%s",
             rec ? " (reconciled)" : "");
      return;
    }
    if (e == OQ_ERR_CLAIM_LOST || e == OQ_ERR_SESSION_LOST) {
      wk_metrics_add(w->m, WK_C_LOST, 1);
      OQ_LOG(OQ_LOG_WARN, sid, j->item.id, "ack rejected: %s",
             oq_db_errmsg(db));
      return;
    }
    if (e == OQ_ERR_CALLBACK || !transient(e)) {
      char why[1024];
      snprintf(why, sizeof why, "%s", oq_db_errmsg(db));
      record_failure(w, db, j, why, -1);
      return;
    }
    if (!keep_trying(w, j, round))
      return;
    pause_before_retry(db, round);
  }
}

/* --------------------------------------------------------------------- */
/* Executors */

typedef struct exec_thread {
  wk *w;
  pthread_t thread;
  int index;
} exec_thread;

static bool job_cancelled(void *ctx)
{
  job *j = ((void **)ctx)[0];
  wk *w = ((void **)ctx)[1];
  return atomic_load(&w->hard_stop) ||
         oq_session_state_get(j->g->session) != OQ_SESSION_LIVE;
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

static void job_done(wk *w)
{
  pthread_mutex_lock(&w->mu);
  w->inflight--;
  pthread_cond_broadcast(&w->slot_cv);
  pthread_mutex_unlock(&w->mu);
  wk_metrics_inflight(w->m, -1);
}

static void queue_ack(wk *w, job *j)
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

static void run_job(wk *w, oq_db *db, wk_http *http, job *j)
{
  const char *sid = oq_session_id(j->g->session);
  if (atomic_load(&w->draining) || atomic_load(&w->hard_stop) ||
      oq_session_state_get(j->g->session) != OQ_SESSION_LIVE) {
    release_job(w, db, j);
    free_job(j);
    return;
  }
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t now_us = (int64_t)rt.tv_sec * 1000000 + rt.tv_nsec / 1000;
  if (j->item.enqueued_at_us > 0 && now_us > j->item.enqueued_at_us)
    wk_metrics_observe(w->m, WK_H_LATENCY,
                       (double)(now_us - j->item.enqueued_at_us) / 1e6);
  OQ_LOG(OQ_LOG_DEBUG, sid, j->item.id, "start attempt %d/%d queue=%s",
         j->item.attempt, j->item.max_attempts, j->item.queue);
  uint64_t t0 = now_ms();
  if (w->cfg->handler == WK_HANDLER_SQL) {
    handle_sql(w, db, j);
    wk_metrics_observe(w->m, WK_H_HANDLER, (double)(now_ms() - t0) / 1e3);
    free_job(j);
    return;
  }
  void *cctx[2] = {j, w};
  wk_task t = {.item = &j->item,
               .session_id = sid,
               .cancelled = job_cancelled,
               .cancel_ctx = cctx};
  wk_result *r = malloc(sizeof *r);
  if (!r) {
    release_job(w, db, j);
    free_job(j);
    return;
  }
  wk_result_init(r);
  if (w->cfg->handler == WK_HANDLER_EXEC) {
    wk_exec_cfg ec = {.argv = w->cfg->exec_argv,
                      .timeout_ms = (int)w->cfg->timeout_ms,
                      .kill_grace_ms = (int)w->cfg->kill_grace_ms};
    wk_exec_run(&ec, &t, r);
  } else {
    wk_http_run(http, &t, r);
  }
  wk_metrics_observe(w->m, WK_H_HANDLER, (double)(now_ms() - t0) / 1e3);
  switch (r->outcome) {
  case WK_OK:
    queue_ack(w, j); /* the acker owns it now */
    j = NULL;
    break;
  case WK_FAILED:
    record_failure(w, db, j, r->error[0] ? r->error : "failed",
                   r->retry_after_ms);
    break;
  case WK_ABANDONED:
    OQ_LOG(OQ_LOG_WARN, sid, j->item.id, "stopped: %s",
           atomic_load(&w->hard_stop) ? "worker stopping now"
                                      : "session fenced or lost");
    /* a fenced session may recover: give the item back so it runs again
     * (a lost one's claims were already released by the reap) */
    if (!atomic_load(&w->hard_stop))
      release_job(w, db, j);
    break;
  }
  free(r);
  if (j)
    free_job(j);
}

static void *executor_main(void *arg)
{
  exec_thread *et = arg;
  wk *w = et->w;
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-exec";
  wk_http *http = NULL;
  uint64_t restarts_seen = 0;
  if (w->cfg->handler == WK_HANDLER_HTTP) {
    wk_http_cfg hc = {.url = w->cfg->http_url,
                      .timeout_ms = (int)w->cfg->timeout_ms,
                      .insecure = w->cfg->insecure};
    http = wk_http_new(&hc);
  }
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (!w->work_head && !w->exit_executors)
      pthread_cond_wait(&w->work_cv, &w->mu);
    job *j = w->work_head;
    if (!j) {
      pthread_mutex_unlock(&w->mu);
      break;
    }
    w->work_head = j->next;
    if (!w->work_head)
      w->work_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    /* connect lazily, so an outage at start-up is not fatal here */
    for (int round = 1; !db; round++) {
      if (oq_db_open(&o, &db, err, sizeof err) == OQ_OK)
        break;
      if (round == 1)
        OQ_LOG(OQ_LOG_WARN, NULL, j->item.id, "executor: %s", err);
      if (atomic_load(&w->hard_stop) || round > 50)
        break;
      struct timespec ts = {0, 200 * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (!db) {
      free_job(j); /* released when the session ends or is reaped */
    } else {
      run_job(w, db, http, j);
      count_restarts(w, db, &restarts_seen);
      if (!oq_db_connected(db)) {
        oq_db_close(db);
        db = NULL;
        restarts_seen = 0;
      }
    }
    job_done(w);
  }
  wk_http_free(http);
  oq_db_close(db);
  return NULL;
}

/* --------------------------------------------------------------------- */
/* Acker: group commit of successful exec/http items, one DELETE per batch
 * and session. */

#define ACK_BATCH_MAX 1024

static void ack_group(wk *w, oq_db *db, job **jobs, size_t n)
{
  const char *ids[ACK_BATCH_MAX];
  bool acked[ACK_BATCH_MAX];
  for (size_t i = 0; i < n; i++)
    ids[i] = jobs[i]->item.id;
  oq_ack_opts ao = {.history = w->cfg->history};
  oq_session *s = jobs[0]->g->session;
  size_t nacked = 0;
  for (int round = 1;; round++) {
    oq_err e = oq_ack_batch(db, s, ids, n, acked, &nacked, &ao);
    if (e == OQ_OK)
      break;
    if (!transient(e) || !keep_trying(w, jobs[0], round)) {
      OQ_LOG(OQ_LOG_ERROR, oq_session_id(s), NULL,
             "batch ack of %zu items failed (they run again after the "
             "session ends): %s",
             n, oq_db_errmsg(db));
      memset(acked, 0, sizeof acked);
      nacked = 0;
      break;
    }
    pause_before_retry(db, round);
  }
  wk_metrics_add(w->m, WK_C_ACKED, nacked);
  wk_metrics_add(w->m, WK_C_LOST, n - nacked);
  for (size_t i = 0; i < n; i++)
    if (!acked[i])
      OQ_LOG(OQ_LOG_WARN, oq_session_id(s), ids[i],
             "ack rejected: claim lost (reaped, cancelled or taken over)");
}

static void *acker_main(void *arg)
{
  wk *w = arg;
  char err[OQ_ERRBUF_SIZE] = "";
  oq_db *db = NULL;
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-ack";
  job *batch[ACK_BATCH_MAX];
  uint64_t restarts_seen = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    while (!w->ack_head && !w->exit_acker)
      pthread_cond_wait(&w->ack_cv, &w->mu);
    /* group commit: while executors are still finishing, give them up to
     * 2 ms to add to this batch (one commit for many items) */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 2000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    while (w->ack_head && !w->exit_acker &&
           w->acks_pending < w->cfg->concurrency && w->inflight > 0 &&
           pthread_cond_timedwait(&w->ack_cv, &w->mu, &until) == 0) {
    }
    size_t n = 0;
    while (w->ack_head && n < ACK_BATCH_MAX) {
      batch[n++] = w->ack_head;
      w->ack_head = w->ack_head->next;
    }
    if (!w->ack_head)
      w->ack_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    if (n == 0)
      break;
    for (int round = 1; !db && round <= 50; round++) {
      if (oq_db_open(&o, &db, err, sizeof err) == OQ_OK)
        break;
      if (round == 1)
        OQ_LOG(OQ_LOG_WARN, NULL, NULL, "acker: %s", err);
      struct timespec ts = {0, 200 * 1000000L};
      nanosleep(&ts, NULL);
    }
    /* one statement per session generation (almost always one) */
    bool grouped[ACK_BATCH_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
      if (grouped[i])
        continue;
      job *group[ACK_BATCH_MAX];
      size_t k = 0;
      for (size_t g = i; g < n; g++)
        if (!grouped[g] && batch[g]->g == batch[i]->g) {
          grouped[g] = true;
          group[k++] = batch[g];
        }
      if (db)
        ack_group(w, db, group, k);
      else
        OQ_LOG(OQ_LOG_ERROR, oq_session_id(batch[i]->g->session), NULL,
               "cannot connect to ack %zu items (they run again after the "
               "session ends): %s",
               k, err);
    }
    count_restarts(w, db, &restarts_seen);
    if (db && !oq_db_connected(db)) {
      oq_db_close(db);
      db = NULL;
      restarts_seen = 0;
    }
    for (size_t i = 0; i < n; i++)
      free_job(batch[i]);
    pthread_mutex_lock(&w->mu);
    w->acks_pending -= (int)n;
    pthread_cond_broadcast(&w->slot_cv);
    pthread_mutex_unlock(&w->mu);
  }
  oq_db_close(db);
  return NULL;
}

/* --------------------------------------------------------------------- */
/* Sessions */

static void on_session_event(void *ud, oq_session *s, oq_session_state st)
{
  wk *w = ud;
  static const char *const names[] = {"live", "fenced", "lost"};
  OQ_LOG(st == OQ_SESSION_LIVE ? OQ_LOG_INFO : OQ_LOG_WARN, oq_session_id(s),
         NULL, "session is %s%s", names[st],
         st == OQ_SESSION_FENCED ? ": heartbeat overdue, stopping children"
         : st == OQ_SESSION_LOST ? ": its claims were released; stopping "
                                   "children and registering again"
                                 : "");
  pthread_mutex_lock(&w->mu);
  pthread_cond_broadcast(&w->slot_cv); /* wake the claim loop */
  pthread_mutex_unlock(&w->mu);
}

/* Register a session and start its heartbeat. */
static oq_err join(wk *w, oq_db *db, gen **out)
{
  char err[OQ_ERRBUF_SIZE];
  char queues[1024] = "";
  size_t pos = 0;
  for (size_t i = 0; i < w->cfg->nqueues; i++)
    pos += (size_t)snprintf(queues + pos,
                            pos < sizeof queues ? sizeof queues - pos : 0,
                            "%s%s", i ? "," : "", w->cfg->queues[i]);
  oq_session_opts so = {.heartbeat_interval_ms =
                            (int)w->cfg->heartbeat_interval_ms,
                        .expiry_ms = (int)w->cfg->session_expiry_ms,
                        .queues = queues};
  gen *g = calloc(1, sizeof *g);
  if (!g)
    return OQ_ERR_NOMEM;
  oq_err e = oq_session_open(db, &so, &g->session);
  if (e != OQ_OK) {
    free(g);
    return e;
  }
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-heartbeat";
  e = oq_heartbeat_start(&o, g->session, on_session_event, w, &g->hb, err,
                         sizeof err);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_ERROR, oq_session_id(g->session), NULL, "heartbeat: %s", err);
    oq_err e2 = oq_session_end(db, g->session);
    (void)e2;
    oq_session_free(g->session);
    free(g);
    return e;
  }
  wk_metrics_add(w->m, WK_C_SESSIONS, 1);
  g->older = w->current;
  w->current = g;
  *out = g;
  return OQ_OK;
}

/* --------------------------------------------------------------------- */
/* The claim loop */

static void push_jobs(wk *w, gen *g, oq_item *items, size_t n)
{
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < n; i++) {
    job *j = calloc(1, sizeof *j);
    if (!j) {
      free(items[i].queue);
      free(items[i].payload);
      continue; /* released when the session ends */
    }
    j->item = items[i];
    j->g = g;
    items[i].queue = items[i].payload = NULL;
    if (w->work_tail)
      w->work_tail->next = j;
    else
      w->work_head = j;
    w->work_tail = j;
    w->inflight++;
    wk_metrics_inflight(w->m, 1);
  }
  pthread_cond_broadcast(&w->work_cv);
  pthread_mutex_unlock(&w->mu);
  oq_items_free(items, n);
}

/* Wait up to ms for a free slot or a session event. */
static void wait_slot(wk *w, int ms)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->mu);
  pthread_cond_timedwait(&w->slot_cv, &w->mu, &until);
  pthread_mutex_unlock(&w->mu);
}

static int busy(wk *w)
{
  pthread_mutex_lock(&w->mu);
  int n = w->inflight + w->acks_pending;
  pthread_mutex_unlock(&w->mu);
  return n;
}

/* Wait for work to show up: a NOTIFY on PostgreSQL, else the poll timer. */
static void wait_for_items(wk *w, oq_db *listen_db, int ms,
                           volatile sig_atomic_t *signals)
{
  uint64_t until = now_ms() + (uint64_t)ms;
  while (*signals == 0) {
    uint64_t now = now_ms();
    if (now >= until)
      return;
    int chunk = (int)(until - now) > 250 ? 250 : (int)(until - now);
    if (listen_db && oq_db_connected(listen_db)) {
      int notified = 0;
      if (oq_db_wait_notify(listen_db, chunk, &notified) != OQ_OK)
        return; /* reconnect in the loop */
      if (notified)
        return;
    } else {
      wait_slot(w, chunk);
    }
    if (w->current &&
        oq_session_state_get(w->current->session) != OQ_SESSION_LIVE)
      return;
  }
}

/*
 * Claims commit without waiting for the WAL flush (PostgreSQL
 * synchronous_commit = off, this connection only). A claim lost in a server
 * crash only leaves its items unclaimed again; the ack's claim check then
 * rejects the old session, so no acknowledgement depends on a claim's
 * durability. Acks and failures keep synchronous commits on their own
 * connections, and their flush covers every earlier claim anyway.
 */
static void relax_claim_commits(oq_db *db)
{
  if (oq_db_engine(db) != OQ_ENGINE_POSTGRES)
    return;
  oq_err e = oq_db_exec(db, "SET synchronous_commit = off", 0, NULL, NULL);
  (void)e; /* best effort: claims are only slower without it */
}

static oq_db *open_listener(wk *w)
{
  char err[OQ_ERRBUF_SIZE];
  oq_db *l = NULL;
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-listen";
  if (oq_db_open(&o, &l, err, sizeof err) != OQ_OK)
    return NULL;
  if (oq_db_listen(l, "onceq") != OQ_OK) {
    oq_db_close(l);
    return NULL;
  }
  return l;
}

/* --------------------------------------------------------------------- */
/* --partitioned (DESIGN §5): the claim loop's only partition logic. A round
 * runs on the poll cadence, claims look only in this session's parts (and
 * at orphans), and the library gives a part up only once this session's
 * items of it have finished or been released. While draining, the loop
 * neither claims nor runs rounds, so the parts stay owned until the session
 * row is deleted after the drain (the cascade frees them). */

typedef struct part_claims {
  oq_parts *parts;        /* NULL: claim anywhere (oq_claim) */
  uint64_t next_round_ms; /* monotonic time of the next round */
} part_claims;

static oq_err part_claims_init(const wk_config *cfg, part_claims *pc)
{
  /* --orphan-after 0s means at once: the library reads 0 as "default" */
  oq_parts_opts po = {.orphan_after_ms = cfg->orphan_after_ms > 0
                                             ? (int)cfg->orphan_after_ms
                                             : 1};
  pc->next_round_ms = 0;
  return cfg->partitioned ? oq_parts_new(&po, &pc->parts) : OQ_OK;
}

static oq_err claim_some(wk *w, part_claims *pc, oq_db *db, int poll_ms,
                         int want, oq_item **items, size_t *got)
{
  const wk_config *cfg = w->cfg;
  oq_session *s = w->current->session;
  if (!pc->parts)
    return oq_claim(db, s, cfg->queues, cfg->nqueues, want, items, got);
  if (now_ms() >= pc->next_round_ms) {
    oq_err e = oq_parts_rebalance(db, s, pc->parts);
    if (e != OQ_OK)
      return e;
    pc->next_round_ms = now_ms() + (uint64_t)poll_ms;
  }
  return oq_claim_parts(db, s, pc->parts, cfg->queues, cfg->nqueues, want,
                        items, got);
}

static int run_loop(wk *w, oq_db *db, volatile sig_atomic_t *signals)
{
  const wk_config *cfg = w->cfg;
  loop_state st = RUNNING;
  uint64_t drain_deadline = 0;
  bool crdb = oq_db_engine(db) == OQ_ENGINE_COCKROACH;
  int poll_ms = cfg->poll_interval_ms > 0 ? (int)cfg->poll_interval_ms
                : crdb                    ? 150
                                          : 1000;
  part_claims pc = {0};
  if (part_claims_init(cfg, &pc) != OQ_OK)
    return 1;
  relax_claim_commits(db);
  oq_db *listen_db = crdb ? NULL : open_listener(w);
  bool db_down = false;
  int down_rounds = 0; /* failed reconnects in a row: the backoff step */
  uint64_t rng = now_ms() | 1;
  int rc = 0;
  while (st != DONE) {
    int sigs = (int)*signals;
    if (sigs >= 2 && !atomic_load(&w->hard_stop)) {
      OQ_LOG(OQ_LOG_WARN, oq_session_id(w->current->session), NULL,
             "second signal: stopping children now and releasing claims");
      atomic_store(&w->hard_stop, true);
      rc = 1;
    }
    if (sigs >= 1 && st != DRAINING) {
      OQ_LOG(OQ_LOG_INFO, oq_session_id(w->current->session), NULL,
             "signal: draining (no new claims; up to %lld ms for %d "
             "in-flight item(s))",
             (long long)cfg->shutdown_timeout_ms, busy(w));
      st = DRAINING;
      atomic_store(&w->draining, true);
      drain_deadline = now_ms() + (uint64_t)cfg->shutdown_timeout_ms;
    }
    wk_metrics_set_healthy(
        w->m, !db_down &&
                  oq_session_state_get(w->current->session) == OQ_SESSION_LIVE);
    if (st == DRAINING) {
      if (busy(w) == 0) {
        st = DONE;
        continue;
      }
      if (now_ms() >= drain_deadline && !atomic_load(&w->hard_stop)) {
        OQ_LOG(OQ_LOG_WARN, oq_session_id(w->current->session), NULL,
               "shutdown timeout: stopping %d in-flight item(s)", busy(w));
        atomic_store(&w->hard_stop, true);
      }
      wait_slot(w, 100);
      continue;
    }
    oq_session_state ss = oq_session_state_get(w->current->session);
    if (ss == OQ_SESSION_LOST)
      st = REJOINING;
    if (st == REJOINING) {
      /* the lost session's jobs stop (their cancel checks see LOST) */
      if (busy(w) > 0) {
        wait_slot(w, 100);
        continue;
      }
      gen *g = NULL;
      oq_err e = join(w, db, &g);
      if (e != OQ_OK) {
        OQ_LOG(OQ_LOG_WARN, NULL, NULL, "cannot register again: %s",
               oq_db_errmsg(db));
        if (!oq_db_connected(db)) {
          oq_err re = oq_db_reconnect(db);
          (void)re;
        }
        wait_slot(w, 500);
        continue;
      }
      OQ_LOG(OQ_LOG_INFO, oq_session_id(g->session), NULL,
             "registered a new session");
      st = RUNNING;
      continue;
    }
    if (ss == OQ_SESSION_FENCED) {
      wait_slot(w, 100);
      continue;
    }
    /* Slots are the executors plus a prefetch of up to --concurrency
     * (capped by --batch) queued items, and a claim waits until about half
     * an executor set is free: claims of one or two items cost a round trip
     * and a commit each, and idle executors waiting on them (test/bench). */
    int prefetch =
        cfg->batch < cfg->concurrency ? cfg->batch : cfg->concurrency;
    pthread_mutex_lock(&w->mu);
    int inflight = w->inflight;
    pthread_mutex_unlock(&w->mu);
    int free_slots = cfg->concurrency + prefetch - inflight;
    int min_claim = inflight == 0 ? 1 : (cfg->concurrency + 1) / 2;
    if (free_slots < min_claim) {
      wait_slot(w, 100);
      continue;
    }
    int want = free_slots < cfg->batch ? free_slots : cfg->batch;
    oq_item *items = NULL;
    size_t got = 0;
    oq_err e = claim_some(w, &pc, db, poll_ms, want, &items, &got);
    if (e == OQ_ERR_CONN || e == OQ_ERR_TIMEOUT || e == OQ_ERR_RETRY) {
      if (!db_down)
        OQ_LOG(OQ_LOG_WARN, oq_session_id(w->current->session), NULL,
               "database unavailable, retrying: %s", oq_db_errmsg(db));
      db_down = true;
      down_rounds++;
      if (oq_db_reconnect(db) != OQ_OK)
        wait_slot(w, oq_backoff_delay_ms(&(oq_retry_policy){.base_ms = 50,
                                                            .cap_ms = 2000,
                                                            .jitter = 0.5},
                                         down_rounds, &rng));
      continue;
    }
    if (db_down) {
      OQ_LOG(OQ_LOG_INFO, oq_session_id(w->current->session), NULL,
             "database reachable again");
      db_down = false;
      down_rounds = 0;
      relax_claim_commits(db);
      oq_db_close(listen_db);
      listen_db = crdb ? NULL : open_listener(w);
    }
    if (e == OQ_ERR_SESSION_LOST) {
      if (strcmp(oq_db_sqlstate(db), "23503") == 0)
        oq_session_mark(w->current->session, OQ_SESSION_LOST);
      continue;
    }
    if (e != OQ_OK) {
      OQ_LOG(OQ_LOG_ERROR, oq_session_id(w->current->session), NULL,
             "claim failed: %s", oq_db_errmsg(db));
      wait_slot(w, 1000);
      continue;
    }
    if (got > 0) {
      wk_metrics_add(w->m, WK_C_CLAIMED, got);
      push_jobs(w, w->current, items, got);
      if ((int)got == want)
        continue; /* there may be more ready */
    }
    if (cfg->drain && got == 0 && busy(w) == 0) {
      OQ_LOG(OQ_LOG_INFO, oq_session_id(w->current->session), NULL,
             "--drain: nothing ready is left; exiting");
      st = DONE;
      continue;
    }
    if (listen_db && !oq_db_connected(listen_db)) {
      oq_db_close(listen_db);
      listen_db = open_listener(w);
    }
    /* jitter the poll so a fleet does not poll in lock-step */
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    int jitter =
        poll_ms >= 4 ? (int)((rng >> 33) % (uint64_t)(poll_ms / 4)) : 0;
    if (cfg->drain)
      wait_slot(w, 50); /* drain mode: wait for in-flight work only */
    else
      wait_for_items(w, listen_db, poll_ms - jitter, signals);
  }
  oq_db_close(listen_db);
  oq_parts_free(pc.parts);
  return rc;
}

/* --------------------------------------------------------------------- */

int wk_worker_run(const wk_config *cfg, wk_metrics *m,
                  volatile sig_atomic_t *signals)
{
  wk w;
  memset(&w, 0, sizeof w);
  w.cfg = cfg;
  w.m = m;
  w.dbo.conninfo = cfg->db;
  w.dbo.application_name = "onceq-worker";
  w.item_retry = oq_retry_policy_item();
  w.item_retry.base_ms = (int)cfg->retry_base_ms;
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.work_cv, NULL);
  pthread_cond_init(&w.slot_cv, NULL);
  pthread_cond_init(&w.ack_cv, NULL);
  int rc = 0;
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_reaper *reaper = NULL;
  exec_thread *threads = NULL;
  pthread_t acker;
  bool acker_started = false;
  int started = 0;

  oq_err e = oq_db_open(&w.dbo, &db, err, sizeof err);
  if (e != OQ_OK) {
    fprintf(stderr, "onceq-worker: %s\n", err);
    rc = 2;
    goto out;
  }
  gen *g = NULL;
  e = join(&w, db, &g);
  if (e != OQ_OK) {
    fprintf(stderr, "onceq-worker: %s\n", oq_db_errmsg(db));
    rc = (e == OQ_ERR_SCHEMA || e == OQ_ERR_CONFIG || e == OQ_ERR_AUTH) ? 2 : 1;
    goto out;
  }
  OQ_LOG(OQ_LOG_INFO, oq_session_id(g->session), NULL,
         "onceq-worker %s started: %d executor(s), handler %s, queue(s) "
         "%s%s, database %s",
         oq_version(), cfg->concurrency,
         cfg->handler == WK_HANDLER_EXEC   ? "exec"
         : cfg->handler == WK_HANDLER_HTTP ? "http"
                                           : "sql",
         cfg->queues[0], cfg->nqueues > 1 ? ",..." : "",
         oq_db_masked_conninfo(db));
  /* its own name in pg_stat_activity, like the other threads' connections */
  oq_db_opts rdbo = w.dbo;
  rdbo.application_name = "onceq-worker-reaper";
  e = oq_reaper_start(&rdbo, (int)cfg->session_expiry_ms, &reaper, err,
                      sizeof err);
  if (e != OQ_OK)
    OQ_LOG(OQ_LOG_WARN, NULL, NULL, "reaper not started: %s", err);
  threads = calloc((size_t)cfg->concurrency, sizeof *threads);
  if (!threads) {
    rc = 1;
    goto stop;
  }
  for (int i = 0; i < cfg->concurrency; i++) {
    threads[i].w = &w;
    threads[i].index = i;
    if (pthread_create(&threads[i].thread, NULL, executor_main, &threads[i]) !=
        0) {
      OQ_LOG(OQ_LOG_ERROR, NULL, NULL, "cannot start executor %d", i);
      rc = 1;
      goto stop;
    }
    started++;
  }
  if (cfg->handler != WK_HANDLER_SQL) {
    if (pthread_create(&acker, NULL, acker_main, &w) != 0) {
      rc = 1;
      goto stop;
    }
    acker_started = true;
  }
  rc = run_loop(&w, db, signals);

stop:
  pthread_mutex_lock(&w.mu);
  w.exit_executors = true;
  atomic_store(&w.draining, true);
  pthread_cond_broadcast(&w.work_cv);
  pthread_mutex_unlock(&w.mu);
  for (int i = 0; i < started; i++)
    pthread_join(threads[i].thread, NULL);
  if (acker_started) {
    pthread_mutex_lock(&w.mu);
    w.exit_acker = true;
    pthread_cond_broadcast(&w.ack_cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(acker, NULL);
  }
  free(threads);
  oq_reaper_stop(reaper);
  /* end every generation: deleting the row releases what is left */
  while (w.current) {
    gen *cur = w.current;
    w.current = cur->older;
    oq_heartbeat_stop(cur->hb);
    if (oq_session_state_get(cur->session) != OQ_SESSION_LOST) {
      if (!oq_db_connected(db)) {
        oq_err re = oq_db_reconnect(db);
        (void)re;
      }
      if (oq_session_end(db, cur->session) != OQ_OK)
        OQ_LOG(OQ_LOG_WARN, oq_session_id(cur->session), NULL,
               "could not delete the session (it will be reaped): %s",
               oq_db_errmsg(db));
    }
    OQ_LOG(OQ_LOG_INFO, oq_session_id(cur->session), NULL, "session closed");
    oq_session_free(cur->session);
    free(cur);
  }
  /* One summary line, so a --drain run or a log shipper can tell what this
   * process did without scraping /metrics before it went away. */
  OQ_LOG(OQ_LOG_INFO, NULL, NULL,
         "exiting: %" PRIu64 " claimed, %" PRIu64 " acked, %" PRIu64
         " failed attempts, %" PRIu64 " dead-lettered, %" PRIu64
         " claims lost, %" PRIu64 " transaction restarts",
         wk_metrics_get(m, WK_C_CLAIMED), wk_metrics_get(m, WK_C_ACKED),
         wk_metrics_get(m, WK_C_FAILED), wk_metrics_get(m, WK_C_DEAD),
         wk_metrics_get(m, WK_C_LOST), wk_metrics_get(m, WK_C_RESTARTS));
out:
  oq_db_close(db);
  pthread_cond_destroy(&w.ack_cv);
  pthread_cond_destroy(&w.slot_cv);
  pthread_cond_destroy(&w.work_cv);
  pthread_mutex_destroy(&w.mu);
  return rc;
}
