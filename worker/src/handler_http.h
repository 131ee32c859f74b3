/*
 * handler_http.h: the --http handler (libcurl). POSTs the payload as
 * application/json with Idempotency-Key: <item id>, Onceq-Attempt and
 * Onceq-Queue headers. 2xx: success. 429 and 5xx: a failed attempt that
 * honours Retry-After (seconds or an HTTP date) for its delay. Other 4xx: a
 * failed attempt with the normal backoff. Connect and total timeouts; TLS
 * verification on unless turned off.
 *
 * Thread safety: one wk_http per thread (it owns a CURL easy handle).
 * Call curl_global_init once before any thread creates one.
 */
#ifndef ONCEQ_WORKER_HANDLER_HTTP_H
#define ONCEQ_WORKER_HANDLER_HTTP_H

#include "task.h"

typedef struct wk_http wk_http;

typedef struct wk_http_cfg {
  const char *url;
  int connect_timeout_ms; /* 0: 5000 */
  int timeout_ms;         /* whole request; 0: 30000 */
  bool insecure;          /* true: skip TLS verification */
} wk_http_cfg;

/* NULL on out-of-memory. Free with wk_http_free (NULL allowed). */
wk_http *wk_http_new(const wk_http_cfg *cfg);
void wk_http_free(wk_http *h);

/* POST one item; fills r (retry_after_ms set from Retry-After). WK_ABANDONED
 * when t's cancel check fired during the request. */
void wk_http_run(wk_http *h, const wk_task *t, wk_result *r);

/* Parse a Retry-After value (delta-seconds or HTTP-date) relative to
 * now_epoch_s, into milliseconds (capped at 1 h; 0 for a past date); -1
 * when unparseable. Exposed for unit tests. */
int wk_http_parse_retry_after(const char *value, long now_epoch_s);

#endif
