/*
 * metrics.c (test): the worker's metrics module. Rendering is checked line
 * by line for known inputs and against the text exposition format 0.0.4;
 * the HTTP server is exercised with libcurl on 127.0.0.1; counters and
 * histograms are hammered from 8 threads while others render and scrape.
 * No database.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "metrics.h"
#include "oq_test.h"

#define BIG 65536

/* ---- helpers ----------------------------------------------------------- */

static void render(wk_metrics *m, char *buf, size_t len)
{
  size_t n = wk_metrics_render(m, buf, len);

  ASSERT(n < len);
  ASSERT_EQ(strlen(buf), n);
  ASSERT(buf[n - 1] == '\n'); /* not truncated: ends with a whole line */
}

/* Does text hold exactly this line? */
static bool has_line(const char *text, const char *line)
{
  size_t n = strlen(line);

  for (const char *p = text; (p = strstr(p, line)) != NULL; p++) {
    if ((p == text || p[-1] == '\n') && p[n] == '\n')
      return true;
  }
  return false;
}

#define ASSERT_LINE(text, line)                                                \
  do {                                                                         \
    if (!has_line((text), (line)))                                             \
      OQT_FAIL("line \"%s\" missing from:\n%s", (line), (text));               \
  } while (0)

/* The value of the first sample whose "name{labels}" is exactly key;
 * fails the test when absent. */
static double sample(const char *text, const char *key)
{
  size_t n = strlen(key);

  for (const char *p = text; (p = strstr(p, key)) != NULL; p++) {
    if ((p == text || p[-1] == '\n') && p[n] == ' ')
      return strtod(p + n + 1, NULL);
  }
  OQT_FAIL("sample %s missing from:\n%s", key, text);
  return 0;
}

static bool valid_name(const char *s, size_t n)
{
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
  size_t k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/*
 * Check text against the text exposition format 0.0.4 as Prometheus parses
 * it: every line ends in \n; "# HELP name text" and "# TYPE name type"
 * come before the family's samples, at most once each; a family's samples
 * are contiguous; counters end in _total; histograms have cumulative
 * _bucket{le=...} series ending in +Inf, equal to _count, and a _sum.
 * Returns the number of families.
 */
static int check_exposition(const char *text)
{
  char family[128] = "", type[16] = "";
  char seen[64][128];
  int nseen = 0, nfam = 0;
  double last_bucket = -1, last_le = -INFINITY, inf_bucket = -1;
  bool have_sum = false;
  const char *p = text;

  ASSERT(*text != '\0');
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t len;
    char line[512];

    if (!eol)
      OQT_FAIL("last line not terminated: \"%s\"", p);
    len = (size_t)(eol - p);
    ASSERT(len > 0 && len < sizeof line);
    memcpy(line, p, len);
    line[len] = '\0';
    p = eol + 1;

    if (line[0] == '#') {
      char kw[8], name[128], rest[256];

      if (sscanf(line, "# %7s %127s %255[^\n]", kw, name, rest) != 3)
        OQT_FAIL("bad comment line \"%s\"", line);
      ASSERT(valid_name(name, strlen(name)));
      if (strcmp(name, family) != 0) {
        /* A new family starts: close the previous one. */
        if (strcmp(type, "histogram") == 0) {
          ASSERT(have_sum);
          ASSERT(inf_bucket >= 0);
        }
        for (int i = 0; i < nseen; i++) {
          if (strcmp(seen[i], name) == 0)
            OQT_FAIL("family %s appears twice", name);
        }
        ASSERT(nseen < 64);
        oqt_copy(seen[nseen++], sizeof seen[0], name);
        oqt_copy(family, sizeof family, name);
        type[0] = '\0';
        last_bucket = -1;
        last_le = -INFINITY;
        inf_bucket = -1;
        have_sum = false;
        nfam++;
      }
      if (strcmp(kw, "TYPE") == 0) {
        ASSERT(type[0] == '\0');
        if (strcmp(rest, "counter") && strcmp(rest, "gauge") &&
            strcmp(rest, "histogram"))
          OQT_FAIL("bad type in \"%s\"", line);
        oqt_copy(type, sizeof type, rest);
        if (strcmp(type, "counter") == 0)
          ASSERT(ends_with(name, strlen(name), "_total"));
      } else if (strcmp(kw, "HELP") != 0) {
        OQT_FAIL("bad comment keyword in \"%s\"", line);
      }
      continue;
    }

    /* A sample: name[{labels}] value */
    {
      size_t nlen = strcspn(line, "{ ");
      const char *after = line + nlen, *val;
      char *end;
      double v;
      char le[32] = "";

      ASSERT(valid_name(line, nlen));
      ASSERT(type[0] != '\0'); /* TYPE came first */
      if (*after == '{') {
        const char *close = strchr(after, '}');
        ASSERT(close != NULL);
        if (strncmp(after, "{le=\"", 5) == 0) {
          size_t k = (size_t)(close - after) - 6;
          ASSERT(k < sizeof le);
          memcpy(le, after + 5, k);
          le[k] = '\0';
          ASSERT(close[-1] == '"');
        }
        after = close + 1;
      }
      ASSERT(*after == ' ');
      val = after + 1;
      v = strtod(val, &end);
      if (end == val || *end != '\0')
        OQT_FAIL("bad value in \"%s\"", line);

      if (strcmp(type, "histogram") == 0) {
        size_t flen = strlen(family);
        ASSERT(nlen > flen && strncmp(line, family, flen) == 0);
        if (strcmp(line + flen, "_bucket") == 0 ||
            strncmp(line + flen, "_bucket{", 8) == 0) {
          double lev;
          ASSERT(le[0] != '\0');
          ASSERT(inf_bucket < 0); /* nothing after +Inf */
          lev = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
          ASSERT(lev > last_le);
          ASSERT(v >= last_bucket); /* cumulative */
          last_le = lev;
          last_bucket = v;
          if (isinf(lev))
            inf_bucket = v;
        } else if (strncmp(line + flen, "_sum ", 5) == 0) {
          ASSERT(v >= 0);
          have_sum = true;
        } else if (strncmp(line + flen, "_count ", 7) == 0) {
          ASSERT(inf_bucket >= 0);
          if (v != inf_bucket)
            OQT_FAIL("%s_count %.17g != +Inf bucket %.17g", family, v,
                     inf_bucket);
        } else {
          OQT_FAIL("unexpected histogram line \"%s\"", line);
        }
      } else {
        ASSERT(nlen == strlen(family) && strncmp(line, family, nlen) == 0);
      }
    }
  }
  if (strcmp(type, "histogram") == 0) {
    ASSERT(have_sum);
    ASSERT(inf_bucket >= 0);
  }
  return nfam;
}

/* ---- HTTP client ------------------------------------------------------- */

typedef struct body {
  char buf[BIG];
  size_t len;
} body;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
  body *b = ud;
  size_t n = size * nmemb;

  if (n > sizeof b->buf - 1 - b->len)
    return 0; /* abort: larger than any answer we expect */
  memcpy(b->buf + b->len, data, n);
  b->len += n;
  b->buf[b->len] = '\0';
  return n;
}

/* One request; returns the HTTP status, fills b and ctype (may be NULL). */
static long http(const char *method, const char *url, body *b, char *ctype,
                 size_t ctlen)
{
  CURL *c = curl_easy_init();
  CURLcode rc;
  long status = 0;
  char *ct = NULL;

  ASSERT(c != NULL);
  b->len = 0;
  b->buf[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
  if (strcmp(method, "POST") == 0)
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=1");
  else if (strcmp(method, "HEAD") == 0)
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  else if (strcmp(method, "GET") != 0)
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  rc = curl_easy_perform(c);
  if (rc != CURLE_OK)
    OQT_FAIL("%s %s: %s", method, url, curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (ctype) {
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    oqt_copy(ctype, ctlen, ct ? ct : "");
  }
  curl_easy_cleanup(c);
  return status;
}

static long get(int port, const char *path, body *b)
{
  char url[128];

  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  return http("GET", url, b, NULL, 0);
}

/* ---- tests ------------------------------------------------------------- */

static void test_render_fresh(void)
{
  wk_metrics *m = wk_metrics_new();
  char *text = malloc(BIG);
  double start, now = (double)time(NULL);

  ASSERT(m && text);
  render(m, text, BIG);
  ASSERT_EQ(check_exposition(text), 2 + WK_C__COUNT + 2 + WK_H__COUNT);
  ASSERT_LINE(text, "# HELP onceq_worker_info Build information about this "
                    "worker.");
  ASSERT_LINE(text, "# TYPE onceq_worker_info gauge");
  ASSERT_LINE(text, "onceq_worker_info{version=\"" ONCEQ_VERSION "\"} 1");
  ASSERT_LINE(text, "# TYPE process_start_time_seconds gauge");
  start = sample(text, "process_start_time_seconds");
  ASSERT(start > 1.5e9);
  ASSERT(start <= now + 2);
  ASSERT(start >= now - 3600); /* this test started within the hour */
  ASSERT_LINE(text, "# TYPE onceq_worker_claimed_total counter");
  ASSERT_LINE(text, "onceq_worker_claimed_total 0");
  ASSERT_LINE(text, "onceq_worker_sessions_total 0");
  ASSERT_LINE(text, "onceq_worker_inflight 0");
  ASSERT_LINE(text, "# TYPE onceq_worker_healthy gauge");
  ASSERT_LINE(text, "onceq_worker_healthy 1");
  ASSERT_LINE(text, "# TYPE onceq_worker_handler_seconds histogram");
  ASSERT_LINE(text, "onceq_worker_handler_seconds_bucket{le=\"+Inf\"} 0");
  ASSERT_LINE(text, "onceq_worker_handler_seconds_sum 0");
  ASSERT_LINE(text, "onceq_worker_handler_seconds_count 0");
  ASSERT_LINE(text, "onceq_worker_enqueue_to_start_seconds_count 0");
  free(text);
  wk_metrics_free(m);
  wk_metrics_free(NULL); /* freeing NULL is safe */
}

static void test_render_known(void)
{
  wk_metrics *m = wk_metrics_new();
  char *text = malloc(BIG);
  /* Dyadic values so _sum is exact: 2^-10 (<= 0.001), 2^-8 (<= 0.005),
   * 0.125, 0.5 (on a bound: le is inclusive), 1.5 and 100 (+Inf). */
  static const double vals[] = {0.0009765625, 0.00390625, 0.125, 0.5, 1.5, 100};
  static const char *want_handler[] = {
      "{le=\"0.001\"} 1", "{le=\"0.005\"} 2", "{le=\"0.01\"} 2",
      "{le=\"0.025\"} 2", "{le=\"0.05\"} 2",  "{le=\"0.1\"} 2",
      "{le=\"0.25\"} 3",  "{le=\"0.5\"} 4",   "{le=\"1\"} 4",
      "{le=\"2.5\"} 5",   "{le=\"5\"} 5",     "{le=\"10\"} 5",
      "{le=\"30\"} 5",    "{le=\"60\"} 5",    "{le=\"+Inf\"} 6",
  };
  static const char *want_latency[] = {
      "{le=\"0.001\"} 1", "{le=\"0.002\"} 2", "{le=\"0.005\"} 2",
      "{le=\"0.01\"} 2",  "{le=\"0.025\"} 2", "{le=\"0.05\"} 2",
      "{le=\"0.1\"} 2",   "{le=\"0.25\"} 2",  "{le=\"0.5\"} 2",
      "{le=\"1\"} 2",     "{le=\"2.5\"} 2",   "{le=\"5\"} 2",
      "{le=\"10\"} 2",    "{le=\"60\"} 3",    "{le=\"+Inf\"} 3",
  };
  char line[128];

  ASSERT(m && text);
  wk_metrics_add(m, WK_C_CLAIMED, 5);
  wk_metrics_add(m, WK_C_ACKED, 3);
  wk_metrics_add(m, WK_C_FAILED, 2);
  wk_metrics_add(m, WK_C_DEAD, 1);
  wk_metrics_add(m, WK_C_RESTARTS, 4);
  wk_metrics_add(m, WK_C_RESTARTS, 3);
  wk_metrics_add(m, WK_C_SESSIONS, 1);
  wk_metrics_add(m, WK_C__COUNT, 9); /* out of range: ignored */
  wk_metrics_inflight(m, 3);
  wk_metrics_inflight(m, -1);
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
    wk_metrics_observe(m, WK_H_HANDLER, vals[i]);
  wk_metrics_observe(m, WK_H_LATENCY, -1);  /* clock step: counts as 0 */
  wk_metrics_observe(m, WK_H_LATENCY, NAN); /* dropped */
  wk_metrics_observe(m, WK_H_LATENCY, 0.0015);
  wk_metrics_observe(m, WK_H_LATENCY, 42);

  ASSERT_EQ(wk_metrics_get(m, WK_C_CLAIMED), 5);
  ASSERT_EQ(wk_metrics_get(m, WK_C_RESTARTS), 7);
  ASSERT_EQ(wk_metrics_get(m, WK_C_LOST), 0);
  ASSERT_EQ(wk_metrics_get(m, WK_C__COUNT), 0);

  render(m, text, BIG);
  check_exposition(text);
  ASSERT_LINE(text, "# HELP onceq_worker_claimed_total Items this worker "
                    "claimed.");
  ASSERT_LINE(text, "onceq_worker_claimed_total 5");
  ASSERT_LINE(text, "onceq_worker_acked_total 3");
  ASSERT_LINE(text, "onceq_worker_failed_total 2");
  ASSERT_LINE(text, "onceq_worker_dead_total 1");
  ASSERT_LINE(text, "# TYPE onceq_worker_claims_lost_total counter");
  ASSERT_LINE(text, "onceq_worker_claims_lost_total 0");
  ASSERT_LINE(text, "onceq_worker_tx_restarts_total 7");
  ASSERT_LINE(text, "onceq_worker_sessions_total 1");
  ASSERT_LINE(text, "# TYPE onceq_worker_inflight gauge");
  ASSERT_LINE(text, "onceq_worker_inflight 2");

  for (size_t i = 0; i < 15; i++) {
    snprintf(line, sizeof line, "onceq_worker_handler_seconds_bucket%s",
             want_handler[i]);
    ASSERT_LINE(text, line);
    snprintf(line, sizeof line,
             "onceq_worker_enqueue_to_start_seconds_bucket%s", want_latency[i]);
    ASSERT_LINE(text, line);
  }
  ASSERT_LINE(text, "onceq_worker_handler_seconds_sum 102.1298828125");
  ASSERT_LINE(text, "onceq_worker_handler_seconds_count 6");
  ASSERT_LINE(text, "onceq_worker_enqueue_to_start_seconds_sum 42.0015");
  ASSERT_LINE(text, "onceq_worker_enqueue_to_start_seconds_count 3");

  /* The buckets come in ascending order, right after the TYPE line. */
  {
    const char *t = strstr(text, "# TYPE onceq_worker_handler_seconds ");
    const char *b1 = strstr(text, "handler_seconds_bucket{le=\"0.001\"}");
    const char *b2 = strstr(text, "handler_seconds_bucket{le=\"60\"}");
    const char *b3 = strstr(text, "handler_seconds_bucket{le=\"+Inf\"}");
    const char *s = strstr(text, "onceq_worker_handler_seconds_sum");
    const char *c = strstr(text, "onceq_worker_handler_seconds_count");
    ASSERT(t && b1 && b2 && b3 && s && c);
    ASSERT(t < b1 && b1 < b2 && b2 < b3 && b3 < s && s < c);
  }

  wk_metrics_set_healthy(m, false);
  render(m, text, BIG);
  ASSERT_LINE(text, "onceq_worker_healthy 0");
  wk_metrics_set_healthy(m, true);
  render(m, text, BIG);
  ASSERT_LINE(text, "onceq_worker_healthy 1");

  printf("---- sample exposition ----\n%s---- end ----\n", text);
  free(text);
  wk_metrics_free(m);
}

static void test_render_small_buffers(void)
{
  wk_metrics *m = wk_metrics_new();
  char *full = malloc(BIG), *buf = malloc(BIG + 64);
  size_t full_len;
  static const size_t sizes[] = {1, 2, 5, 10, 37, 100, 1000, 2049};

  ASSERT(m && full && buf);
  wk_metrics_add(m, WK_C_ACKED, 123456789);
  wk_metrics_observe(m, WK_H_HANDLER, 0.3);
  full_len = wk_metrics_render(m, full, BIG);
  ASSERT(full_len > 2049);

  /* len 0 writes nothing at all. */
  memset(buf, 'Z', 16);
  ASSERT_EQ(wk_metrics_render(m, buf, 0), 0);
  ASSERT_EQ(buf[0], 'Z');
  ASSERT_EQ(wk_metrics_render(m, NULL, 10), 0);

  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t len = sizes[i], n;

    memset(buf, 'Z', len + 64);
    n = wk_metrics_render(m, buf, len);
    ASSERT(n < len);
    ASSERT_EQ(strlen(buf), n);
    for (size_t k = len; k < len + 64; k++)
      ASSERT_EQ(buf[k], 'Z');             /* nothing past len */
    ASSERT(n == 0 || buf[n - 1] == '\n'); /* cut at a line end */
    ASSERT(memcmp(buf, full, n) == 0);    /* a prefix of the full text */
    /* and the longest whole-line prefix that fits */
    ASSERT(full[n] != '\0');
    {
      const char *next = strchr(full + n, '\n');
      ASSERT(next != NULL);
      ASSERT((size_t)(next - full) + 1 >= len);
    }
  }
  /* Exactly enough room, and one byte short. */
  ASSERT_EQ(wk_metrics_render(m, buf, full_len + 1), full_len);
  ASSERT_STREQ(buf, full);
  {
    size_t n = wk_metrics_render(m, buf, full_len);
    ASSERT(n < full_len);
    ASSERT(buf[n - 1] == '\n');
    ASSERT_EQ(n + strlen("onceq_worker_enqueue_to_start_seconds_count 0\n"),
              full_len);
  }
  free(full);
  free(buf);
  wk_metrics_free(m);
}

static void test_serve(void)
{
  wk_metrics *m = wk_metrics_new(), *m2;
  char err[256], ctype[128], url[128];
  body *b = malloc(sizeof *b);
  int port = -1, port2 = -1;

  ASSERT(m && b);
  wk_metrics_add(m, WK_C_ACKED, 3);
  wk_metrics_observe(m, WK_H_HANDLER, 0.02);
  if (wk_metrics_serve(m, "127.0.0.1:0", &port, err, sizeof err) != 0)
    OQT_FAIL("serve: %s", err);
  ASSERT(port > 0 && port < 65536);

  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  ASSERT_EQ(http("GET", url, b, ctype, sizeof ctype), 200);
  ASSERT_CONTAINS(ctype, "text/plain");
  ASSERT_CONTAINS(ctype, "version=0.0.4");
  ASSERT_LINE(b->buf, "onceq_worker_acked_total 3");
  ASSERT_LINE(b->buf, "onceq_worker_handler_seconds_bucket{le=\"0.025\"} 1");
  check_exposition(b->buf);
  ASSERT_EQ(http("HEAD", url, b, NULL, 0), 200);
  ASSERT_EQ(b->len, 0);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics?x=1", port);
  ASSERT_EQ(http("GET", url, b, NULL, 0), 200);

  ASSERT_EQ(get(port, "/healthz", b), 200);
  ASSERT_STREQ(b->buf, "ok\n");
  wk_metrics_set_healthy(m, false);
  ASSERT_EQ(get(port, "/healthz", b), 503);
  ASSERT_STREQ(b->buf, "unhealthy\n");
  ASSERT_EQ(get(port, "/metrics", b), 200);
  ASSERT_LINE(b->buf, "onceq_worker_healthy 0");
  wk_metrics_set_healthy(m, true);
  ASSERT_EQ(get(port, "/healthz", b), 200);

  ASSERT_EQ(get(port, "/nope", b), 404);
  ASSERT_EQ(get(port, "/", b), 404);
  ASSERT_EQ(get(port, "/metrics/", b), 404);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  ASSERT_EQ(http("POST", url, b, NULL, 0), 405);
  ASSERT_EQ(http("DELETE", url, b, NULL, 0), 405);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
  ASSERT_EQ(http("PUT", url, b, NULL, 0), 405);

  /* A second serve on the same handle is refused. */
  ASSERT_EQ(wk_metrics_serve(m, "127.0.0.1:0", NULL, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "already");

  /* Stopping frees the port: ":PORT" (host defaults to 127.0.0.1) can
   * bind it again. */
  wk_metrics_free(m);
  m2 = wk_metrics_new();
  ASSERT(m2 != NULL);
  snprintf(url, sizeof url, ":%d", port);
  if (wk_metrics_serve(m2, url, &port2, err, sizeof err) != 0)
    OQT_FAIL("serve %s after free: %s", url, err);
  ASSERT_EQ(port2, port);
  ASSERT_EQ(get(port2, "/healthz", b), 200);
  wk_metrics_free(m2);

  /* "PORT" alone, port 0. */
  m2 = wk_metrics_new();
  ASSERT(m2 != NULL);
  port2 = -1;
  if (wk_metrics_serve(m2, "0", &port2, err, sizeof err) != 0)
    OQT_FAIL("serve 0: %s", err);
  ASSERT(port2 > 0);
  ASSERT_EQ(get(port2, "/metrics", b), 200);
  wk_metrics_free(m2);

  /* localhost:0 */
  m2 = wk_metrics_new();
  ASSERT(m2 != NULL);
  port2 = -1;
  if (wk_metrics_serve(m2, "localhost:0", &port2, err, sizeof err) != 0)
    OQT_FAIL("serve localhost:0: %s", err);
  ASSERT_EQ(get(port2, "/healthz", b), 200);
  wk_metrics_free(m2);
  free(b);
}

static void test_serve_ipv6(void)
{
  wk_metrics *m = wk_metrics_new();
  char err[256], url[128];
  body *b = malloc(sizeof *b);
  int port = -1;

  ASSERT(m && b);
  if (wk_metrics_serve(m, "[::1]:0", &port, err, sizeof err) != 0) {
    /* No IPv6 loopback here: the message must still say what to fix. */
    ASSERT_CONTAINS(err, "cannot listen on [::1]:0");
    ASSERT_CONTAINS(err, "--metrics-addr");
    printf("ipv6 skipped: %s\n", err);
  } else {
    snprintf(url, sizeof url, "http://[::1]:%d/healthz", port);
    ASSERT_EQ(http("GET", url, b, NULL, 0), 200);
    ASSERT_STREQ(b->buf, "ok\n");
  }
  wk_metrics_free(m);
  free(b);
}

static void test_port_in_use(void)
{
  struct sockaddr_in sa;
  socklen_t salen = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port, port2 = -1;
  wk_metrics *m = wk_metrics_new(), *m2 = wk_metrics_new();
  char addr[64], err[256], want[96];

  ASSERT(fd >= 0 && m && m2);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &salen), 0);
  port = ntohs(sa.sin_port);

  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  ASSERT_EQ(wk_metrics_serve(m, addr, NULL, err, sizeof err), -1);
  printf("busy port: %s\n", err);
  snprintf(want, sizeof want, "cannot listen on 127.0.0.1:%d: ", port);
  ASSERT_CONTAINS(err, want);
  ASSERT_CONTAINS(err, strerror(EADDRINUSE));
  ASSERT_CONTAINS(err, "--metrics-addr");
  ASSERT(strchr(err, '\n') == NULL); /* one line */
  close(fd);

  /* A failed serve leaves the handle usable; and a port held by another
   * metrics server is refused the same way. */
  ASSERT_EQ(wk_metrics_serve(m, "127.0.0.1:0", &port, err, sizeof err), 0);
  snprintf(addr, sizeof addr, "%d", port);
  ASSERT_EQ(wk_metrics_serve(m2, addr, &port2, err, sizeof err), -1);
  ASSERT_EQ(port2, -1);
  ASSERT_CONTAINS(err, strerror(EADDRINUSE));
  ASSERT_CONTAINS(err, "--metrics-addr");

  /* An address this host does not have. */
  ASSERT_EQ(wk_metrics_serve(m2, "192.0.2.1:0", NULL, err, sizeof err), -1);
  printf("foreign address: %s\n", err);
  ASSERT_CONTAINS(err, "cannot listen on 192.0.2.1:0: ");
  ASSERT_CONTAINS(err, "--metrics-addr");
  wk_metrics_free(m);
  wk_metrics_free(m2);
}

static void test_bad_addrs(void)
{
  static const char *bad[] = {
      "x",
      "",
      "127.0.0.1:",
      "127.0.0.1:99999",
      "127.0.0.1:-1",
      "127.0.0.1:8a",
      "1.2.3:80",
      "foo:80",
      "::1:80",
      "[::1]",
      "[::1]80",
      "[zz]:80",
      "[]:80",
      ":",
      "127.0.0.1:0:0",
      " 127.0.0.1:80",
      "127.0.0.1: 80",
      "300.1.1.1:80",
      "127.0.0.1:123456",
  };
  wk_metrics *m = wk_metrics_new();
  char err[256];
  int port = -7;

  ASSERT(m != NULL);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[64];

    err[0] = '\0';
    if (wk_metrics_serve(m, bad[i], &port, err, sizeof err) != -1)
      OQT_FAIL("'%s' was accepted", bad[i]);
    snprintf(want, sizeof want, "bad --metrics-addr '%s'", bad[i]);
    ASSERT_CONTAINS(err, want);
    ASSERT_CONTAINS(err, "expected ");
    ASSERT(strchr(err, '\n') == NULL);
    ASSERT_EQ(port, -7);
  }
  ASSERT_EQ(wk_metrics_serve(m, NULL, NULL, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "--metrics-addr");
  ASSERT_CONTAINS(err, "expected HOST:PORT");
  ASSERT_EQ(wk_metrics_serve(m, "x", NULL, err, sizeof err), -1);
  ASSERT_STREQ(err, "bad --metrics-addr 'x': expected HOST:PORT "
                    "(e.g. 127.0.0.1:9090)");
  /* A tiny err buffer is truncated, not overrun. */
  {
    char tiny[8];
    memset(tiny, 'Z', sizeof tiny);
    ASSERT_EQ(wk_metrics_serve(m, "x", NULL, tiny, 5), -1);
    ASSERT_STREQ(tiny, "bad ");
    ASSERT_EQ(tiny[5], 'Z');
    ASSERT_EQ(wk_metrics_serve(m, "x", NULL, NULL, 0), -1);
  }
  wk_metrics_free(m);
}

/* ---- concurrency ------------------------------------------------------- */

#define THREADS 8
#define ITERS 100000

/* 2^-10, 1/16, 1/2, 2: exact in binary, so _sum is exact in any order. */
static const double hammer_vals[4] = {0.0009765625, 0.0625, 0.5, 2.0};

typedef struct hammer_ctx {
  wk_metrics *m;
  atomic_bool stop;
  atomic_int renders;
} hammer_ctx;

static void *hammer(void *arg)
{
  hammer_ctx *h = arg;

  for (int i = 0; i < ITERS; i++) {
    wk_metrics_add(h->m, WK_C_CLAIMED, 1);
    wk_metrics_add(h->m, WK_C_ACKED, 2);
    wk_metrics_inflight(h->m, 1);
    wk_metrics_observe(h->m, WK_H_HANDLER, hammer_vals[i % 4]);
    wk_metrics_observe(h->m, WK_H_LATENCY, hammer_vals[(i + 1) % 4]);
    wk_metrics_inflight(h->m, -1);
    if (i % 1000 == 0)
      wk_metrics_set_healthy(h->m, (i / 1000) % 2 == 0);
  }
  return NULL;
}

static void *renderer(void *arg)
{
  hammer_ctx *h = arg;
  char *text = malloc(BIG);
  double last_claimed = 0;

  ASSERT(text != NULL);
  while (!atomic_load(&h->stop)) {
    double claimed;

    render(h->m, text, BIG);
    check_exposition(text);
    claimed = sample(text, "onceq_worker_claimed_total");
    ASSERT(claimed >= last_claimed); /* counters never go back */
    last_claimed = claimed;
    atomic_fetch_add(&h->renders, 1);
  }
  free(text);
  return NULL;
}

static void test_hammer(void)
{
  hammer_ctx h;
  pthread_t th[THREADS], rt;
  char *text = malloc(BIG);
  char err[256];
  body *b = malloc(sizeof *b);
  int port = -1, scrapes = 0;
  const double n = (double)THREADS * ITERS, q = n / 4;
  char line[160];

  ASSERT(text && b);
  h.m = wk_metrics_new();
  ASSERT(h.m != NULL);
  atomic_init(&h.stop, false);
  atomic_init(&h.renders, 0);
  if (wk_metrics_serve(h.m, "127.0.0.1:0", &port, err, sizeof err) != 0)
    OQT_FAIL("serve: %s", err);

  ASSERT_EQ(pthread_create(&rt, NULL, renderer, &h), 0);
  for (int i = 0; i < THREADS; i++)
    ASSERT_EQ(pthread_create(&th[i], NULL, hammer, &h), 0);
  /* Scrape over HTTP while they run (the server's thread renders too). */
  for (int i = 0; i < 5; i++) {
    ASSERT_EQ(get(port, "/metrics", b), 200);
    check_exposition(b->buf);
    scrapes++;
  }
  for (int i = 0; i < THREADS; i++)
    ASSERT_EQ(pthread_join(th[i], NULL), 0);
  atomic_store(&h.stop, true);
  ASSERT_EQ(pthread_join(rt, NULL), 0);
  printf("hammer: %d renders and %d scrapes ran alongside\n",
         atomic_load(&h.renders), scrapes);

  ASSERT_EQ(wk_metrics_get(h.m, WK_C_CLAIMED), THREADS * ITERS);
  ASSERT_EQ(wk_metrics_get(h.m, WK_C_ACKED), 2 * THREADS * ITERS);
  render(h.m, text, BIG);
  check_exposition(text);
  ASSERT_EQ(sample(text, "onceq_worker_claimed_total"), n);
  ASSERT_EQ(sample(text, "onceq_worker_acked_total"), 2 * n);
  ASSERT_LINE(text, "onceq_worker_inflight 0");
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_count"), n);
  ASSERT_EQ(sample(text, "onceq_worker_enqueue_to_start_seconds_count"), n);
  /* 200000 each of 2^-10, 1/16, 1/2, 2. */
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"0.001\"}"),
            q);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"0.05\"}"),
            q);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"0.1\"}"),
            2 * q);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"0.5\"}"),
            3 * q);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"1\"}"),
            3 * q);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"2.5\"}"), n);
  ASSERT_EQ(sample(text, "onceq_worker_handler_seconds_bucket{le=\"+Inf\"}"),
            n);
  ASSERT_EQ(sample(text, "onceq_worker_enqueue_to_start_seconds_bucket"
                         "{le=\"0.002\"}"),
            q);
  /* sum = 200000 * (2^-10 + 1/16 + 1/2 + 2) = 512695.3125, exactly */
  snprintf(line, sizeof line, "onceq_worker_handler_seconds_sum %s",
           "512695.3125");
  ASSERT_LINE(text, line);
  snprintf(line, sizeof line, "onceq_worker_enqueue_to_start_seconds_sum %s",
           "512695.3125");
  ASSERT_LINE(text, line);

  wk_metrics_free(h.m);
  free(text);
  free(b);
}

int main(void)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  ASSERT_EQ(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
  test_render_fresh();
  test_render_known();
  test_render_small_buffers();
  test_bad_addrs();
  test_serve();
  test_serve_ipv6();
  test_port_in_use();
  test_hammer();
  curl_global_cleanup();
  printf("ok\n");
  return 0;
}
