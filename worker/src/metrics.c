/*
 * metrics.c: owns the worker's counters, gauges and histograms (plain C11
 * atomics, no locks), their rendering in the Prometheus text exposition
 * format 0.0.4 (through promtext.h), and the worker's side of the
 * --metrics-addr server (promhttp.h serves GET /metrics and GET /healthz
 * from them): its options and its error messages.
 *
 * Terms: a "bucket" here is one non-cumulative slot of a histogram (the
 * observations with bounds[i-1] < v <= bounds[i]); rendering adds them up
 * into the cumulative _bucket{le=...} series Prometheus expects.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "onceq/onceq.h"

#include "metrics.h"
#include "promhttp.h"
#include "promtext.h"

#define WK_BUCKETS_MAX 15 /* finite bounds + the +Inf slot */

/* One histogram's fixed layout: finite upper bounds in seconds, ascending;
 * the +Inf bucket is implicit. */
typedef struct hist_def {
  const char *name;
  const char *help;
  size_t nbounds;
  double bounds[WK_BUCKETS_MAX - 1];
} hist_def;

static const hist_def hist_defs[WK_H__COUNT] = {
    [WK_H_HANDLER] = {"onceq_worker_handler_seconds",
                      "Time a handler took to run one attempt, in seconds.",
                      14,
                      {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                       5, 10, 30, 60}},
    [WK_H_LATENCY] = {"onceq_worker_enqueue_to_start_seconds",
                      "Time from an item's run_at to its handler starting, "
                      "in seconds.",
                      14,
                      {0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                       1, 2.5, 5, 10, 60}},
};

/* Counter families: the name (with _total) and the HELP text. */
static const struct {
  const char *name;
  const char *help;
} counter_defs[WK_C__COUNT] = {
    [WK_C_CLAIMED] = {"onceq_worker_claimed_total",
                      "Items this worker claimed."},
    [WK_C_ACKED] = {"onceq_worker_acked_total",
                    "Items this worker acknowledged (ack committed)."},
    [WK_C_FAILED] = {"onceq_worker_failed_total",
                     "Attempts that failed (each retry counts)."},
    [WK_C_DEAD] = {"onceq_worker_dead_total",
                   "Items dead-lettered after their last attempt."},
    [WK_C_LOST] = {"onceq_worker_claims_lost_total",
                   "Acks refused because the claim was lost (fenced)."},
    [WK_C_RESTARTS] = {"onceq_worker_tx_restarts_total",
                       "Transactions re-run after a serialization failure "
                       "or restart."},
    [WK_C_SESSIONS] = {"onceq_worker_sessions_total",
                       "Sessions this worker registered."},
    [WK_C_RECONCILED] = {"onceq_worker_reconciled_total",
                         "Claims of this worker's live session that no job "
                         "held in memory, released by a reconciliation "
                         "sweep."},
};

typedef struct hist {
  _Atomic uint64_t buckets[WK_BUCKETS_MAX]; /* non-cumulative; last: +Inf */
  _Atomic uint64_t sum_bits; /* a double (seconds), as its bit pattern */
} hist;

struct wk_metrics {
  _Atomic uint64_t counters[WK_C__COUNT];
  _Atomic int64_t inflight; /* items a handler is running for, now */
  atomic_bool healthy;      /* /healthz: 200 while true */
  hist hists[WK_H__COUNT];
  double start_time_s; /* process start, Unix seconds */
  cm_promhttp *http;   /* NULL until wk_metrics_serve succeeds */
};

/* ---- process start time ------------------------------------------------ */

/* The process's start time in Unix seconds, from /proc (field 22 of
 * /proc/self/stat is the start in clock ticks after boot; btime in
 * /proc/stat is the boot time). Falls back to `fallback` off Linux. */
static double process_start_time(double fallback)
{
  char buf[1024];
  FILE *f;
  size_t n;
  const char *p;
  unsigned long long start_ticks = 0, btime = 0;
  long hz;
  int field;

  f = fopen("/proc/self/stat", "r");
  if (!f)
    return fallback;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* comm (field 2) may hold spaces and parens: skip to the last ')'. */
  p = strrchr(buf, ')');
  if (!p)
    return fallback;
  p++;
  for (field = 3; field < 22 && *p; field++) {
    while (*p == ' ')
      p++;
    while (*p && *p != ' ')
      p++;
  }
  if (sscanf(p, " %llu", &start_ticks) != 1)
    return fallback;

  f = fopen("/proc/stat", "r");
  if (!f)
    return fallback;
  while (fgets(buf, sizeof buf, f)) {
    if (sscanf(buf, "btime %llu", &btime) == 1)
      break;
  }
  fclose(f);
  hz = sysconf(_SC_CLK_TCK);
  if (btime == 0 || hz <= 0)
    return fallback;
  return (double)btime + (double)start_ticks / (double)hz;
}

/* ---- updates ----------------------------------------------------------- */

wk_metrics *wk_metrics_new(void)
{
  wk_metrics *m = calloc(1, sizeof *m);
  struct timespec ts;
  double now_s = 0;

  if (!m)
    return NULL;
  for (int c = 0; c < WK_C__COUNT; c++)
    atomic_init(&m->counters[c], 0);
  atomic_init(&m->inflight, 0);
  /* Healthy from the start: the daemon clears it when it fences itself or
   * loses its session, so a liveness probe never kills a worker that is
   * still starting up. */
  atomic_init(&m->healthy, true);
  for (int h = 0; h < WK_H__COUNT; h++) {
    double zero = 0.0;
    uint64_t bits;

    for (int b = 0; b < WK_BUCKETS_MAX; b++)
      atomic_init(&m->hists[h].buckets[b], 0);
    memcpy(&bits, &zero, sizeof bits);
    atomic_init(&m->hists[h].sum_bits, bits);
  }
  if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
    now_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  m->start_time_s = process_start_time(now_s);
  return m;
}

void wk_metrics_free(wk_metrics *m)
{
  if (!m)
    return;
  cm_promhttp_stop(m->http);
  free(m);
}

void wk_metrics_add(wk_metrics *m, wk_counter c, uint64_t n)
{
  if (!m || (unsigned)c >= WK_C__COUNT)
    return;
  atomic_fetch_add_explicit(&m->counters[c], n, memory_order_relaxed);
}

uint64_t wk_metrics_get(wk_metrics *m, wk_counter c)
{
  if (!m || (unsigned)c >= WK_C__COUNT)
    return 0;
  return atomic_load_explicit(&m->counters[c], memory_order_relaxed);
}

void wk_metrics_inflight(wk_metrics *m, int delta)
{
  if (!m)
    return;
  atomic_fetch_add_explicit(&m->inflight, (int64_t)delta, memory_order_relaxed);
}

void wk_metrics_set_healthy(wk_metrics *m, bool healthy)
{
  if (!m)
    return;
  atomic_store_explicit(&m->healthy, healthy, memory_order_relaxed);
}

/* Called by executors after each attempt (and by the claim loop when a
 * handler starts). NaN is dropped; a negative duration (a clock step) counts
 * as 0 so that _sum never goes down. */
void wk_metrics_observe(wk_metrics *m, wk_hist h, double seconds)
{
  const hist_def *d;
  hist *hs;
  size_t i;
  uint64_t old_bits, new_bits;
  double sum;

  if (!m || (unsigned)h >= WK_H__COUNT || isnan(seconds))
    return;
  if (seconds < 0)
    seconds = 0;
  d = &hist_defs[h];
  hs = &m->hists[h];
  for (i = 0; i < d->nbounds; i++) {
    if (seconds <= d->bounds[i]) /* le is inclusive */
      break;
  }
  atomic_fetch_add_explicit(&hs->buckets[i], 1, memory_order_relaxed);

  old_bits = atomic_load_explicit(&hs->sum_bits, memory_order_relaxed);
  do {
    memcpy(&sum, &old_bits, sizeof sum);
    sum += seconds;
    memcpy(&new_bits, &sum, sizeof new_bits);
  } while (!atomic_compare_exchange_weak_explicit(
      &hs->sum_bits, &old_bits, new_bits, memory_order_relaxed,
      memory_order_relaxed));
}

/* ---- rendering --------------------------------------------------------- */

static void render_hist(cm_prom_out *o, const hist_def *d, hist *hs)
{
  char le[32], num[32];
  uint64_t cum = 0, bits;
  double sum;

  cm_prom_help_type(o, d->name, d->help, "histogram");
  /* Each slot is read once and added up here, so the series is cumulative
   * and +Inf equals _count even while other threads observe. */
  for (size_t i = 0; i <= d->nbounds; i++) {
    cum += atomic_load_explicit(&hs->buckets[i], memory_order_relaxed);
    if (i < d->nbounds)
      cm_prom_fmt_float(le, sizeof le, d->bounds[i]);
    else
      snprintf(le, sizeof le, "+Inf");
    cm_prom_printf(o, "%s_bucket{le=\"%s\"} %llu\n", d->name, le,
                   (unsigned long long)cum);
  }
  bits = atomic_load_explicit(&hs->sum_bits, memory_order_relaxed);
  memcpy(&sum, &bits, sizeof sum);
  cm_prom_fmt_float(num, sizeof num, sum);
  cm_prom_printf(o, "%s_sum %s\n", d->name, num);
  cm_prom_printf(o, "%s_count %llu\n", d->name, (unsigned long long)cum);
}

/* Render everything; returns the full length (snprintf semantics), writing
 * what fits into buf. Also cm_promhttp's render callback. */
static size_t render_all(void *ud, char *buf, size_t len)
{
  wk_metrics *m = ud;
  cm_prom_out o;
  char num[32];

  cm_prom_out_init(&o, buf, len);
  cm_prom_info(&o, "onceq_worker_info", "Build information about this worker.",
               oq_version());

  cm_prom_help_type(&o, "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    "gauge");
  cm_prom_fmt_float(num, sizeof num, m->start_time_s);
  cm_prom_printf(&o, "process_start_time_seconds %s\n", num);

  for (int c = 0; c < WK_C__COUNT; c++)
    cm_prom_counter(
        &o, counter_defs[c].name, counter_defs[c].help,
        atomic_load_explicit(&m->counters[c], memory_order_relaxed));

  cm_prom_gauge(
      &o, "onceq_worker_inflight", "Items whose handler is running now.",
      (long long)atomic_load_explicit(&m->inflight, memory_order_relaxed));
  cm_prom_gauge(&o, "onceq_worker_healthy",
                "1 while the worker is healthy (session alive, not fenced), "
                "else 0.",
                atomic_load_explicit(&m->healthy, memory_order_relaxed) ? 1
                                                                        : 0);

  for (int h = 0; h < WK_H__COUNT; h++)
    render_hist(&o, &hist_defs[h], &m->hists[h]);
  return o.need;
}

size_t wk_metrics_render(wk_metrics *m, char *buf, size_t len)
{
  return cm_prom_render_lines(render_all, m, buf, len);
}

/* ---- HTTP server ------------------------------------------------------- */

static bool is_healthy(void *ud)
{
  wk_metrics *m = ud;

  return atomic_load_explicit(&m->healthy, memory_order_relaxed);
}

int wk_metrics_serve(wk_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen)
{
  const cm_promhttp_opts opts = {
      .render = render_all,
      .healthy = is_healthy,
      .ud = m,
  };
  int port = 0;

  if (!err)
    errlen = 0; /* the caller just gets no text */
  if (errlen)
    err[0] = '\0';
  if (!m) {
    snprintf(err, errlen, "metrics not initialised");
    return -1;
  }
  if (m->http) {
    snprintf(err, errlen, "the metrics server is already running");
    return -1;
  }
  if (cm_promhttp_serve(&m->http, addr, &opts, &port, err, errlen) != 0)
    return -1;
  if (bound_port)
    *bound_port = port;
  OQ_LOG(OQ_LOG_INFO, "", "",
         "metrics: serving /metrics and /healthz on %s (port %d)", addr, port);
  return 0;
}
