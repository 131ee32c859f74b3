/*
 * drain_workers.c: the worker threads behind oqt_drain (see the header).
 *
 * The first error any thread hits is kept in one shared message and sets
 * the stop flag; the main thread joins everyone and then fails the test, so
 * no thread calls exit() while the others still hold connections.
 */
#include "drain_workers.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct shared {
  const oqt_drain_opts *o;
  pthread_barrier_t start; /* workers + main: the drain starts together */
  atomic_bool stop;        /* set by the first error */
  pthread_mutex_t mu;      /* guards first_err */
  char first_err[1024];    /* the first error, "" when none */
} shared;

typedef struct worker {
  shared *sh;
  int idx;
  oq_db *db;
  oq_session *s;
  oq_heartbeat *hb;
  atomic_uint_fast64_t fenced; /* written by the heartbeat thread */
  uint64_t claimed, acked, reconciled, restarts, heartbeats;
} worker;

/* Keep the first error and stop every thread. */
static void record_err(shared *sh, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void record_err(shared *sh, const char *fmt, ...)
{
  pthread_mutex_lock(&sh->mu);
  if (sh->first_err[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->first_err, sizeof sh->first_err, fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&sh->mu);
  atomic_store(&sh->stop, true);
}

/* Heartbeat thread: a lost session is a bug here (nothing reaps). */
static void on_session_event(void *ud, oq_session *s, oq_session_state st)
{
  worker *w = ud;
  if (st == OQ_SESSION_FENCED)
    atomic_fetch_add(&w->fenced, 1);
  if (st == OQ_SESSION_LOST)
    record_err(w->sh, "thread %d: session %s reported LOST (no reaper runs)",
               w->idx, oq_session_id(s));
}

static oq_err count_row(void *ud, int ncols, const char *const *vals)
{
  long *out = ud;
  if (ncols > 0 && vals[0])
    *out = strtol(vals[0], NULL, 10);
  return OQ_OK;
}

/* Items left in the table, or -1 after a transient serialization error. */
static long items_left(worker *w)
{
  long left = -1;
  oq_err e = oq_db_query(w->db, "SELECT count(*) FROM onceq_items", 0, NULL,
                         count_row, &left);
  if (e == OQ_OK)
    return left;
  if (strncmp(oq_db_sqlstate(w->db), "40", 2) == 0)
    return -1; /* a read-only count may be cancelled under SSI: ask again */
  record_err(w->sh, "thread %d: count items: %s (%s) sqlstate=%s", w->idx,
             oq_strerror(e), oq_db_errmsg(w->db), oq_db_sqlstate(w->db));
  return -1;
}

/* Claim/ack until the queue is empty; returns at the first error. */
static void drain_loop(worker *w)
{
  shared *sh = w->sh;
  const char *queues[1] = {sh->o->queue};
  /* Counted from the start barrier: set-up is not part of the limit. */
  uint64_t deadline_ms =
      oq_monotonic_ms() + (uint64_t)sh->o->time_limit_s * 1000u;
  while (!atomic_load(&sh->stop)) {
    if (oq_monotonic_ms() > deadline_ms) {
      record_err(sh, "thread %d: drain not done after %d s (acked %llu)",
                 w->idx, sh->o->time_limit_s, (unsigned long long)w->acked);
      return;
    }
    oq_item *items = NULL;
    size_t n = 0;
    oq_err e = oq_claim(w->db, w->s, queues, 1, sh->o->batch, &items, &n);
    if (e != OQ_OK) {
      record_err(sh, "thread %d: oq_claim: %s (%s) sqlstate=%s", w->idx,
                 oq_strerror(e), oq_db_errmsg(w->db), oq_db_sqlstate(w->db));
      return;
    }
    if (n > (size_t)sh->o->batch) {
      record_err(sh, "thread %d: oq_claim returned %zu items, max was %d",
                 w->idx, n, sh->o->batch);
      oq_items_free(items, n);
      return;
    }
    w->claimed += n;
    bool failed = false;
    for (size_t i = 0; i < n && !failed; i++) {
      bool rec = false;
      e = oq_ack(w->db, w->s, &items[i], sh->o->ack_fn, w->s, NULL, &rec);
      if (rec)
        w->reconciled++;
      if (e != OQ_OK) {
        record_err(sh, "thread %d: oq_ack(%s): %s (%s) sqlstate=%s", w->idx,
                   items[i].id, oq_strerror(e), oq_db_errmsg(w->db),
                   oq_db_sqlstate(w->db));
        failed = true;
      } else {
        w->acked++;
      }
    }
    oq_items_free(items, n);
    if (failed)
      return;
    if (n == 0) {
      long left = items_left(w);
      if (left == 0)
        return;
      oqt_sleep_ms(5); /* others still hold the rest: look again soon */
    }
  }
}

static void *worker_main(void *arg)
{
  worker *w = arg;
  shared *sh = w->sh;
  char err[OQ_ERRBUF_SIZE] = "";
  oq_db_opts dbo = {.conninfo = sh->o->dsn, .application_name = "oqt-drain"};
  oq_session_opts so = {0}; /* defaults: 1 s interval, 5 s expiry */
  bool ready = false;

  oq_err e = oq_db_open(&dbo, &w->db, err, sizeof err);
  if (e != OQ_OK) {
    record_err(sh, "thread %d: oq_db_open: %s: %s", w->idx, oq_strerror(e),
               err);
    goto wait;
  }
  e = oq_session_open(w->db, &so, &w->s);
  if (e != OQ_OK) {
    record_err(sh, "thread %d: oq_session_open: %s (%s)", w->idx,
               oq_strerror(e), oq_db_errmsg(w->db));
    goto wait;
  }
  e = oq_heartbeat_start(&dbo, w->s, on_session_event, w, &w->hb, err,
                         sizeof err);
  if (e != OQ_OK) {
    record_err(sh, "thread %d: oq_heartbeat_start: %s: %s", w->idx,
               oq_strerror(e), err);
    goto wait;
  }
  ready = true;
wait:
  pthread_barrier_wait(&sh->start); /* even after a failure: no deadlock */
  if (ready)
    drain_loop(w);

  if (w->hb) {
    w->heartbeats = oq_heartbeat_count(w->hb);
    oq_heartbeat_stop(w->hb);
    w->hb = NULL;
  }
  if (w->s) {
    e = oq_session_end(w->db, w->s);
    if (e != OQ_OK)
      record_err(sh, "thread %d: oq_session_end: %s (%s)", w->idx,
                 oq_strerror(e), oq_db_errmsg(w->db));
    oq_session_free(w->s);
    w->s = NULL;
  }
  if (w->db) {
    w->restarts = oq_db_restarts(w->db);
    oq_db_close(w->db);
    w->db = NULL;
  }
  return NULL;
}

void oqt_drain(const oqt_drain_opts *o, oqt_drain_stats *st)
{
  ASSERT(o->nthreads > 0 && o->batch > 0 && o->time_limit_s > 0);
  shared sh = {.o = o};
  worker *ws = calloc((size_t)o->nthreads, sizeof *ws);
  pthread_t *tids = calloc((size_t)o->nthreads, sizeof *tids);
  ASSERT(ws && tids);
  atomic_init(&sh.stop, false);
  ASSERT_EQ(pthread_mutex_init(&sh.mu, NULL), 0);
  ASSERT_EQ(pthread_barrier_init(&sh.start, NULL, (unsigned)o->nthreads + 1),
            0);

  for (int i = 0; i < o->nthreads; i++) {
    ws[i].sh = &sh;
    ws[i].idx = i;
    atomic_init(&ws[i].fenced, 0);
    ASSERT_EQ(pthread_create(&tids[i], NULL, worker_main, &ws[i]), 0);
  }
  pthread_barrier_wait(&sh.start);
  uint64_t t0 = oq_monotonic_ms();
  for (int i = 0; i < o->nthreads; i++)
    ASSERT_EQ(pthread_join(tids[i], NULL), 0);
  uint64_t t1 = oq_monotonic_ms();

  memset(st, 0, sizeof *st);
  st->elapsed_s = (double)(t1 - t0) / 1000.0;
  for (int i = 0; i < o->nthreads; i++) {
    st->claimed += ws[i].claimed;
    st->acked += ws[i].acked;
    st->reconciled += ws[i].reconciled;
    st->restarts += ws[i].restarts;
    st->heartbeats += ws[i].heartbeats;
    st->fenced += atomic_load(&ws[i].fenced);
  }
  printf("drain: %d threads, claimed %llu, acked %llu, reconciled %llu, "
         "restarts %llu, heartbeats %llu, fenced events %llu, %.2f s\n",
         o->nthreads, (unsigned long long)st->claimed,
         (unsigned long long)st->acked, (unsigned long long)st->reconciled,
         (unsigned long long)st->restarts, (unsigned long long)st->heartbeats,
         (unsigned long long)st->fenced, st->elapsed_s);
  fflush(stdout);

  pthread_barrier_destroy(&sh.start);
  pthread_mutex_destroy(&sh.mu);
  free(ws);
  free(tids);
  if (sh.first_err[0] != '\0')
    OQT_FAIL("%s", sh.first_err);
}
