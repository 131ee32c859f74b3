/*
 * http_handler.c: the --http handler against a scripted HTTP server that
 * runs inside this process (libmicrohttpd on 127.0.0.1, ephemeral port).
 * No database.
 *
 * The server records every request (method, path, the onceq headers, the
 * body, the client port) and answers by path:
 *   /echo      200 "<Idempotency-Key>|<Onceq-Attempt>|<Onceq-Queue>|<body>"
 *   /ok        200 "fine"            /204     204, no body
 *   /429       429, Retry-After: 2   /500date 500, Retry-After: now + 3 s
 *   /503       503, no Retry-After   /503bad  503, Retry-After: soon
 *   /404       404 (with a Retry-After that must be ignored)
 *   /302       302 to a URL with credentials
 *   /slow      200 after 2 s         /big     200, 14 KB body
 *   /binary    200, a body with a NUL and an invalid UTF-8 byte
 *   /500long   500, a body that fills the error to a cut character
 *
 * getaddrinfo is wrapped (below; the test is linked with ENABLE_EXPORTS so
 * that the dlopen'ed libcurl finds this one): the name SLOW_HOST takes
 * SLOW_DNS_MS to fail, like a resolver that gets no answer.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "handler_http.h"
#include "oq_test.h"

#define MAXLOG 32                  /* requests kept in the log */
#define MAX_BODY (4 * 1024 * 1024) /* request bytes the server keeps */
#define SLOW_MS 2000               /* how long /slow takes */
#define NTHREADS 4
#define NREQ_PER_THREAD 50

/* ---- the test server --------------------------------------------------- */

typedef struct req_rec {
  char method[16];
  char path[64];
  char idem[64];
  char attempt[16];
  char queue[64];
  char ctype[64];
  char ua[64];
  bool has_expect;
  char *body; /* owned; body_len bytes plus a NUL */
  size_t body_len;
  int client_port;
} req_rec;

typedef struct conn_state {
  char *body;
  size_t len;
  size_t cap;
} conn_state;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static req_rec g_log[MAXLOG]; /* under g_mu */
static int g_nlog;            /* under g_mu: entries in g_log */
static int g_total;           /* under g_mu: all requests seen */
static atomic_bool g_stopping;
static struct MHD_Daemon *g_daemon;
static int g_port;

static long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void hdr(struct MHD_Connection *c, const char *name, char *dst,
                size_t cap)
{
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  oqt_copy(dst, cap, v ? v : "(none)");
}

static void record(struct MHD_Connection *c, const char *url,
                   const char *method, const conn_state *st)
{
  req_rec rec;
  memset(&rec, 0, sizeof rec);
  oqt_copy(rec.method, sizeof rec.method, method);
  oqt_copy(rec.path, sizeof rec.path, url);
  hdr(c, "Idempotency-Key", rec.idem, sizeof rec.idem);
  hdr(c, "Onceq-Attempt", rec.attempt, sizeof rec.attempt);
  hdr(c, "Onceq-Queue", rec.queue, sizeof rec.queue);
  hdr(c, "Content-Type", rec.ctype, sizeof rec.ctype);
  hdr(c, "User-Agent", rec.ua, sizeof rec.ua);
  rec.has_expect =
      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect") != NULL;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
    rec.client_port =
        ntohs(((const struct sockaddr_in *)ci->client_addr)->sin_port);

  pthread_mutex_lock(&g_mu);
  g_total++;
  if (g_nlog < MAXLOG) {
    rec.body = malloc(st->len + 1);
    if (rec.body) {
      if (st->len)
        memcpy(rec.body, st->body, st->len);
      rec.body[st->len] = '\0';
      rec.body_len = st->len;
    }
    g_log[g_nlog++] = rec;
  }
  pthread_mutex_unlock(&g_mu);
}

static void log_reset(void)
{
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_nlog; i++)
    free(g_log[i].body);
  memset(g_log, 0, sizeof g_log);
  g_nlog = 0;
  pthread_mutex_unlock(&g_mu);
}

static int log_count(void)
{
  pthread_mutex_lock(&g_mu);
  int n = g_nlog;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static int total_count(void)
{
  pthread_mutex_lock(&g_mu);
  int n = g_total;
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* A copy of log entry i (its body stays owned by the log). */
static req_rec log_get(int i)
{
  pthread_mutex_lock(&g_mu);
  if (i >= g_nlog) {
    pthread_mutex_unlock(&g_mu);
    OQT_FAIL("log entry %d missing: only %d requests logged", i, g_nlog);
  }
  req_rec r = g_log[i];
  pthread_mutex_unlock(&g_mu);
  return r;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *body, size_t len, const char *hname,
                             const char *hvalue)
{
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!resp)
    return MHD_NO;
  if (hname)
    MHD_add_response_header(resp, hname, hvalue);
  enum MHD_Result ret = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result reply_str(struct MHD_Connection *c, unsigned status,
                                 const char *body, const char *hname,
                                 const char *hvalue)
{
  return reply(c, status, body, strlen(body), hname, hvalue);
}

static enum MHD_Result respond(struct MHD_Connection *c, const char *url,
                               const conn_state *st)
{
  if (strcmp(url, "/echo") == 0) {
    char idem[64], attempt[16], queue[64];
    hdr(c, "Idempotency-Key", idem, sizeof idem);
    hdr(c, "Onceq-Attempt", attempt, sizeof attempt);
    hdr(c, "Onceq-Queue", queue, sizeof queue);
    size_t cap = st->len + 256;
    char *out = malloc(cap);
    if (!out)
      return MHD_NO;
    int n = snprintf(out, cap, "%s|%s|%s|", idem, attempt, queue);
    if (n < 0 || (size_t)n >= cap) {
      free(out);
      return MHD_NO;
    }
    if (st->len)
      memcpy(out + n, st->body, st->len);
    enum MHD_Result ret = reply(c, 200, out, (size_t)n + st->len, NULL, NULL);
    free(out);
    return ret;
  }
  if (strcmp(url, "/ok") == 0)
    return reply_str(c, 200, "fine", NULL, NULL);
  if (strcmp(url, "/204") == 0)
    return reply_str(c, 204, "", NULL, NULL);
  if (strcmp(url, "/429") == 0)
    return reply_str(c, 429, "slow down\n", "Retry-After", "2");
  if (strcmp(url, "/500date") == 0) {
    time_t later = time(NULL) + 3;
    struct tm tm;
    char date[64];
    gmtime_r(&later, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return reply_str(c, 500, "boom", "Retry-After", date);
  }
  if (strcmp(url, "/503") == 0)
    return reply_str(c, 503, "unavailable\n", NULL, NULL);
  if (strcmp(url, "/503bad") == 0)
    return reply_str(c, 503, "", "Retry-After", "soon");
  if (strcmp(url, "/404") == 0)
    return reply_str(c, 404, "no such hook", "Retry-After", "5");
  if (strcmp(url, "/302") == 0)
    return reply_str(c, 302, "moved", "Location",
                     "http://u:locsecret@127.0.0.1:1/elsewhere");
  if (strcmp(url, "/slow") == 0) {
    long until = now_ms() + SLOW_MS;
    while (now_ms() < until && !atomic_load(&g_stopping))
      usleep(20 * 1000);
    return reply_str(c, 200, "late", NULL, NULL);
  }
  if (strcmp(url, "/big") == 0) {
    /* 4095 'a', then "é" straddling the 4096-byte head, then 10000 'b' */
    size_t len = 4095 + 2 + 10000;
    char *big = malloc(len);
    if (!big)
      return MHD_NO;
    memset(big, 'a', 4095);
    big[4095] = (char)0xC3;
    big[4096] = (char)0xA9;
    memset(big + 4097, 'b', 10000);
    enum MHD_Result ret = reply(c, 200, big, len, NULL, NULL);
    free(big);
    return ret;
  }
  if (strcmp(url, "/500long") == 0) {
    /* "HTTP 500: " + 4085 'x' fills 4095 bytes of the error; the "é" after
     * them fits only half */
    char body[4085 + 2 + 100];
    memset(body, 'x', sizeof body);
    body[4085] = (char)0xC3;
    body[4086] = (char)0xA9;
    return reply(c, 500, body, sizeof body, NULL, NULL);
  }
  if (strcmp(url, "/binary") == 0)
    return reply(c, 200, "a\0b\377c", 5, NULL, NULL);
  return reply_str(c, 400, "unknown test path", NULL, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
  conn_state *st = *con_cls;
  if (!st) { /* headers only: set up this request's state */
    st = calloc(1, sizeof *st);
    if (!st)
      return MHD_NO;
    *con_cls = st;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    if (st->len + n > MAX_BODY)
      return MHD_NO;
    if (st->len + n > st->cap) {
      size_t cap = (st->len + n) * 2;
      char *b = realloc(st->body, cap);
      if (!b)
        return MHD_NO;
      st->body = b;
      st->cap = cap;
    }
    memcpy(st->body + st->len, upload, n);
    st->len += n;
    *upload_size = 0;
    return MHD_YES;
  }
  record(c, url, method, st);
  return respond(c, url, st);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  conn_state *st = *con_cls;
  if (st) {
    free(st->body);
    free(st);
    *con_cls = NULL;
  }
}

static void server_start(void)
{
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  g_daemon = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
      NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
  ASSERT(g_daemon != NULL);
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(g_daemon, MHD_DAEMON_INFO_BIND_PORT);
  ASSERT(info != NULL);
  g_port = info->port;
  ASSERT(g_port > 0);
}

static void server_stop(void)
{
  atomic_store(&g_stopping, true);
  MHD_stop_daemon(g_daemon);
  g_daemon = NULL;
  log_reset();
}

/* ---- a slow resolver ---------------------------------------------------- */

#define SLOW_HOST "slow-dns.onceq-test"
#define SLOW_DNS_MS 3000
static atomic_int g_slow_lookups_done;

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
  if (node && strcmp(node, SLOW_HOST) == 0) {
    oqt_sleep_ms(SLOW_DNS_MS);
    atomic_fetch_add(&g_slow_lookups_done, 1);
    return EAI_AGAIN;
  }
  static _Atomic(void *) real;
  void *fn = atomic_load(&real);
  if (!fn) {
    fn = dlsym(RTLD_NEXT, "getaddrinfo");
    atomic_store(&real, fn);
  }
  if (!fn)
    return EAI_SYSTEM;
  return ((int (*)(const char *, const char *, const struct addrinfo *,
                   struct addrinfo **))fn)(node, service, hints, res);
}

/* ---- client helpers ---------------------------------------------------- */

static wk_http *client(const char *path, int timeout_ms)
{
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g_port, path);
  wk_http_cfg cfg = {.url = url, .timeout_ms = timeout_ms};
  wk_http *h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  return h;
}

/* Run one item through h. */
static void post(wk_http *h, const char *id, const char *queue, int attempt,
                 const char *payload, wk_cancel_fn fn, void *ctx, wk_result *r)
{
  oq_item item;
  char qbuf[128];
  memset(&item, 0, sizeof item);
  oqt_copy(item.id, sizeof item.id, id);
  oqt_copy(qbuf, sizeof qbuf, queue);
  item.queue = qbuf;
  item.payload = (char *)payload;
  item.attempt = attempt;
  item.max_attempts = 5;
  wk_task t = {.item = &item,
               .session_id = "s-test",
               .cancelled = fn,
               .cancel_ctx = ctx};
  wk_http_run(h, &t, r);
}

#define ID1 "0b9f1c2e-5a47-4d3b-9a8e-1f2d3c4b5a61"

/* One request to path; the whole result back. */
static void post_path(const char *path, int timeout_ms, wk_result *r)
{
  wk_http *h = client(path, timeout_ms);
  post(h, ID1, "emails", 1, "{}", NULL, NULL, r);
  wk_http_free(h);
}

typedef struct cancel_ctx {
  long start_ms;
  long fire_after_ms; /* < 0: never */
  int calls;
  long last_ms;
  long max_gap_ms; /* longest time between two calls */
} cancel_ctx;

static bool cancel_check(void *p)
{
  cancel_ctx *c = p;
  long now = now_ms();
  long gap = now - c->last_ms;
  if (gap > c->max_gap_ms)
    c->max_gap_ms = gap;
  c->last_ms = now;
  c->calls++;
  return c->fire_after_ms >= 0 && now - c->start_ms >= c->fire_after_ms;
}

static void cancel_ctx_init(cancel_ctx *c, long fire_after_ms)
{
  memset(c, 0, sizeof *c);
  c->start_ms = now_ms();
  c->last_ms = c->start_ms;
  c->fire_after_ms = fire_after_ms;
}

/* ---- tests ------------------------------------------------------------- */

/* Headers and body arrive exactly; 2xx is success with the body as
 * output; the connection is kept alive between two items. */
static void test_success_and_headers(void)
{
  const char *payload =
      "{\"to\":\"a@example.com\",\"text\":\"h\\u00e9 \\\"q\\\" \xc3\xa9\"}";
  char want_ua[64];
  wk_result r;
  snprintf(want_ua, sizeof want_ua, "onceq-worker/%s", oq_version());

  log_reset();
  wk_http *h = client("/echo", 0);
  post(h, ID1, "emails", 3, payload, NULL, NULL, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_EQ(r.retry_after_ms, -1);
  char want[512];
  snprintf(want, sizeof want, "%s|3|emails|%s", ID1, payload);
  ASSERT_STREQ(r.output, want);
  ASSERT_STREQ(r.error, "");

  ASSERT_EQ(log_count(), 1);
  req_rec q = log_get(0);
  ASSERT_STREQ(q.method, "POST");
  ASSERT_STREQ(q.path, "/echo");
  ASSERT_STREQ(q.idem, ID1);
  ASSERT_STREQ(q.attempt, "3");
  ASSERT_STREQ(q.queue, "emails");
  ASSERT_STREQ(q.ctype, "application/json");
  ASSERT_STREQ(q.ua, want_ua);
  ASSERT(!q.has_expect);
  ASSERT_EQ(q.body_len, strlen(payload));
  ASSERT_STREQ(q.body, payload);

  /* The same handle again: a different item, the same connection. */
  post(h, "11111111-2222-4333-8444-555555555555", "other", 1, "[1,2]", NULL,
       NULL, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_STREQ(r.output, "11111111-2222-4333-8444-555555555555|1|other|[1,2]");
  ASSERT_EQ(log_count(), 2);
  req_rec q2 = log_get(1);
  ASSERT_STREQ(q2.idem, "11111111-2222-4333-8444-555555555555");
  ASSERT_STREQ(q2.attempt, "1");
  ASSERT_STREQ(q2.queue, "other");
  ASSERT_STREQ(q2.body, "[1,2]");
  ASSERT_NE(q.client_port, 0);
  ASSERT_EQ(q2.client_port, q.client_port); /* keep-alive */

  /* A large payload (no Expect: 100-continue, which curl adds past 1 MB)
   * arrives whole; the output keeps only the head of the echo. */
  size_t big_len = 1536 * 1024; /* past curl's Expect threshold */
  char *big = malloc(big_len + 1);
  ASSERT(big != NULL);
  big[0] = '"';
  for (size_t i = 1; i + 1 < big_len; i++)
    big[i] = (char)('a' + (i - 1) % 26);
  big[big_len - 1] = '"';
  big[big_len] = '\0';
  post(h, ID1, "emails", 2, big, NULL, NULL, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_EQ(strlen(r.output), WK_TAIL_MAX);
  ASSERT_EQ(memcmp(r.output, ID1 "|2|emails|\"abc", strlen(ID1) + 14), 0);
  ASSERT_EQ(log_count(), 3);
  req_rec q3 = log_get(2);
  ASSERT_EQ(q3.body_len, big_len);
  ASSERT(memcmp(q3.body, big, big_len) == 0);
  ASSERT(!q3.has_expect);
  free(big);
  wk_http_free(h);

  /* 204: success, empty output */
  post_path("/204", 0, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_STREQ(r.output, "");
}

/* The kept body is the head, cut on a character boundary, and clean text
 * (what a PostgreSQL text column accepts). */
static void test_body_limits(void)
{
  wk_result r;
  post_path("/big", 0, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_EQ(strlen(r.output), 4095); /* the cut "é" is dropped */
  ASSERT_EQ(strspn(r.output, "a"), 4095);

  post_path("/binary", 0, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_STREQ(r.output, "a?b?c");

  post_path("/500long", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(strlen(r.error), 4095); /* the cut "é" is dropped */
  ASSERT_EQ(memcmp(r.error, "HTTP 500: xxx", 13), 0);
  ASSERT_EQ(strspn(r.error + 10, "x"), 4085);
}

static void test_http_failures(void)
{
  wk_result r;
  long t0;

  log_reset();
  post_path("/429", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, 2000);
  ASSERT_STREQ(r.error, "HTTP 429: slow down");
  ASSERT_STREQ(r.output, "");
  ASSERT_EQ(log_count(), 1);

  post_path("/500date", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  /* now + 3 s at whole-second precision, read a moment later */
  ASSERT_LE(1000, r.retry_after_ms);
  ASSERT_LE(r.retry_after_ms, 4000);
  ASSERT_STREQ(r.error, "HTTP 500: boom");

  post_path("/503", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_STREQ(r.error, "HTTP 503: unavailable");

  post_path("/503bad", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_STREQ(r.error, "HTTP 503");

  post_path("/404", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1); /* only 429 and 5xx honour it */
  ASSERT_STREQ(r.error, "HTTP 404: no such hook");

  /* Redirects are not followed: one request, credentials masked. */
  log_reset();
  post_path("/302", 0, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_CONTAINS(r.error, "HTTP 302");
  ASSERT_CONTAINS(r.error, "not followed");
  ASSERT_CONTAINS(r.error, "http://u:***@127.0.0.1:1/elsewhere");
  ASSERT_NOT_CONTAINS(r.error, "locsecret");
  ASSERT_CONTAINS(r.error, ": moved");
  oqt_sleep_ms(100);
  ASSERT_EQ(log_count(), 1);

  /* A total timeout is a transport failure. */
  t0 = now_ms();
  post_path("/slow", 500, &r);
  long took = now_ms() - t0;
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_CONTAINS(r.error, "timed out");
  ASSERT_CONTAINS(r.error, "POST http://127.0.0.1:");
  ASSERT_LE(400, took);
  ASSERT_LE(took, 1500);
}

static void test_transport_failures(void)
{
  wk_result r;
  /* A port that is bound but not listening: connection refused, and no
   * other process can take it meanwhile. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(fd >= 0);
  struct sockaddr_in addr;
  socklen_t alen = sizeof addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ASSERT_EQ(getsockname(fd, (struct sockaddr *)&addr, &alen), 0);
  int closed_port = ntohs(addr.sin_port);

  char url[256];
  snprintf(url, sizeof url, "http://hookuser:s3cret@127.0.0.1:%d/hook",
           closed_port);
  wk_http_cfg cfg = {.url = url, .connect_timeout_ms = 2000};
  wk_http *h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  oq_item item;
  memset(&item, 0, sizeof item);
  oqt_copy(item.id, sizeof item.id, ID1);
  item.queue = "q";
  item.payload = "{}";
  item.attempt = 1;
  wk_task t = {.item = &item};
  wk_http_run(h, &t, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_CONTAINS(r.error, "Connection refused");
  ASSERT_CONTAINS(r.error, "hookuser:***@127.0.0.1");
  ASSERT_NOT_CONTAINS(r.error, "s3cret");
  wk_http_free(h);

  /* A userinfo without a password is masked whole (often a token). */
  snprintf(url, sizeof url, "http://tok3n@127.0.0.1:%d/hook", closed_port);
  h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  wk_http_run(h, &t, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_CONTAINS(r.error, "http://***@127.0.0.1");
  ASSERT_NOT_CONTAINS(r.error, "tok3n");
  wk_http_free(h);
  close(fd);

  /* https against a plain-HTTP server: a TLS failure, not a crash. */
  snprintf(url, sizeof url, "https://127.0.0.1:%d/ok", g_port);
  h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  wk_http_run(h, &t, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_CONTAINS(r.error, "POST https://127.0.0.1:");
  wk_http_free(h);

  /* Only http and https. */
  cfg.url = "file:///etc/passwd";
  h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  wk_http_run(h, &t, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_CONTAINS(r.error, "POST file:///etc/passwd: ");
  ASSERT_STREQ(r.output, "");
  wk_http_free(h);

  /* No URL at all. */
  cfg.url = NULL;
  h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  wk_http_run(h, &t, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT(r.error[0] != '\0');
  wk_http_free(h);
  wk_http_free(NULL);
}

/* A queue name that would split the header is never sent. */
static void test_header_injection(void)
{
  wk_result r;
  log_reset();
  wk_http *h = client("/echo", 0);
  post(h, ID1, "q\r\nX-Evil: 1", 1, "{}", NULL, NULL, &r);
  ASSERT_EQ(r.outcome, WK_FAILED);
  ASSERT_CONTAINS(r.error, "control characters");
  wk_http_free(h);
  oqt_sleep_ms(50);
  ASSERT_EQ(log_count(), 0);
}

static void test_cancel(void)
{
  wk_result r;
  cancel_ctx cc;

  /* Cancelled before the request: nothing is sent. */
  log_reset();
  cancel_ctx_init(&cc, 0);
  wk_http *h = client("/ok", 0);
  post(h, ID1, "q", 1, "{}", cancel_check, &cc, &r);
  ASSERT_EQ(r.outcome, WK_ABANDONED);
  oqt_sleep_ms(50);
  ASSERT_EQ(log_count(), 0);
  wk_http_free(h);

  /* Cancelled while the server is slow: abandoned well before the 2 s
   * response, with the check polled at least every ~100 ms. */
  h = client("/slow", 30000);
  cancel_ctx_init(&cc, 400);
  long t0 = now_ms();
  post(h, ID1, "q", 1, "{}", cancel_check, &cc, &r);
  long took = now_ms() - t0;
  ASSERT_EQ(r.outcome, WK_ABANDONED);
  ASSERT_EQ(r.retry_after_ms, -1);
  ASSERT_LE(400, took);
  ASSERT_LE(took, 1700); /* before the server's 2 s answer */
  ASSERT_LE(4, cc.calls);
  /* polled every ~100 ms; slack for a loaded or sanitizer-built run (libcurl's
   * 1 s default progress interval, the regression, still fails) */
  ASSERT_LE(cc.max_gap_ms, 700);
  ASSERT_EQ(log_count(), 1); /* the request was sent */

  /* The same handle still works after an aborted transfer. */
  wk_http_free(h);
  h = client("/ok", 0);
  cancel_ctx_init(&cc, -1);
  post(h, ID1, "q", 1, "{}", cancel_check, &cc, &r);
  ASSERT_EQ(r.outcome, WK_OK);
  ASSERT_STREQ(r.output, "fine");
  ASSERT_LE(1, cc.calls);
  wk_http_free(h);
}

/* Cancelled while the name is still being resolved: abandoned within the
 * cancel check's period, not when the lookup ends (libcurl's threaded
 * resolver: removing the transfer joined the lookup's thread). */
static void test_cancel_during_dns(void)
{
  char url[128];
  snprintf(url, sizeof url, "http://%s:%d/ok", SLOW_HOST, g_port);
  wk_http_cfg cfg = {.url = url, .timeout_ms = 30000};
  wk_http *h = wk_http_new(&cfg);
  ASSERT(h != NULL);
  wk_result r;
  cancel_ctx cc;
  cancel_ctx_init(&cc, 300);
  long t0 = now_ms();
  post(h, ID1, "q", 1, "{}", cancel_check, &cc, &r);
  long took = now_ms() - t0;
  ASSERT_EQ(r.outcome, WK_ABANDONED);
  ASSERT_LE(300, took);
  ASSERT_LE(took, 1500); /* the lookup takes SLOW_DNS_MS (3 s) */
  wk_http_free(h);
  /* The lookup's thread ends by itself; wait for it, so that nothing of
   * it is left when the test exits (leak checks, TSan). */
  for (int i = 0; i < SLOW_DNS_MS / 10 + 300; i++) {
    if (atomic_load(&g_slow_lookups_done) == 1)
      break;
    oqt_sleep_ms(10);
  }
  ASSERT_EQ(atomic_load(&g_slow_lookups_done), 1);
  oqt_sleep_ms(100); /* its clean-up after getaddrinfo returned */
}

typedef struct worker_arg {
  int n;         /* thread number */
  int ok;        /* requests that came back right */
  char err[512]; /* the first thing that went wrong */
} worker_arg;

static void *worker(void *p)
{
  worker_arg *a = p;
  wk_http *h = client("/echo", 10000);
  if (!h) {
    snprintf(a->err, sizeof a->err, "wk_http_new failed");
    return NULL;
  }
  for (int i = 0; i < NREQ_PER_THREAD; i++) {
    char id[40], queue[16], payload[64], want[256];
    wk_result r;
    snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", a->n * 1000 + i);
    snprintf(queue, sizeof queue, "q%d", a->n);
    snprintf(payload, sizeof payload, "{\"t\":%d,\"i\":%d}", a->n, i);
    snprintf(want, sizeof want, "%s|%d|%s|%s", id, i + 1, queue, payload);
    post(h, id, queue, i + 1, payload, NULL, NULL, &r);
    if (r.outcome == WK_OK && strcmp(r.output, want) == 0) {
      a->ok++;
    } else if (!a->err[0]) {
      snprintf(a->err, sizeof a->err,
               "thread %d request %d: outcome %d output \"%.100s\" "
               "error \"%.100s\", want \"%.100s\"",
               a->n, i, (int)r.outcome, r.output, r.error, want);
    }
  }
  wk_http_free(h);
  return NULL;
}

static void test_threads(void)
{
  pthread_t th[NTHREADS];
  worker_arg args[NTHREADS];
  int before = total_count();
  memset(args, 0, sizeof args);
  for (int i = 0; i < NTHREADS; i++) {
    args[i].n = i;
    ASSERT_EQ(pthread_create(&th[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++)
    ASSERT_EQ(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < NTHREADS; i++) {
    if (args[i].err[0])
      OQT_FAIL("%s", args[i].err);
    ASSERT_EQ(args[i].ok, NREQ_PER_THREAD);
  }
  ASSERT_EQ(total_count() - before, NTHREADS * NREQ_PER_THREAD);
}

int main(void)
{
  /* Only 127.0.0.1: no proxy from the environment. */
  unsetenv("http_proxy");
  unsetenv("HTTP_PROXY");
  unsetenv("https_proxy");
  unsetenv("HTTPS_PROXY");
  unsetenv("all_proxy");
  unsetenv("ALL_PROXY");
  ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
  server_start();

  test_success_and_headers();
  test_body_limits();
  test_http_failures();
  test_transport_failures();
  test_header_injection();
  test_cancel();
  test_cancel_during_dns();
  test_threads();

  server_stop();
  curl_global_cleanup();
  printf("ok\n");
  return 0;
}
