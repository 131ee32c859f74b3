/*
 * promhttp.h: the HTTP server behind --metrics-addr, shared by the worker
 * (worker/src/metrics.c) and the coordinator (coordinator/src/metrics.c):
 * parses the listen address, binds it, and serves GET/HEAD /metrics from a
 * render callback and /healthz from a health callback on libmicrohttpd's
 * own thread (the server thread). Other paths answer 404, other methods
 * 405 (with Allow), unless a page callback answers them. An IPv6 address
 * is bound IPv6-only.
 *
 * Load: page requests are built on a thread of their own, one at a time
 * (16 at most wait; then 503), so a slow or flooded page never delays
 * /healthz or /metrics. The server takes 256 connections, 32 per client
 * address, and closes a connection idle for 10 s.
 *
 * Failures come back as a kind plus a detail rather than a finished
 * message, so each daemon keeps its own wording.
 *
 * Thread safety: render and healthy run on the server thread, page on the
 * page thread (always the same one, so what it keeps, e.g. a database
 * connection, is that thread's), each concurrently with everything else;
 * cm_promhttp_start and cm_promhttp_stop are the caller's to serialise.
 */
#ifndef ONCEQ_COMMON_PROMHTTP_H
#define ONCEQ_COMMON_PROMHTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "onceq/err.h"

typedef struct cm_promhttp cm_promhttp;

/* A parsed listen address, and "HOST:PORT" as messages show it (with the
 * host defaulted: "9090" shows as "127.0.0.1:9090"). */
typedef struct cm_promhttp_addr {
  struct sockaddr_storage ss;
  socklen_t sslen;
  char shown[80];
} cm_promhttp_addr;

typedef struct cm_promhttp_opts {
  /* The exposition text, with snprintf semantics: writes what fits into
   * buf (NUL-terminated) and returns the full length. */
  size_t (*render)(void *ud, char *buf, size_t len);
  /* /healthz answers 200 "ok" while this returns true, else 503. */
  bool (*healthy)(void *ud);
  void *ud;
  /* May be NULL (every other path answers 404). Answers any other GET or
   * HEAD path (the coordinator's status page): returns the HTTP status
   * and sets *body (malloc'd; the server frees it), *len and *ctype
   * (static text). authorization is the request's Authorization header or
   * NULL. A 401 gets "WWW-Authenticate: Bearer"; every answer gets
   * no-store caching and a Content-Security-Policy that allows no script
   * and no request elsewhere. Runs on the page thread, one request at a
   * time: it may take long without delaying /healthz or /metrics. */
  int (*page)(void *page_ud, const char *url, const char *authorization,
              char **body, size_t *len, const char **ctype);
  void *page_ud;
} cm_promhttp_opts;

/* cm_promhttp_start's failures. */
enum {
  CM_PROMHTTP_ELISTEN = -1, /* socket/bind/listen failed; why: strerror */
  CM_PROMHTTP_ESTART = -2   /* libmicrohttpd refused; it logged why */
};

/*
 * Parse "PORT", ":PORT", "HOST:PORT" (HOST: IPv4 or localhost; default
 * 127.0.0.1) or "[IPv6]:PORT"; PORT 0 picks one at start. 0, or -1 with
 * what was expected in why ("expected HOST:PORT ..."; why may be NULL).
 */
int cm_promhttp_parse_addr(const char *addr, cm_promhttp_addr *a, char *why,
                           size_t whylen);

/* Bind a and serve o (copied). 0 with *out set and *bound_port (may be
 * NULL) the port, or a CM_PROMHTTP_E* with *out and *bound_port untouched. */
OQ_MUST_CHECK int cm_promhttp_start(cm_promhttp **out,
                                    const cm_promhttp_addr *a,
                                    const cm_promhttp_opts *o, int *bound_port,
                                    char *why, size_t whylen);

/*
 * --metrics-addr as both daemons take it: parse addr, then start as
 * cm_promhttp_start, with the failures worded for the flag in err ("bad
 * --metrics-addr ...", "cannot listen on ...; choose another
 * --metrics-addr"). 0 with *out and *bound_port (may be NULL) set, or -1.
 */
OQ_MUST_CHECK int cm_promhttp_serve(cm_promhttp **out, const char *addr,
                                    const cm_promhttp_opts *o, int *bound_port,
                                    char *err, size_t errlen);

/* Stop serving, close the socket, free h (NULL is fine). Waits for a
 * request in progress (a page being built, too); page requests still
 * queued are not built, and their connections are closed. */
void cm_promhttp_stop(cm_promhttp *h);

#endif
