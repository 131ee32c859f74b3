/*
 * metrics.h: the coordinator's Prometheus endpoint (libmicrohttpd,
 * the worker's style): GET /metrics in the text exposition format 0.0.4,
 * GET /healthz (200 while the coordinator's session is live).
 *
 * Series:
 *  - onceq_coordinator_leader: 1 while this instance holds the lease;
 *  - onceq_coordinator_*_total counters (reaps, retention, notifications,
 *    schedule firings, errors);
 *  - per queue, refreshed by the leader only (so a dashboard sees one
 *    copy): onceq_queue_items{queue,state="ready|scheduled|running|dead"}
 *    and onceq_queue_lag_seconds{queue} (age of the oldest ready item; 0
 *    when none). Counts are capped like `onceq stats` (a value of
 *    QV_COUNT_CAP + 1 means "more than QV_COUNT_CAP").
 *
 * Thread safety: setters may be called from any thread (atomics, and a
 * mutex around the queue gauges); the HTTP server runs its own thread.
 */
#ifndef ONCEQ_COORD_METRICS_H
#define ONCEQ_COORD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qstats.h"

typedef struct co_metrics co_metrics;

typedef enum co_counter {
  CO_C_REAPED_SESSIONS = 0, /* onceq_coordinator_reaped_sessions_total */
  CO_C_REAPED_DEAD,         /* onceq_coordinator_abandoned_dead_total */
  CO_C_RETENTION_DONE,      /* onceq_coordinator_retention_done_deleted_total */
  CO_C_RETENTION_DEAD,      /* onceq_coordinator_retention_dead_deleted_total */
  CO_C_NOTIFIED,            /* onceq_coordinator_notifications_total */
  CO_C_NOTIFY_FAILED,       /* onceq_coordinator_notification_failures_total */
  CO_C_SCHEDULE_FIRED,      /* onceq_coordinator_schedule_items_total */
  CO_C_LEADERSHIPS,         /* onceq_coordinator_leaderships_total */
  CO_C_ERRORS,              /* onceq_coordinator_errors_total */
  CO_C__COUNT
} co_counter;

/* NULL on out-of-memory. Free with co_metrics_free (stops the server). */
co_metrics *co_metrics_new(void);
void co_metrics_free(co_metrics *m);

void co_metrics_add(co_metrics *m, co_counter c, uint64_t n);
void co_metrics_set_leader(co_metrics *m, bool leader);
void co_metrics_set_healthy(co_metrics *m, bool healthy);
/* Copy the per-queue gauges from s; NULL clears them (not leader). */
void co_metrics_set_queues(co_metrics *m, const qv_snapshot *s);

/* Render into buf (truncated at a line end; NUL-terminated); returns the
 * bytes written. For tests and the server. */
size_t co_metrics_render(co_metrics *m, char *buf, size_t len);

/*
 * Serve on addr: "HOST:PORT", ":PORT" or "PORT" (HOST: IPv4, localhost or
 * [IPv6]; default 127.0.0.1; PORT 0 picks one). 0, or -1 with one line in
 * err naming the fix. *bound_port (may be NULL) gets the port.
 */
int co_metrics_serve(co_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen);

/* Before co_metrics_serve: answer every other GET path with page (the
 * status page, status_page.h; see cm_promhttp_opts.page). */
void co_metrics_set_page(co_metrics *m,
                         int (*page)(void *ud, const char *url,
                                     const char *authorization, char **body,
                                     size_t *len, const char **ctype),
                         void *ud);

#endif
