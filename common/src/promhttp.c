/*
 * promhttp.c: owns the metrics HTTP server (promhttp.h): listen-address
 * parsing, the listening socket, the libmicrohttpd daemon and its request
 * routing, and the page thread. What /metrics says and when /healthz is
 * healthy belong to the callers' callbacks; so does the wording of their
 * error messages.
 *
 * Terms: the server thread is libmicrohttpd's one internal thread (epoll on
 * Linux); it accepts, reads and writes every connection and answers
 * /metrics and /healthz itself, from memory. A page job is one request for
 * any other path when a page callback is set: the server thread suspends
 * its connection and queues the job; the page thread builds the answers
 * one at a time (the callback may wait seconds on a database) and resumes
 * the connection. So a slow or flooded status page can delay other pages,
 * never the health check (issue 20, finding 6).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
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

/* Connections: in all, from one client address, and how long one may sit
 * idle. An idle socket costs the server thread nothing but a descriptor;
 * the limit per client keeps one client (a pod, a script) from taking
 * every slot, so the kubelet's probe still gets in. */
#define CONN_LIMIT 256
#define CONN_PER_CLIENT 32
#define CONN_IDLE_S 10
/* Page jobs waiting or being built; beyond it a page request gets 503
 * at once rather than a suspended connection. */
#define PAGE_QUEUE_MAX 16

/* One page request, from the server thread to the page thread and back.
 * Owned by its connection (MHD's per-request pointer): freed by
 * on_completed. */
typedef struct page_job {
  struct page_job *next;       /* (mu) in the queue */
  struct MHD_Connection *conn; /* suspended until the answer is ready */
  char *url;                   /* copies: the request's own strings */
  char *auth;                  /* Authorization header, or NULL */
  bool done;                   /* (mu) status, body, len, ctype set */
  int status;
  char *body; /* malloc'd; NULL: out of memory */
  size_t len;
  const char *ctype;
} page_job;

struct cm_promhttp {
  struct MHD_Daemon *daemon;
  cm_promhttp_opts o; /* a copy: the threads read it until stop */
  bool paging;        /* o.page is set: mu and cv exist */
  bool pager_started; /* pager runs (until pager_stop) */
  pthread_t pager;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  page_job *head, *tail; /* (mu) queued, oldest first */
  int jobs;              /* (mu) queued or being built */
  bool stopping;         /* (mu) no new job; the queue is answered 503 */
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

/* A finished page job's answer (promhttp.h's page), on the server thread;
 * the body passes to the response. */
static MHD_RESULT reply_page(struct MHD_Connection *conn, page_job *j)
{
  struct MHD_Response *r;
  MHD_RESULT ret;
  char *body = j->body;
  size_t len = j->len;
  const char *ctype = j->ctype ? j->ctype : CT_TEXT;
  int status = j->status;

  j->body = NULL;
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

/* ---- the page thread --------------------------------------------------- */

static void job_free(page_job *j)
{
  if (!j)
    return;
  free(j->url);
  free(j->auth);
  free(j->body);
  free(j);
}

/* The page thread: builds queued jobs one at a time with o.page, which
 * therefore runs on this thread only (its database connection is this
 * thread's). At stop, gives what is still queued a 503 without building it
 * and resumes its connection, so none stays suspended when the daemon
 * stops (the daemon then closes them). */
static void *pager_main(void *arg)
{
  cm_promhttp *h = arg;

  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (!h->head && !h->stopping)
      pthread_cond_wait(&h->cv, &h->mu);
    page_job *j = h->head;
    if (!j)
      break; /* stopping, and nothing left */
    h->head = j->next;
    if (!h->head)
      h->tail = NULL;
    j->next = NULL;
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);

    int status = 503;
    char *body = NULL;
    size_t len = 0;
    const char *ctype = CT_TEXT;
    if (stopping) {
      body = strdup("shutting down\n");
      len = body ? strlen(body) : 0;
    } else {
      status = h->o.page(h->o.page_ud, j->url, j->auth, &body, &len, &ctype);
    }
    struct MHD_Connection *conn = j->conn;

    pthread_mutex_lock(&h->mu);
    j->status = status;
    j->body = body;
    j->len = len;
    j->ctype = ctype;
    j->done = true;
    h->jobs--;
    pthread_mutex_unlock(&h->mu);
    /* Not under mu: the server thread takes mu while libmicrohttpd holds
     * its own locks. j may be freed once resumed: conn was read before. */
    MHD_resume_connection(conn);
    pthread_mutex_lock(&h->mu);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

/* Stop the pager once the queue is answered, and wait for it: it may be
 * in the middle of a page build. */
static void pager_stop(cm_promhttp *h)
{
  pthread_mutex_lock(&h->mu);
  h->stopping = true;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->pager, NULL);
  h->pager_started = false;
}

/* A page request's first call: queue a job and suspend the connection, or
 * answer 503 at once when the queue is full or the server stopping. */
static MHD_RESULT page_enqueue(cm_promhttp *h, struct MHD_Connection *conn,
                               const char *url, void **con_cls)
{
  const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_AUTHORIZATION);
  page_job *j = calloc(1, sizeof *j);

  if (j) {
    j->url = strdup(url);
    j->auth = auth ? strdup(auth) : NULL;
  }
  if (!j || !j->url || (auth && !j->auth)) {
    job_free(j);
    return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n",
                        NULL);
  }
  j->conn = conn;
  pthread_mutex_lock(&h->mu);
  if (h->stopping || h->jobs >= PAGE_QUEUE_MAX) {
    bool stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    job_free(j);
    return reply_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                        stopping ? "shutting down\n"
                                 : "busy: too many status requests at once; "
                                   "retry shortly\n",
                        NULL);
  }
  /* Suspended before the page thread can see the job, so its resume never
   * comes first. */
  MHD_suspend_connection(conn);
  *con_cls = j;
  if (h->tail)
    h->tail->next = j;
  else
    h->head = j;
  h->tail = j;
  h->jobs++;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return MHD_YES;
}

/* The request is over (answered, or its connection closed): free its job.
 * A queued job's connection is suspended, so this never sees one. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  (void)cls;
  (void)conn;
  (void)toe;
  job_free(*con_cls);
  *con_cls = NULL;
}

/* libmicrohttpd calls this on the server thread for every request (first
 * with the headers, then again for each piece of a body, and once more
 * after a resume). /metrics and /healthz are answered on the first call; a
 * page request is queued then and answered on the call after its resume.
 * A body, if any, is never read. */
static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
  cm_promhttp *h = cls;
  const cm_promhttp_opts *o = &h->o;
  bool is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0;

  if (!known && o->page && is_get) {
    page_job *j = *con_cls;
    bool done = false;

    if (!j)
      return page_enqueue(h, conn, url, con_cls);
    pthread_mutex_lock(&h->mu);
    done = j->done;
    pthread_mutex_unlock(&h->mu);
    return done ? reply_page(conn, j) : MHD_YES;
  }
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
  h->paging = o->page != NULL;
  if (h->paging) {
    if ((e = pthread_mutex_init(&h->mu, NULL)) != 0) {
      h->paging = false;
      errno = e;
      goto sys_fail;
    }
    if ((e = pthread_cond_init(&h->cv, NULL)) != 0) {
      pthread_mutex_destroy(&h->mu);
      h->paging = false;
      errno = e;
      goto sys_fail;
    }
  }
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
  /* The pager before the daemon: once the daemon runs, a connection may be
   * suspended, and only the pager resumes it. */
  if (h->paging) {
    if ((e = pthread_create(&h->pager, NULL, pager_main, h)) != 0) {
      errno = e;
      goto sys_fail;
    }
    h->pager_started = true;
  }
  h->daemon = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
          (h->paging ? MHD_ALLOW_SUSPEND_RESUME : 0),
      0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
      NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
      on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)CONN_IDLE_S, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned int)CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned int)CONN_PER_CLIENT, MHD_OPTION_END);
  if (!h->daemon) {
    struct stat now;

    if (fstat(fd, &now) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino)
      close(fd); /* still ours: MHD failed before taking it */
    close(keep);
    keep = fd = -1;
    e = CM_PROMHTTP_ESTART;
    goto fail;
  }
  close(keep); /* the daemon owns fd from here */
  keep = fd = -1;
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
  e = CM_PROMHTTP_ELISTEN;
fail:
  if (keep >= 0)
    close(keep);
  if (fd >= 0)
    close(fd);
  if (h && h->pager_started)
    pager_stop(h);
  if (h && h->paging) {
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
  }
  free(h);
  return e;
}

void cm_promhttp_stop(cm_promhttp *h)
{
  if (!h)
    return;
  /* The pager first: it resumes every queued job's connection (with a
   * 503 the daemon may not get to send), and no job is queued after
   * stopping is set, so nothing is left suspended (libmicrohttpd aborts on
   * stop otherwise). */
  if (h->pager_started)
    pager_stop(h);
  MHD_stop_daemon(h->daemon); /* joins its thread, closes the socket */
  if (h->paging) {
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
  }
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
