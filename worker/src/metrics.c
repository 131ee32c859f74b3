/*
 * metrics.c: owns the worker's counters, gauges and histograms (plain C11
 * atomics, no locks), their rendering in the Prometheus text exposition
 * format 0.0.4, and the libmicrohttpd server behind --metrics-addr that
 * answers GET /metrics and GET /healthz.
 *
 * Terms: a "bucket" here is one non-cumulative slot of a histogram (the
 * observations with bounds[i-1] < v <= bounds[i]); rendering adds them up
 * into the cumulative _bucket{le=...} series Prometheus expects.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "onceq/onceq.h"

#include "metrics.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT; /* before 0.9.71 handlers returned int */
#else
typedef enum MHD_Result MHD_RESULT;
#endif

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
  double start_time_s;       /* process start, Unix seconds */
  struct MHD_Daemon *daemon; /* NULL until wk_metrics_serve succeeds */
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
  if (m->daemon)
    MHD_stop_daemon(m->daemon); /* joins its thread, closes the socket */
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

/* An output cursor with snprintf semantics: `need` counts every byte the
 * full text takes, `buf` holds what fits. */
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

/* Format v as Prometheus reads floats: the shortest text that reads back
 * as the same double, without an exponent between 1e-4 and 1e15 ("0.005",
 * "2.5", "60", "1e-05"), or +Inf/-Inf/NaN. */
static void fmt_float(char *dst, size_t len, double v)
{
  if (isnan(v)) {
    snprintf(dst, len, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(dst, len, "%s", v > 0 ? "+Inf" : "-Inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    double a = fabs(v);

    snprintf(dst, len, "%.*g", prec, v);
    if (strtod(dst, NULL) != v)
      continue;
    /* %.1g writes 10 as "1e+01": take more digits to get "10". */
    if (strchr(dst, 'e') && a >= 1e-4 && a < 1e15 && prec < 17)
      continue;
    return;
  }
}

static void render_help_type(out *o, const char *name, const char *help,
                             const char *type)
{
  out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Write a label value with the escapes the text format requires. */
static void render_label_value(out *o, const char *s)
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

static void render_hist(out *o, const hist_def *d, hist *hs)
{
  char le[32], num[32];
  uint64_t cum = 0, bits;
  double sum;

  render_help_type(o, d->name, d->help, "histogram");
  /* Each slot is read once and added up here, so the series is cumulative
   * and +Inf equals _count even while other threads observe. */
  for (size_t i = 0; i <= d->nbounds; i++) {
    cum += atomic_load_explicit(&hs->buckets[i], memory_order_relaxed);
    if (i < d->nbounds)
      fmt_float(le, sizeof le, d->bounds[i]);
    else
      snprintf(le, sizeof le, "+Inf");
    out_printf(o, "%s_bucket{le=\"%s\"} %llu\n", d->name, le,
               (unsigned long long)cum);
  }
  bits = atomic_load_explicit(&hs->sum_bits, memory_order_relaxed);
  memcpy(&sum, &bits, sizeof sum);
  fmt_float(num, sizeof num, sum);
  out_printf(o, "%s_sum %s\n", d->name, num);
  out_printf(o, "%s_count %llu\n", d->name, (unsigned long long)cum);
}

/* Render everything; returns the full length (snprintf semantics), writing
 * what fits into buf. */
static size_t render_all(wk_metrics *m, char *buf, size_t len)
{
  out o = {buf, len, 0};
  char num[32];

  if (len > 0)
    buf[0] = '\0';
  render_help_type(&o, "onceq_worker_info",
                   "Build information about this worker.", "gauge");
  out_printf(&o, "onceq_worker_info{version=\"");
  render_label_value(&o, oq_version());
  out_printf(&o, "\"} 1\n");

  render_help_type(&o, "process_start_time_seconds",
                   "Start time of the process since unix epoch in seconds.",
                   "gauge");
  fmt_float(num, sizeof num, m->start_time_s);
  out_printf(&o, "process_start_time_seconds %s\n", num);

  for (int c = 0; c < WK_C__COUNT; c++) {
    render_help_type(&o, counter_defs[c].name, counter_defs[c].help, "counter");
    out_printf(&o, "%s %llu\n", counter_defs[c].name,
               (unsigned long long)atomic_load_explicit(&m->counters[c],
                                                        memory_order_relaxed));
  }

  render_help_type(&o, "onceq_worker_inflight",
                   "Items whose handler is running now.", "gauge");
  out_printf(
      &o, "onceq_worker_inflight %lld\n",
      (long long)atomic_load_explicit(&m->inflight, memory_order_relaxed));
  render_help_type(&o, "onceq_worker_healthy",
                   "1 while the worker is healthy (session alive, not "
                   "fenced), else 0.",
                   "gauge");
  out_printf(&o, "onceq_worker_healthy %d\n",
             atomic_load_explicit(&m->healthy, memory_order_relaxed) ? 1 : 0);

  for (int h = 0; h < WK_H__COUNT; h++)
    render_hist(&o, &hist_defs[h], &m->hists[h]);
  return o.need;
}

/* When the text does not fit, it is cut after the last whole line that
 * does, so a reader never sees half a sample. */
size_t wk_metrics_render(wk_metrics *m, char *buf, size_t len)
{
  size_t need, end;

  if (!buf || len == 0)
    return 0;
  buf[0] = '\0';
  if (!m)
    return 0;
  need = render_all(m, buf, len);
  if (need < len)
    return need;
  end = len - 1; /* vsnprintf kept buf[0..len-2] and a NUL */
  while (end > 0 && buf[end - 1] != '\n')
    end--;
  buf[end] = '\0';
  return end;
}

/* ---- HTTP server ------------------------------------------------------- */

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

static MHD_RESULT reply_metrics(wk_metrics *m, struct MHD_Connection *conn)
{
  struct MHD_Response *r;
  MHD_RESULT ret;
  size_t cap = 8192, need;
  char *text = NULL;

  /* Render with snprintf semantics; grow until a whole copy fits (values
   * may gain digits between two renders). */
  for (;;) {
    char *nt = realloc(text, cap);

    if (!nt) {
      free(text);
      return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                          "out of memory\n", NULL);
    }
    text = nt;
    need = render_all(m, text, cap);
    if (need < cap)
      break;
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

/* libmicrohttpd calls this on its own thread for every request (first with
 * the headers, then again for each piece of a body). We answer on the first
 * call; a body, if any, is never read. */
static MHD_RESULT on_request(void *cls, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls)
{
  wk_metrics *m = cls;
  bool is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0;

  if (!known)
    return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
  if (!is_get)
    return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                        "method not allowed\n", "GET, HEAD");
  if (strcmp(url, "/metrics") == 0)
    return reply_metrics(m, conn);
  if (atomic_load_explicit(&m->healthy, memory_order_relaxed))
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

/* A parsed --metrics-addr: the socket address, and "HOST:PORT" as we
 * print it in messages. */
typedef struct listen_addr {
  struct sockaddr_storage ss;
  socklen_t sslen;
  char shown[80];
} listen_addr;

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

/* Parse "PORT", ":PORT", "HOST:PORT" (HOST: IPv4 or localhost) or
 * "[IPv6]:PORT". Numeric hosts only (plus localhost), so start-up never
 * waits on DNS. */
static int parse_addr(const char *addr, listen_addr *la, char *err,
                      size_t errlen)
{
  char host[64];
  const char *port_s, *colon;
  unsigned port;
  size_t hlen;
  bool v6 = false;

  memset(la, 0, sizeof *la);
  if (!addr || !*addr) {
    snprintf(err, errlen,
             "bad --metrics-addr '': expected HOST:PORT "
             "(e.g. 127.0.0.1:9090)");
    return -1;
  }
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');

    if (!close || close[1] != ':') {
      snprintf(err, errlen, "bad --metrics-addr '%.100s': expected [IPv6]:PORT",
               addr);
      return -1;
    }
    hlen = (size_t)(close - addr - 1);
    if (hlen == 0 || hlen >= sizeof host) {
      snprintf(err, errlen, "bad --metrics-addr '%.100s': expected [IPv6]:PORT",
               addr);
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
        snprintf(err, errlen,
                 "bad --metrics-addr '%.100s': expected HOST:PORT "
                 "(e.g. 127.0.0.1:9090)",
                 addr);
        return -1;
      }
    } else {
      if (memchr(addr, ':', (size_t)(colon - addr))) {
        snprintf(err, errlen,
                 "bad --metrics-addr '%.100s': expected HOST:PORT; "
                 "write IPv6 hosts in brackets, e.g. [::1]:9090",
                 addr);
        return -1;
      }
      hlen = (size_t)(colon - addr);
      if (hlen >= sizeof host) {
        snprintf(err, errlen,
                 "bad --metrics-addr '%.100s': expected HOST:PORT "
                 "with HOST an IPv4 address, [IPv6] or localhost",
                 addr);
        return -1;
      }
      memcpy(host, addr, hlen);
      host[hlen] = '\0';
      port_s = colon + 1;
    }
  }
  if (parse_port(port_s, &port) != 0) {
    snprintf(err, errlen,
             "bad --metrics-addr '%.100s': expected HOST:PORT with PORT "
             "0-65535",
             addr);
    return -1;
  }

  if (v6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&la->ss;

    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) {
      snprintf(err, errlen,
               "bad --metrics-addr '%.100s': expected [IPv6]:PORT; '%s' "
               "is not an IPv6 address",
               addr, host);
      return -1;
    }
    la->sslen = sizeof *s6;
    snprintf(la->shown, sizeof la->shown, "[%s]:%u", host, port);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&la->ss;

    if (host[0] == '\0' || strcmp(host, "localhost") == 0)
      snprintf(host, sizeof host, "127.0.0.1");
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
      snprintf(err, errlen,
               "bad --metrics-addr '%.100s': expected HOST:PORT with HOST "
               "an IPv4 address, [IPv6] or localhost",
               addr);
      return -1;
    }
    la->sslen = sizeof *s4;
    snprintf(la->shown, sizeof la->shown, "%s:%u", host, port);
  }
  return 0;
}

/* We bind and listen ourselves (rather than MHD_OPTION_SOCK_ADDR) so a
 * failure carries its errno, and the message can say exactly what to fix. */
int wk_metrics_serve(wk_metrics *m, const char *addr, int *bound_port,
                     char *err, size_t errlen)
{
  listen_addr la;
  struct sockaddr_storage got;
  socklen_t gotlen = sizeof got;
  char why[128];
  struct stat st;
  int fd = -1, keep = -1, one = 1, flags, port;

  if (err && errlen)
    err[0] = '\0';
  if (!err || errlen == 0) {
    /* Keep going: the caller just gets no text. */
    static _Thread_local char scratch[8];

    err = scratch;
    errlen = sizeof scratch;
  }
  if (!m) {
    snprintf(err, errlen, "metrics not initialised");
    return -1;
  }
  if (m->daemon) {
    snprintf(err, errlen, "the metrics server is already running");
    return -1;
  }
  if (parse_addr(addr, &la, err, errlen) != 0)
    return -1;

  fd = socket(la.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    goto sys_fail;
  /* SO_REUSEADDR only skips TIME_WAIT after a restart; Linux still refuses
   * a port another socket is listening on. */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (la.ss.ss_family == AF_INET6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&la.ss, la.sslen) != 0)
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
  m->daemon = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
      on_request, m, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
      MHD_OPTION_END);
  if (!m->daemon) {
    struct stat now;

    if (fstat(fd, &now) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino)
      close(fd); /* still ours: MHD failed before taking it */
    close(keep);
    snprintf(err, errlen,
             "cannot start the metrics server on %s (libmicrohttpd "
             "failed; see the log); choose another --metrics-addr",
             la.shown);
    return -1;
  }
  close(keep); /* the daemon owns fd from here */
  if (got.ss_family == AF_INET6)
    port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
  else
    port = ntohs(((struct sockaddr_in *)&got)->sin_port);
  if (bound_port)
    *bound_port = port;
  OQ_LOG(OQ_LOG_INFO, "", "",
         "metrics: serving /metrics and /healthz on %s (port %d)", la.shown,
         port);
  return 0;

sys_fail:
  if (strerror_r(errno, why, sizeof why) != 0)
    snprintf(why, sizeof why, "error %d", errno);
  snprintf(err, errlen,
           "cannot listen on %s: %s; choose another "
           "--metrics-addr",
           la.shown, why);
  if (keep >= 0)
    close(keep);
  if (fd >= 0)
    close(fd);
  return -1;
}
