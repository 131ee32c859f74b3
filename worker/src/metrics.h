/*
 * metrics.h: the worker's counters, gauges and histograms, and the
 * Prometheus text endpoint that serves them (libmicrohttpd), with /healthz.
 *
 * Terms: all counters are monotonic since start; gauges are current values;
 * histograms have fixed buckets in seconds (Prometheus convention:
 * cumulative _bucket{le=...}, _sum, _count).
 *
 * Thread safety: the wk_metrics_* update functions are lock-free atomics and
 * may be called from any thread. The HTTP server runs its own thread.
 */
#ifndef ONCEQ_WORKER_METRICS_H
#define ONCEQ_WORKER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wk_metrics wk_metrics;

typedef enum wk_counter {
  WK_C_CLAIMED = 0, /* onceq_worker_claimed_total */
  WK_C_ACKED,       /* onceq_worker_acked_total */
  WK_C_FAILED,      /* onceq_worker_failed_total (attempts that failed) */
  WK_C_DEAD,        /* onceq_worker_dead_total */
  WK_C_LOST,        /* onceq_worker_claims_lost_total */
  WK_C_RESTARTS,    /* onceq_worker_tx_restarts_total */
  WK_C_SESSIONS,    /* onceq_worker_sessions_total (registrations) */
  WK_C_RECONCILED,  /* onceq_worker_reconciled_total (claims a sweep
                       released because no job held them) */
  WK_C__COUNT
} wk_counter;

typedef enum wk_hist {
  WK_H_HANDLER = 0, /* onceq_worker_handler_seconds */
  WK_H_LATENCY,     /* onceq_worker_enqueue_to_start_seconds */
  WK_H__COUNT
} wk_hist;

/* NULL on out-of-memory. Free with wk_metrics_free (stops the server). */
wk_metrics *wk_metrics_new(void);
void wk_metrics_free(wk_metrics *m);

void wk_metrics_add(wk_metrics *m, wk_counter c, uint64_t n);
void wk_metrics_inflight(wk_metrics *m, int delta); /* gauge */
void wk_metrics_observe(wk_metrics *m, wk_hist h, double seconds);
/* /healthz answers 200 while healthy, 503 otherwise. */
void wk_metrics_set_healthy(wk_metrics *m, bool healthy);
uint64_t wk_metrics_get(wk_metrics *m, wk_counter c);

/* Render the Prometheus text exposition into buf; returns bytes written
 * (truncated to len-1, always NUL-terminated). */
size_t wk_metrics_render(wk_metrics *m, char *buf, size_t len);

/*
 * Serve /metrics and /healthz on addr ("HOST:PORT"; HOST may be omitted:
 * 127.0.0.1; PORT 0 picks one). Returns 0, or -1 with a one-line reason in
 * err. *bound_port (may be NULL) gets the port.
 */
int wk_metrics_serve(wk_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen);

#endif
