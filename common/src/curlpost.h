/*
 * curlpost.h: how both daemons set up libcurl for their outgoing POSTs
 * (the worker's --http handler, worker/src/handler_http.c, and the
 * coordinator's dead-job webhooks, coordinator/src/notify.c): process
 * set-up, the URL check done at start-up, and the options every request
 * shares (http/https only, no redirects, no signals, timeouts, a user
 * agent, and a progress callback through which a stop request aborts a
 * transfer within a second).
 *
 * Thread safety: cm_curl_global_init/cleanup once, on the main thread,
 * before/after any other thread uses libcurl; a handle belongs to one
 * thread: each thread owns its own CURL handle.
 */
#ifndef ONCEQ_COMMON_CURLPOST_H
#define ONCEQ_COMMON_CURLPOST_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* libcurl's process-wide set-up; 0, or -1 with one line in err. */
int cm_curl_global_init(char *err, size_t errlen);
void cm_curl_global_cleanup(void);

/*
 * The start-up check of a URL to POST to (--http, --notify-url; flag
 * names it in the message): it must parse with libcurl's URL API, be
 * http:// or https://, have a host and a port from 1 to 65535. 0, or 2
 * (bad configuration, docs/design.md §6) with one line in err; the URL
 * itself is never echoed, as it may hold credentials.
 */
int cm_curl_check_url(const char *flag, const char *url, char *err,
                      size_t errlen);

/* What a POST handle is set up with; strings are copied by libcurl. */
typedef struct cm_curl_post {
  const char *url;
  const char *user_agent;
  long connect_timeout_ms;
  long timeout_ms;
  bool insecure; /* skip TLS verification (--insecure) */
  /* called at least once a second during a transfer; non-zero aborts */
  int (*progress)(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                  curl_off_t ultotal, curl_off_t ulnow);
  void *progress_ud;
} cm_curl_post;

/* Set the shared options on e. CURLE_OK, or the first failure (out of
 * memory, or a libcurl built without http/https). */
CURLcode cm_curl_post_setup(CURL *e, const cm_curl_post *p);

#endif
