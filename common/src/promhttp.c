/*
 * promhttp.c: owns the metrics HTTP server (promhttp.h): listen-address
 * parsing, the listening socket, the libmicrohttpd daemon and its request
 * routing. What /metrics says and when /healthz is healthy belong to the
 * callers' callbacks; so does the wording of their error messages.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <microhttpd.h>

#include "onceq/onceq.h"

#include "promhttp.h"
#include "promtext.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT; /* before 0.9.71 handlers returned int */
#else
typedef enum MHD_Result MHD_RESULT;
#endif

struct cm_promhttp {
  struct MHD_Daemon *daemon;
  cm_promhttp_opts o; /* a copy: the daemon's thread reads it until stop */
};

/* ---- requests ---------------------------------------------------------- */

#define CT_TEXT "text/plain; charset=utf-8"
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"

static MHD_RESULT reply_static(struct MHD_Connection *conn, unsigned int status,
                               const char *body, const char *allow)
{
  struct MHD_Response *r;
  MHD_RESULT ret;

  r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                      MHD_RESPMEM_PERSISTENT);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_TEXT);
  if (allow)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

#define MAX_RENDERS 8

static MHD_RESULT reply_metrics(const cm_promhttp_opts *o,
                                struct MHD_Connection *conn)
{
  struct MHD_Response *r;
  MHD_RESULT ret;
  size_t cap = 8192, need;
  char *text = NULL;

  /* Grow until a whole copy fits: values may gain digits between two
   * renders, so one sized retry is not always enough. Bounded: after
   * MAX_RENDERS, serve a copy cut at a line end. */
  for (int tries = 1;; tries++) {
    char *nt = realloc(text, cap);

    if (!nt) {
      free(text);
      return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                          "out of memory\n", NULL);
    }
    text = nt;
    need = o->render(o->ud, text, cap);
    if (need < cap)
      break;
    if (tries >= MAX_RENDERS) {
      need = cm_prom_render_lines(o->render, o->ud, text, cap);
      break;
    }
    cap = need + 1024;
  }
  r = MHD_create_response_from_buffer(need, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_PROM);
  ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* Any other GET path, answered by o->page (promhttp.h). */
static MHD_RESULT reply_page(const cm_promhttp_opts *o,
                             struct MHD_Connection *conn, const char *url)
{
  struct MHD_Response *r;
  MHD_RESULT ret;
  char *body = NULL;
  size_t len = 0;
  const char *ctype = CT_TEXT;
  const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_AUTHORIZATION);
  int status = o->page(o->page_ud, url, auth, &body, &len, &ctype);

  if (!body)
    return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n",
                        NULL);
  r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(r, "Content-Security-Policy",
                          "default-src 'none'; style-src 'unsafe-inline'; "
                          "frame-ancestors 'none'; form-action 'none'");
  if (status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"onceq\"");
  ret = MHD_queue_response(conn, (unsigned int)status, r);
  MHD_destroy_response(r);
  return ret;
}

/* libmicrohttpd calls this on its own thread for every request (first with
 * the headers, then again for each piece of a body). We answer on the first
 * call; a body, if any, is never read. */
static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
  const cm_promhttp_opts *o = &((cm_promhttp *)cls)->o;
  bool is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0;

  if (!known && o->page && is_get)
    return reply_page(o, conn, url);
  if (!known)
    return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
  if (!is_get)
    return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                        "method not allowed\n", "GET, HEAD");
  if (strcmp(url, "/metrics") == 0)
    return reply_metrics(o, conn);
  if (o->healthy(o->ud))
    return reply_static(conn, MHD_HTTP_OK, "ok\n", NULL);
  return reply_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "unhealthy\n", NULL);
}

/* libmicrohttpd's own error messages go to our log at WARN. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
  char msg[256];
  size_t n;

  vsnprintf(msg, sizeof msg, fmt, ap);
  n = strlen(msg);
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  OQ_LOG(OQ_LOG_WARN, "", "", "metrics http: %s", msg);
}

/* ---- the listen address ------------------------------------------------ */

static int parse_port(const char *s, unsigned *port)
{
  unsigned long v = 0;
  size_t n = 0;

  for (; s[n]; n++) {
    if (s[n] < '0' || s[n] > '9' || n >= 5)
      return -1;
    v = v * 10 + (unsigned long)(s[n] - '0');
  }
  if (n == 0 || v > 65535)
    return -1;
  *port = (unsigned)v;
  return 0;
}

/* Numeric hosts only (plus localhost), so start-up never waits on DNS. */
int cm_promhttp_parse_addr(const char *addr, cm_promhttp_addr *a, char *why,
                           size_t whylen)
{
  char host[64];
  const char *port_s, *colon;
  unsigned port;
  size_t hlen;
  bool v6 = false;

  if (!why)
    whylen = 0; /* snprintf(NULL, 0, ...) just measures */
  memset(a, 0, sizeof *a);
  if (!addr || !*addr) {
    snprintf(why, whylen, "expected HOST:PORT (e.g. 127.0.0.1:9090)");
    return -1;
  }
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');

    if (!close || close[1] != ':') {
      snprintf(why, whylen, "expected [IPv6]:PORT");
      return -1;
    }
    hlen = (size_t)(close - addr - 1);
    if (hlen == 0 || hlen >= sizeof host) {
      snprintf(why, whylen, "expected [IPv6]:PORT");
      return -1;
    }
    memcpy(host, addr + 1, hlen);
    host[hlen] = '\0';
    port_s = close + 2;
    v6 = true;
  } else {
    colon = strrchr(addr, ':');
    if (!colon) {
      /* "PORT" alone means 127.0.0.1:PORT. */
      host[0] = '\0';
      port_s = addr;
      if (parse_port(port_s, &port) != 0) {
        snprintf(why, whylen, "expected HOST:PORT (e.g. 127.0.0.1:9090)");
        return -1;
      }
    } else {
      if (memchr(addr, ':', (size_t)(colon - addr))) {
        snprintf(why, whylen,
                 "expected HOST:PORT; write IPv6 hosts in brackets, "
                 "e.g. [::1]:9090");
        return -1;
      }
      hlen = (size_t)(colon - addr);
      if (hlen >= sizeof host) {
        snprintf(why, whylen,
                 "expected HOST:PORT with HOST an IPv4 address, [IPv6] "
                 "or localhost");
        return -1;
      }
      memcpy(host, addr, hlen);
      host[hlen] = '\0';
      port_s = colon + 1;
    }
  }
  if (parse_port(port_s, &port) != 0) {
    snprintf(why, whylen, "expected HOST:PORT with PORT 0-65535");
    return -1;
  }

  if (v6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;

    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) {
      snprintf(why, whylen, "expected [IPv6]:PORT; '%s' is not an IPv6 address",
               host);
      return -1;
    }
    a->sslen = sizeof *s6;
    snprintf(a->shown, sizeof a->shown, "[%s]:%u", host, port);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;

    if (host[0] == '\0' || strcmp(host, "localhost") == 0)
      snprintf(host, sizeof host, "127.0.0.1");
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
      snprintf(why, whylen,
               "expected HOST:PORT with HOST an IPv4 address, [IPv6] or "
               "localhost");
      return -1;
    }
    a->sslen = sizeof *s4;
    snprintf(a->shown, sizeof a->shown, "%s:%u", host, port);
  }
  return 0;
}

/* ---- start and stop ---------------------------------------------------- */

/* We bind and listen ourselves (rather than MHD_OPTION_SOCK_ADDR) so a
 * failure carries its errno, and the message can say exactly what to fix. */
int cm_promhttp_start(cm_promhttp **out, const cm_promhttp_addr *a,
                      const cm_promhttp_opts *o, int *bound_port, char *why,
                      size_t whylen)
{
  cm_promhttp *h;
  struct sockaddr_storage got;
  socklen_t gotlen = sizeof got;
  struct stat st;
  int fd = -1, keep = -1, one = 1, flags, e;

  if (why && whylen)
    why[0] = '\0';
  h = calloc(1, sizeof *h);
  if (!h) {
    errno = ENOMEM;
    goto sys_fail;
  }
  h->o = *o;
  fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    goto sys_fail;
  /* SO_REUSEADDR only skips TIME_WAIT after a restart; Linux still refuses
   * a port another socket is listening on. */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a->ss.ss_family == AF_INET6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, (const struct sockaddr *)&a->ss, a->sslen) != 0)
    goto sys_fail;
  if (listen(fd, 64) != 0)
    goto sys_fail;
  flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    goto sys_fail;
  if (getsockname(fd, (struct sockaddr *)&got, &gotlen) != 0)
    goto sys_fail;

  /* libmicrohttpd closes fd on stop, but on a failed start it may or may
   * not have closed it, depending on where it failed. `keep` (a second
   * reference to the same socket) lets us tell afterwards without ever
   * closing a descriptor number another thread has since reused. */
  keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (keep < 0 || fstat(fd, &st) != 0)
    goto sys_fail;
  h->daemon = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
      on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
      MHD_OPTION_END);
  if (!h->daemon) {
    struct stat now;

    if (fstat(fd, &now) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino)
      close(fd); /* still ours: MHD failed before taking it */
    close(keep);
    free(h);
    return CM_PROMHTTP_ESTART;
  }
  close(keep); /* the daemon owns fd from here */
  if (bound_port)
    *bound_port = got.ss_family == AF_INET6
                      ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                      : ntohs(((struct sockaddr_in *)&got)->sin_port);
  *out = h;
  return 0;

sys_fail:
  e = errno;
  if (why && whylen && strerror_r(e, why, whylen) != 0)
    snprintf(why, whylen, "error %d", e);
  if (keep >= 0)
    close(keep);
  if (fd >= 0)
    close(fd);
  free(h);
  return CM_PROMHTTP_ELISTEN;
}

void cm_promhttp_stop(cm_promhttp *h)
{
  if (!h)
    return;
  MHD_stop_daemon(h->daemon); /* joins its thread, closes the socket */
  free(h);
}

int cm_promhttp_serve(cm_promhttp **out, const char *addr,
                      const cm_promhttp_opts *o, int *bound_port, char *err,
                      size_t errlen)
{
  cm_promhttp_addr a;
  char why[128];
  if (cm_promhttp_parse_addr(addr, &a, why, sizeof why) != 0) {
    snprintf(err, errlen, "bad --metrics-addr '%.100s': %s", addr ? addr : "",
             why);
    return -1;
  }
  switch (cm_promhttp_start(out, &a, o, bound_port, why, sizeof why)) {
  case 0:
    return 0;
  case CM_PROMHTTP_ELISTEN:
    snprintf(err, errlen,
             "cannot listen on %s: %s; choose another --metrics-addr", a.shown,
             why);
    return -1;
  default:
    snprintf(err, errlen,
             "cannot start the metrics server on %s (libmicrohttpd "
             "failed; see the log); choose another --metrics-addr",
             a.shown);
    return -1;
  }
}
