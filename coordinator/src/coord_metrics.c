/*
 * coord_metrics.c: the coordinator's counters and gauges and the
 * libmicrohttpd server that exposes them (coord_metrics.h). Modelled on
 * worker/src/metrics.c; the series differ, so the code is separate.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cofmt.h"
#include "coord_metrics.h"
#include "onceq/onceq.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT; /* before 0.9.71 handlers returned int */
#else
typedef enum MHD_Result MHD_RESULT;
#endif

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
  long v[4];    /* ready, scheduled, running, dead */
  double lag_s; /* 0 when none ready */
} qgauge;

struct co_metrics {
  _Atomic uint64_t counters[CO_C__COUNT];
  atomic_bool leader;
  atomic_bool healthy;
  pthread_mutex_t mu; /* guards q / nq */
  qgauge *q;
  int nq;
  struct MHD_Daemon *daemon; /* NULL until co_metrics_serve succeeds */
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
  if (m->daemon)
    MHD_stop_daemon(m->daemon);
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

void co_metrics_set_queues(co_metrics *m, const co_snapshot *s)
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

typedef struct out {
  char *buf;
  size_t len;
  size_t need;
} out;

static void out_printf(out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void out_printf(out *o, const char *fmt, ...)
{
  va_list ap;
  int n;
  va_start(ap, fmt);
  if (o->need < o->len)
    n = vsnprintf(o->buf + o->need, o->len - o->need, fmt, ap);
  else
    n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->need += (size_t)n;
}

static void help_type(out *o, const char *name, const char *help,
                      const char *type)
{
  out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void label_value(out *o, const char *s)
{
  for (; *s; s++) {
    if (*s == '\\')
      out_printf(o, "\\\\");
    else if (*s == '"')
      out_printf(o, "\\\"");
    else if (*s == '\n')
      out_printf(o, "\\n");
    else
      out_printf(o, "%c", *s);
  }
}

static size_t render_all(co_metrics *m, char *buf, size_t len)
{
  static const char *const states[4] = {"ready", "scheduled", "running",
                                        "dead"};
  out o = {buf, len, 0};
  if (len > 0)
    buf[0] = '\0';
  help_type(&o, "onceq_coordinator_info", "Build information.", "gauge");
  out_printf(&o, "onceq_coordinator_info{version=\"");
  label_value(&o, oq_version());
  out_printf(&o, "\"} 1\n");
  help_type(&o, "onceq_coordinator_leader",
            "1 while this instance holds the coordinator lease, else 0.",
            "gauge");
  out_printf(&o, "onceq_coordinator_leader %d\n",
             atomic_load(&m->leader) ? 1 : 0);
  help_type(&o, "onceq_coordinator_healthy",
            "1 while this instance's session is live, else 0.", "gauge");
  out_printf(&o, "onceq_coordinator_healthy %d\n",
             atomic_load(&m->healthy) ? 1 : 0);
  for (int c = 0; c < CO_C__COUNT; c++) {
    help_type(&o, counter_defs[c].name, counter_defs[c].help, "counter");
    out_printf(&o, "%s %llu\n", counter_defs[c].name,
               (unsigned long long)atomic_load_explicit(&m->counters[c],
                                                        memory_order_relaxed));
  }
  pthread_mutex_lock(&m->mu);
  help_type(&o, "onceq_queue_items",
            "Items per queue and state (leader only; counts stop past "
            "100000).",
            "gauge");
  for (int i = 0; i < m->nq; i++)
    for (int s = 0; s < 4; s++) {
      out_printf(&o, "onceq_queue_items{queue=\"");
      label_value(&o, m->q[i].queue);
      out_printf(&o, "\",state=\"%s\"} %ld\n", states[s], m->q[i].v[s]);
    }
  help_type(&o, "onceq_queue_lag_seconds",
            "Age of the oldest ready item per queue, seconds (leader only).",
            "gauge");
  for (int i = 0; i < m->nq; i++) {
    out_printf(&o, "onceq_queue_lag_seconds{queue=\"");
    label_value(&o, m->q[i].queue);
    out_printf(&o, "\"} %.3f\n", m->q[i].lag_s);
  }
  pthread_mutex_unlock(&m->mu);
  return o.need;
}

size_t co_metrics_render(co_metrics *m, char *buf, size_t len)
{
  if (!buf || len == 0)
    return 0;
  buf[0] = '\0';
  if (!m)
    return 0;
  size_t need = render_all(m, buf, len);
  if (need < len)
    return need;
  size_t end = len - 1;
  while (end > 0 && buf[end - 1] != '\n')
    end--;
  buf[end] = '\0';
  return end;
}

/* ---- HTTP -------------------------------------------------------------- */

#define CT_TEXT "text/plain; charset=utf-8"
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"

static MHD_RESULT reply_static(struct MHD_Connection *conn, unsigned status,
                               const char *body)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_TEXT);
  MHD_RESULT ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static MHD_RESULT reply_metrics(co_metrics *m, struct MHD_Connection *conn)
{
  size_t cap = 8192, need;
  char *text = NULL;
  for (int tries = 0; tries < 8; tries++) {
    char *nt = realloc(text, cap);
    if (!nt) {
      free(text);
      return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                          "out of memory\n");
    }
    text = nt;
    need = render_all(m, text, cap);
    if (need < cap)
      break;
    cap = need + 1024;
  }
  if (need >= cap)
    need = co_metrics_render(m, text, cap);
  struct MHD_Response *r =
      MHD_create_response_from_buffer(need, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_PROM);
  MHD_RESULT ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
  co_metrics *m = cls;
  (void)version;
  (void)upload_data;
  (void)upload_data_size;
  (void)con_cls;
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                        "method not allowed\n");
  if (strcmp(url, "/metrics") == 0)
    return reply_metrics(m, conn);
  if (strcmp(url, "/healthz") == 0)
    return atomic_load(&m->healthy)
               ? reply_static(conn, MHD_HTTP_OK, "ok\n")
               : reply_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                              "unhealthy\n");
  return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
  char msg[256];
  (void)cls;
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
    msg[--n] = '\0';
  OQ_LOG(OQ_LOG_WARN, "", "", "metrics http: %s", msg);
}

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

/* Numeric hosts only (plus localhost): start-up never waits on DNS. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss,
                      socklen_t *sslen)
{
  char host[64] = "";
  const char *port_s = addr;
  unsigned port;
  memset(ss, 0, sizeof *ss);
  if (!addr || !*addr)
    return -1;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    size_t hlen = close ? (size_t)(close - addr - 1) : 0;
    if (!close || close[1] != ':' || hlen == 0 || hlen >= sizeof host)
      return -1;
    memcpy(host, addr + 1, hlen);
    host[hlen] = '\0';
    port_s = close + 2;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (parse_port(port_s, &port) != 0 ||
        inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
      return -1;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    *sslen = sizeof *s6;
    return 0;
  }
  const char *colon = strrchr(addr, ':');
  if (colon) {
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= sizeof host || memchr(addr, ':', hlen))
      return -1;
    memcpy(host, addr, hlen);
    host[hlen] = '\0';
    port_s = colon + 1;
  }
  if (host[0] == '\0' || strcmp(host, "localhost") == 0)
    snprintf(host, sizeof host, "127.0.0.1");
  struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
  if (parse_port(port_s, &port) != 0 ||
      inet_pton(AF_INET, host, &s4->sin_addr) != 1)
    return -1;
  s4->sin_family = AF_INET;
  s4->sin_port = htons((uint16_t)port);
  *sslen = sizeof *s4;
  return 0;
}

int co_metrics_serve(co_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen)
{
  struct sockaddr_storage ss, got;
  socklen_t sslen = 0, gotlen = sizeof got;
  int fd = -1, one = 1;
  char why[128];
  if (parse_addr(addr, &ss, &sslen) != 0) {
    snprintf(err, errlen,
             "bad --metrics-addr '%.100s': expected HOST:PORT (e.g. "
             "127.0.0.1:9091; HOST an IPv4 address, [IPv6] or localhost)",
             addr ? addr : "");
    return -1;
  }
  fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    goto sys_fail;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&got, &gotlen) != 0)
    goto sys_fail;
  /* the daemon's own thread serves; it owns fd once it started */
  m->daemon = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
      on_request, m, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
      MHD_OPTION_END);
  if (!m->daemon) {
    /* libmicrohttpd may or may not have closed fd, depending on where it
     * failed: leave it (the coordinator exits 2 right after) rather than
     * risk closing a descriptor number that was reused */
    snprintf(err, errlen,
             "cannot start the metrics server on %s (libmicrohttpd failed); "
             "choose another --metrics-addr",
             addr);
    return -1;
  }
  int port = got.ss_family == AF_INET6
                 ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                 : ntohs(((struct sockaddr_in *)&got)->sin_port);
  if (bound_port)
    *bound_port = port;
  return 0;
sys_fail:
  if (strerror_r(errno, why, sizeof why) != 0)
    snprintf(why, sizeof why, "error %d", errno);
  snprintf(err, errlen,
           "cannot listen on %s: %s; choose another "
           "--metrics-addr",
           addr, why);
  if (fd >= 0)
    close(fd);
  return -1;
}
