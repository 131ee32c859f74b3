/*
 * noop_bench.c: the fastest a no-op handler can go through the PUBLIC C API
 * (onceq/onceq.h only), for test/bench/run.sh.
 *
 * T threads, each with its own oq_db, oq_session and heartbeat, loop
 *   oq_claim(B) -> oq_ack_batch(all claimed ids)
 * until nothing ready is left in the queue. It prints one line:
 *   acked=N lost=N claims=N acks=N seconds=S items_per_s=R
 * timed from the moment every thread has its session (a barrier) to the
 * moment the last thread finds the queue empty, and where the rest of the
 * process's wall time went (the peers bench clocks the whole process):
 *   startup=S   main() to the barrier (connections, session rows, heartbeats)
 *   shutdown=S  the last thread done to every session ended and closed
 *
 *   noop_bench --db CONNINFO [--threads T] [--batch B] [--queue Q]
 *              [--max-items N] [--max-seconds S]
 *
 * Bounded: a thread stops after --max-seconds (default 120) or once the
 * threads together acked --max-items (default 10,000,000). Exit status 0
 * when the queue was drained or --max-items reached, 3 when --max-seconds
 * stopped it, 1 on an error.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onceq/onceq.h"

#define MAX_BATCH 1024
#define MAX_THREADS 256

typedef struct cfg {
  const char *db;
  const char *queue;
  int threads;
  int batch;
  long max_items;
  double max_seconds;
} cfg;

typedef struct shared {
  const cfg *c;
  pthread_barrier_t ready;
  _Atomic long acked;
  _Atomic long lost;
  _Atomic long claims;
  _Atomic long acks;
  _Atomic bool failed;
  _Atomic bool bounded;
} shared;

typedef struct thr {
  shared *sh;
  int index;
  pthread_t tid;
  double t_begin; /* after the barrier */
  double t_end;
  char err[OQ_ERRBUF_SIZE];
} thr;

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Any ready item left that nobody has claimed? */
static oq_err any_ready(void *ud, int ncols, const char *const *vals)
{
  *(bool *)ud = ncols > 0 && vals[0] != NULL;
  return OQ_OK;
}

static void *run(void *arg)
{
  thr *t = arg;
  shared *sh = t->sh;
  const cfg *c = sh->c;
  oq_db *db = NULL;
  oq_session *s = NULL;
  oq_heartbeat *hb = NULL;
  oq_db_opts dbo = {.conninfo = c->db, .application_name = "onceq-noop-bench"};
  bool joined = false;

  if (oq_db_open(&dbo, &db, t->err, sizeof t->err) != OQ_OK)
    goto fail;
  oq_session_opts so = {
      .heartbeat_interval_ms = 1000, .expiry_ms = 10000, .queues = c->queue};
  if (oq_session_open(db, &so, &s) != OQ_OK) {
    snprintf(t->err, sizeof t->err, "session: %s", oq_db_errmsg(db));
    goto fail;
  }
  if (oq_heartbeat_start(&dbo, s, NULL, NULL, &hb, t->err, sizeof t->err) !=
      OQ_OK)
    goto fail;

  pthread_barrier_wait(&sh->ready);
  joined = true;
  t->t_begin = now_s();
  double deadline = t->t_begin + c->max_seconds;

  const char *queues[1] = {c->queue};
  const char *ids[MAX_BATCH];
  bool acked[MAX_BATCH];
  for (;;) {
    if (atomic_load(&sh->failed))
      break;
    if (atomic_load(&sh->acked) >= c->max_items)
      break; /* run.sh checks that nothing is left */
    if (now_s() >= deadline) {
      atomic_store(&sh->bounded, true);
      break;
    }
    oq_item *items = NULL;
    size_t n = 0;
    if (oq_claim(db, s, queues, 1, c->batch, &items, &n) != OQ_OK) {
      snprintf(t->err, sizeof t->err, "claim: %s", oq_db_errmsg(db));
      goto fail;
    }
    atomic_fetch_add(&sh->claims, 1);
    if (n == 0) {
      /* SKIP LOCKED may pass rows another thread is claiming right now:
       * stop only when no unclaimed ready item is left at all. */
      bool more = false;
      const char *p[1] = {c->queue};
      if (oq_db_query(db,
                      "SELECT 1 FROM onceq_items WHERE claim IS NULL"
                      " AND queue = $1 AND run_at <= now()"
                      " AND attempts < max_attempts LIMIT 1",
                      1, p, any_ready, &more) != OQ_OK) {
        snprintf(t->err, sizeof t->err, "probe: %s", oq_db_errmsg(db));
        goto fail;
      }
      if (!more)
        break;
      continue;
    }
    for (size_t i = 0; i < n; i++)
      ids[i] = items[i].id;
    size_t k = 0;
    oq_err e = oq_ack_batch(db, s, ids, n, acked, &k, NULL);
    oq_items_free(items, n);
    if (e != OQ_OK) {
      snprintf(t->err, sizeof t->err, "ack: %s", oq_db_errmsg(db));
      goto fail;
    }
    atomic_fetch_add(&sh->acks, 1);
    atomic_fetch_add(&sh->acked, (long)k);
    atomic_fetch_add(&sh->lost, (long)(n - k));
  }
  t->t_end = now_s();
  goto out;
fail:
  atomic_store(&sh->failed, true);
  if (!joined) {
    pthread_barrier_wait(&sh->ready);
    t->t_begin = now_s();
  }
  t->t_end = now_s();
out:
  oq_heartbeat_stop(hb);
  if (s && db) {
    oq_err e = oq_session_end(db, s);
    (void)e;
  }
  oq_session_free(s);
  oq_db_close(db);
  return NULL;
}

static void log_stderr(void *ud, oq_log_level level, const char *session,
                       const char *item, const char *msg)
{
  (void)ud;
  fprintf(stderr, "noop_bench: %s session=%s item=%s %s\n",
          oq_log_level_name(level), session, item, msg);
}

static void usage(FILE *f)
{
  fputs("usage: noop_bench --db CONNINFO [--threads T] [--batch B] "
        "[--queue Q]\n"
        "                  [--max-items N] [--max-seconds S]\n",
        f);
}

int main(int argc, char **argv)
{
  double t_main = now_s();
  cfg c = {.db = NULL,
           .queue = OQ_DEFAULT_QUEUE,
           .threads = 4,
           .batch = 16,
           .max_items = 10000000,
           .max_seconds = 120};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if (!v) {
      fprintf(stderr, "noop_bench: %s needs a value\n", a);
      return 2;
    }
    if (strcmp(a, "--db") == 0)
      c.db = v;
    else if (strcmp(a, "--queue") == 0)
      c.queue = v;
    else if (strcmp(a, "--threads") == 0)
      c.threads = (int)strtol(v, NULL, 10);
    else if (strcmp(a, "--batch") == 0)
      c.batch = (int)strtol(v, NULL, 10);
    else if (strcmp(a, "--max-items") == 0)
      c.max_items = atol(v);
    else if (strcmp(a, "--max-seconds") == 0)
      c.max_seconds = atof(v);
    else {
      fprintf(stderr, "noop_bench: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
    i++;
  }
  if (!c.db || c.threads < 1 || c.threads > MAX_THREADS || c.batch < 1 ||
      c.batch > MAX_BATCH || c.max_items < 1 || c.max_seconds <= 0) {
    usage(stderr);
    return 2;
  }
  oq_log_set_sink(log_stderr, NULL, OQ_LOG_WARN);

  shared sh;
  memset(&sh, 0, sizeof sh);
  sh.c = &c;
  pthread_barrier_init(&sh.ready, NULL, (unsigned)c.threads);
  thr *ts = calloc((size_t)c.threads, sizeof *ts);
  if (!ts)
    return 1;
  int started = 0;
  for (int i = 0; i < c.threads; i++) {
    ts[i].sh = &sh;
    ts[i].index = i;
    if (pthread_create(&ts[i].tid, NULL, run, &ts[i]) != 0) {
      fprintf(stderr, "noop_bench: cannot start thread %d\n", i);
      return 1; /* the barrier would never open; exit outright */
    }
    started++;
  }
  double t_begin = 0, t_end = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(ts[i].tid, NULL);
    if (i == 0 || ts[i].t_begin < t_begin)
      t_begin = ts[i].t_begin;
    if (ts[i].t_end > t_end)
      t_end = ts[i].t_end;
  }
  int rc = 0;
  for (int i = 0; i < started; i++)
    if (ts[i].err[0]) {
      fprintf(stderr, "noop_bench: thread %d: %s\n", i, ts[i].err);
      rc = 1;
    }
  double t_closed = now_s();
  double secs = t_end > t_begin ? t_end - t_begin : 0;
  long acked = atomic_load(&sh.acked);
  printf("acked=%ld lost=%ld claims=%ld acks=%ld seconds=%.3f "
         "items_per_s=%.1f startup=%.3f shutdown=%.3f\n",
         acked, atomic_load(&sh.lost), atomic_load(&sh.claims),
         atomic_load(&sh.acks), secs, secs > 0 ? (double)acked / secs : 0.0,
         t_begin > t_main ? t_begin - t_main : 0,
         t_closed > t_end ? t_closed - t_end : 0);
  free(ts);
  pthread_barrier_destroy(&sh.ready);
  if (rc == 0 && atomic_load(&sh.bounded))
    rc = 3;
  return rc;
}
