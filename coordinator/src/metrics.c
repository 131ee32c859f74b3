/*
 * metrics.c: the coordinator's counters and gauges, their
 * rendering, and the coordinator's side of its --metrics-addr server: its
 * options and error messages (metrics.h). The text format and the
 * server itself are common/ (common/src/promtext.h, promhttp.h); the
 * series differ, so they are kept here.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "metrics.h"
#include "onceq/onceq.h"
#include "promhttp.h"
#include "promtext.h"

static const struct {
  const char *name;
  const char *help;
} counter_defs[CO_C__COUNT] = {
    [CO_C_REAPED_SESSIONS] = {"onceq_coordinator_reaped_sessions_total",
                              "Expired sessions this instance reaped."},
    [CO_C_REAPED_DEAD] = {"onceq_coordinator_abandoned_dead_total",
                          "Items out of attempts that reaping moved to "
                          "onceq_dead."},
    [CO_C_RETENTION_DONE] = {"onceq_coordinator_retention_done_deleted_total",
                             "onceq_done rows deleted by retention."},
    [CO_C_RETENTION_DEAD] = {"onceq_coordinator_retention_dead_deleted_total",
                             "onceq_dead rows deleted by retention."},
    [CO_C_NOTIFIED] = {"onceq_coordinator_notifications_total",
                       "Dead items the webhook receiver settled."},
    [CO_C_NOTIFY_FAILED] = {"onceq_coordinator_notification_failures_total",
                            "Webhook attempts that failed and will be "
                            "retried."},
    [CO_C_SCHEDULE_FIRED] = {"onceq_coordinator_schedule_items_total",
                             "Items enqueued by schedules."},
    [CO_C_LEADERSHIPS] = {"onceq_coordinator_leaderships_total",
                          "Times this instance took the lease."},
    [CO_C_ERRORS] = {"onceq_coordinator_errors_total",
                     "Passes that failed with a database error."},
};

typedef struct qgauge {
  char *queue;
  long v[4];         /* ready, scheduled, running, dead */
  double lag_s;      /* 0 when none ready */
  bool paused;       /* `onceq pause` */
  long max_running;  /* `onceq limit`; -1: none */
  double rate_per_s; /* `onceq limit --rate`; -1: none */
  long blocked;      /* `onceq keys --blocked`: failed heads waiting */
} qgauge;

struct co_metrics {
  _Atomic uint64_t counters[CO_C__COUNT];
  atomic_bool leader;
  atomic_bool healthy;
  pthread_mutex_t mu; /* guards q / nq */
  qgauge *q;
  int nq;
  cm_promhttp *http; /* NULL until co_metrics_serve succeeds */
  /* co_metrics_set_page: the status page, or NULL */
  int (*page)(void *ud, const char *url, const char *authorization, char **body,
              size_t *len, const char **ctype);
  void *page_ud;
};

co_metrics *co_metrics_new(void)
{
  co_metrics *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  for (int c = 0; c < CO_C__COUNT; c++)
    atomic_init(&m->counters[c], 0);
  atomic_init(&m->leader, false);
  atomic_init(&m->healthy, true);
  if (pthread_mutex_init(&m->mu, NULL) != 0) {
    free(m);
    return NULL;
  }
  return m;
}

static void clear_queues(co_metrics *m)
{
  for (int i = 0; i < m->nq; i++)
    free(m->q[i].queue);
  free(m->q);
  m->q = NULL;
  m->nq = 0;
}

void co_metrics_free(co_metrics *m)
{
  if (!m)
    return;
  cm_promhttp_stop(m->http);
  clear_queues(m);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

void co_metrics_add(co_metrics *m, co_counter c, uint64_t n)
{
  if (m && (unsigned)c < CO_C__COUNT)
    atomic_fetch_add_explicit(&m->counters[c], n, memory_order_relaxed);
}

void co_metrics_set_leader(co_metrics *m, bool leader)
{
  if (m)
    atomic_store(&m->leader, leader);
}

void co_metrics_set_healthy(co_metrics *m, bool healthy)
{
  if (m)
    atomic_store(&m->healthy, healthy);
}

void co_metrics_set_queues(co_metrics *m, const qv_snapshot *s)
{
  if (!m)
    return;
  qgauge *q = NULL;
  int n = 0;
  if (s && s->nq > 0) {
    q = calloc((size_t)s->nq, sizeof *q);
    if (!q)
      return; /* keep the old values */
    for (int i = 0; i < s->nq; i++) {
      q[n].queue = strdup(s->q[i].queue);
      if (!q[n].queue)
        continue;
      q[n].v[0] = s->q[i].ready;
      q[n].v[1] = s->q[i].scheduled;
      q[n].v[2] = s->q[i].running;
      q[n].v[3] = s->q[i].dead;
      q[n].lag_s = s->q[i].lag_s > 0 ? s->q[i].lag_s : 0;
      q[n].paused = s->q[i].paused;
      q[n].max_running = s->q[i].max_running;
      q[n].blocked = s->q[i].blocked;
      q[n].rate_per_s = s->q[i].rate_limit > 0 && s->q[i].rate_interval_ms > 0
                            ? (double)s->q[i].rate_limit * 1000.0 /
                                  (double)s->q[i].rate_interval_ms
                            : -1;
      n++;
    }
  }
  pthread_mutex_lock(&m->mu);
  clear_queues(m);
  m->q = q;
  m->nq = n;
  pthread_mutex_unlock(&m->mu);
}

/* ---- rendering --------------------------------------------------------- */

/* Returns the full length (snprintf semantics), writing what fits into
 * buf. Also cm_promhttp's render callback. */
static size_t render_all(void *ud, char *buf, size_t len)
{
  static const char *const states[4] = {"ready", "scheduled", "running",
                                        "dead"};
  co_metrics *m = ud;
  cm_prom_out o;
  cm_prom_out_init(&o, buf, len);
  cm_prom_info(&o, "onceq_coordinator_info", "Build information.",
               oq_version());
  cm_prom_gauge(&o, "onceq_coordinator_leader",
                "1 while this instance holds the coordinator lease, else 0.",
                atomic_load(&m->leader) ? 1 : 0);
  cm_prom_gauge(&o, "onceq_coordinator_healthy",
                "1 while this instance's session is live, else 0.",
                atomic_load(&m->healthy) ? 1 : 0);
  for (int c = 0; c < CO_C__COUNT; c++)
    cm_prom_counter(
        &o, counter_defs[c].name, counter_defs[c].help,
        atomic_load_explicit(&m->counters[c], memory_order_relaxed));
  pthread_mutex_lock(&m->mu);
  cm_prom_help_type(&o, "onceq_queue_items",
                    "Items per queue and state (leader only; counts stop past "
                    "100000).",
                    "gauge");
  for (int i = 0; i < m->nq; i++)
    for (int s = 0; s < 4; s++) {
      cm_prom_printf(&o, "onceq_queue_items{queue=\"");
      cm_prom_label_value(&o, m->q[i].queue);
      cm_prom_printf(&o, "\",state=\"%s\"} %ld\n", states[s], m->q[i].v[s]);
    }
  cm_prom_help_type(&o, "onceq_queue_lag_seconds",
                    "Age of the oldest ready item per queue, seconds (leader "
                    "only).",
                    "gauge");
  for (int i = 0; i < m->nq; i++) {
    cm_prom_printf(&o, "onceq_queue_lag_seconds{queue=\"");
    cm_prom_label_value(&o, m->q[i].queue);
    cm_prom_printf(&o, "\"} %.3f\n", m->q[i].lag_s);
  }
  cm_prom_help_type(&o, "onceq_queue_paused",
                    "1 while claims skip the queue (`onceq pause`), else 0 "
                    "(leader only).",
                    "gauge");
  for (int i = 0; i < m->nq; i++) {
    cm_prom_printf(&o, "onceq_queue_paused{queue=\"");
    cm_prom_label_value(&o, m->q[i].queue);
    cm_prom_printf(&o, "\"} %d\n", m->q[i].paused ? 1 : 0);
  }
  cm_prom_help_type(&o, "onceq_queue_blocked_keys",
                    "Ordering keys whose head item failed and waits, holding "
                    "the key's other items back (`onceq keys --blocked`; "
                    "leader only; counts stop past 100000).",
                    "gauge");
  for (int i = 0; i < m->nq; i++) {
    cm_prom_printf(&o, "onceq_queue_blocked_keys{queue=\"");
    cm_prom_label_value(&o, m->q[i].queue);
    cm_prom_printf(&o, "\"} %ld\n", m->q[i].blocked);
  }
  cm_prom_help_type(&o, "onceq_queue_concurrency_limit",
                    "Most items of the queue claimed at once, fleet-wide "
                    "(`onceq limit`; only limited queues; leader only).",
                    "gauge");
  for (int i = 0; i < m->nq; i++) {
    if (m->q[i].max_running < 0)
      continue;
    cm_prom_printf(&o, "onceq_queue_concurrency_limit{queue=\"");
    cm_prom_label_value(&o, m->q[i].queue);
    cm_prom_printf(&o, "\"} %ld\n", m->q[i].max_running);
  }
  cm_prom_help_type(&o, "onceq_queue_rate_limit_per_second",
                    "Most starts per second of the queue in the long run, "
                    "fleet-wide (`onceq limit --rate`; only rate-limited "
                    "queues; leader only).",
                    "gauge");
  for (int i = 0; i < m->nq; i++) {
    if (m->q[i].rate_per_s < 0)
      continue;
    cm_prom_printf(&o, "onceq_queue_rate_limit_per_second{queue=\"");
    cm_prom_label_value(&o, m->q[i].queue);
    cm_prom_printf(&o, "\"} %.6g\n", m->q[i].rate_per_s);
  }
  pthread_mutex_unlock(&m->mu);
  return o.need;
}

size_t co_metrics_render(co_metrics *m, char *buf, size_t len)
{
  return cm_prom_render_lines(render_all, m, buf, len);
}

/* ---- HTTP -------------------------------------------------------------- */

static bool is_healthy(void *ud)
{
  co_metrics *m = ud;
  return atomic_load(&m->healthy);
}

int co_metrics_serve(co_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen)
{
  const cm_promhttp_opts opts = {
      .render = render_all,
      .healthy = is_healthy,
      .ud = m,
      .page = m->page,
      .page_ud = m->page_ud,
  };
  return cm_promhttp_serve(&m->http, addr, &opts, bound_port, err, errlen);
}

void co_metrics_set_page(co_metrics *m,
                         int (*page)(void *ud, const char *url,
                                     const char *authorization, char **body,
                                     size_t *len, const char **ctype),
                         void *ud)
{
  m->page = page;
  m->page_ud = ud;
}
