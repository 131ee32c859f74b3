/*
 * handler_http.c: the --http handler. Owns one libcurl easy handle per
 * wk_http (reused, so the connection to the endpoint is kept alive between
 * items) and maps each response to an outcome. See handler_http.h.
 *
 * Terms:
 *  - body head: the first WK_TAIL_MAX bytes of the response body. We keep
 *    the head, not the tail: an endpoint's error text (a JSON "error"
 *    member, an HTML title) comes first, and cutting at the front keeps
 *    memory bounded without a ring buffer. Bytes past the head are read
 *    and dropped, so the connection stays reusable.
 *  - clean text: what we put in r->error and r->output. Both end up in
 *    PostgreSQL text columns, which reject NUL bytes and invalid UTF-8, so
 *    everything goes through oq_text_clean (onceq/text.h): invalid bytes
 *    become '?' and a character cut by a length limit is dropped.
 *  - masked URL: the URL as oq_text_mask_secrets (onceq/text.h, the one
 *    masking rule) shows it: its userinfo password (or the whole userinfo
 *    when it has no ':', since a lone user part is often a token), every
 *    query value, the fragment and the path past its first segment
 *    replaced by "***". Messages (and so last_error, the status page and
 *    the webhook) only ever carry the masked URL; the pieces it hides are
 *    also scrubbed from libcurl's text, which may echo one alone.
 *
 * Decisions:
 *  - Redirects are not followed. Following a 301/302/303 turns a POST into
 *    a GET in most clients, and 307/308 re-send the payload somewhere the
 *    operator never configured; both are ambiguous for a job that must run
 *    once. A 3xx is a failed attempt (normal backoff) whose error names the
 *    Location, so the operator can fix --http.
 *  - TLS peer and host verification are on unless cfg->insecure.
 *  - Only http:// and https:// URLs are allowed (no file://, ftp://, ...).
 *  - The request is driven by a private multi handle so the cancel check
 *    runs at least every 100 ms even while nothing arrives (curl_easy_perform
 *    only calls back about once a second when idle). The progress callback
 *    checks it too, to stop a busy transfer between chunks.
 *  - Proxy environment variables (https_proxy, no_proxy, ...) are honoured,
 *    as libcurl does by default.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "curlpost.h"
#include "handler_http.h"

#define HTTP_CONNECT_TIMEOUT_MS_DEFAULT 5000
#define HTTP_TIMEOUT_MS_DEFAULT 30000
#define HTTP_POLL_MS 100            /* longest wait between cancel checks */
#define HTTP_RETRY_AFTER_MAX_S 3600 /* Retry-After is capped at 1 hour */
#define HTTP_HEADER_VALUE_MAX 1024  /* bytes kept of Retry-After/Location */

struct wk_http {
  CURL *easy;       /* one per wk_http; reused for keep-alive */
  CURLM *multi;     /* drives easy so we can poll the cancel check */
  char *url_masked; /* for messages; owned */
  char *secrets[8]; /* what the mask hides in the URL, to scrub from
                       curl's text; owned, NULL-padded */
  char user_agent[64];

  /* Per request; reset by wk_http_run. */
  const wk_task *task;
  bool cancelled;                          /* the cancel check fired */
  char errbuf[CURL_ERROR_SIZE];            /* curl's detail for the failure */
  char body[WK_TAIL_MAX];                  /* body head, not NUL-terminated */
  size_t body_len;                         /* bytes in body */
  bool body_cut;                           /* more came than body holds */
  char retry_after[HTTP_HEADER_VALUE_MAX]; /* last response's, or "" */
  bool has_retry_after;
  char location[HTTP_HEADER_VALUE_MAX]; /* last response's, or "" */
};

/* ---- text helpers ------------------------------------------------------ */

/* Drop trailing whitespace (error messages read better without the
 * newline most bodies end with). */
static void trim_right(char *s)
{
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
}

/*
 * The one setter for r->error and r->output: format into dst (cap bytes),
 * truncating on purpose, and drop a character the cut left incomplete.
 * Arguments are clean text already.
 */
static void set_text(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_text(char *dst, size_t cap, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
  oq_text_clean(dst, cap, dst, strlen(dst)); /* a character cut at the end */
}

/* ---- Retry-After --------------------------------------------------------
 * RFC 9110 §10.2.3: delta-seconds or an HTTP-date. A recipient must accept
 * all three HTTP-date forms (IMF-fixdate, obsolete RFC 850, asctime). We
 * parse by hand rather than with strptime, whose %a/%b follow LC_TIME.
 */

static const char *const day_short[7] = {"Sun", "Mon", "Tue", "Wed",
                                         "Thu", "Fri", "Sat"};
static const char *const day_long[7] = {"Sunday",    "Monday",   "Tuesday",
                                        "Wednesday", "Thursday", "Friday",
                                        "Saturday"};
static const char *const month_short[12] = {"Jan", "Feb", "Mar", "Apr",
                                            "May", "Jun", "Jul", "Aug",
                                            "Sep", "Oct", "Nov", "Dec"};

/* Consume one of names (case-insensitive, whole word); its index or -1. */
static int take_name(const char **p, const char *const *names, int count)
{
  for (int i = 0; i < count; i++) {
    size_t len = strlen(names[i]);
    if (strncasecmp(*p, names[i], len) == 0 &&
        !isalpha((unsigned char)(*p)[len])) {
      *p += len;
      return i;
    }
  }
  return -1;
}

/* Consume exactly n digits into *out. */
static bool take_digits(const char **p, int n, int *out)
{
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)(*p)[i]))
      return false;
    v = v * 10 + ((*p)[i] - '0');
  }
  *p += n;
  *out = v;
  return true;
}

static bool take_lit(const char **p, const char *lit)
{
  size_t len = strlen(lit);
  if (strncmp(*p, lit, len) != 0)
    return false;
  *p += len;
  return true;
}

/* "HH:MM:SS" */
static bool take_time(const char **p, struct tm *tm)
{
  return take_digits(p, 2, &tm->tm_hour) && take_lit(p, ":") &&
         take_digits(p, 2, &tm->tm_min) && take_lit(p, ":") &&
         take_digits(p, 2, &tm->tm_sec);
}

static bool is_leap(int year)
{
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

/* Range-check tm (full year in tm_year for now) and convert to epoch. */
static bool tm_to_epoch(struct tm *tm, long long *epoch)
{
  static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int year = tm->tm_year;
  if (year < 1900 || tm->tm_mon < 0 || tm->tm_mon > 11 || tm->tm_mday < 1)
    return false;
  int dim = mdays[tm->tm_mon] + (tm->tm_mon == 1 && is_leap(year));
  if (tm->tm_mday > dim || tm->tm_hour > 23 || tm->tm_min > 59 ||
      tm->tm_sec > 60)
    return false;
  tm->tm_year = year - 1900;
  tm->tm_isdst = 0;
  *epoch = (long long)timegm(tm);
  return true;
}

/* Parse an HTTP-date in any of its three forms; false when it is none. */
static bool parse_http_date(const char *s, long now_epoch_s, long long *epoch)
{
  struct tm tm;
  const char *p = s;
  memset(&tm, 0, sizeof tm);

  /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
  if (take_name(&p, day_short, 7) >= 0 && take_lit(&p, ", ")) {
    if (!take_digits(&p, 2, &tm.tm_mday) || !take_lit(&p, " "))
      return false;
    tm.tm_mon = take_name(&p, month_short, 12);
    if (tm.tm_mon < 0 || !take_lit(&p, " ") ||
        !take_digits(&p, 4, &tm.tm_year) || !take_lit(&p, " ") ||
        !take_time(&p, &tm) || !take_lit(&p, " GMT") || *p)
      return false;
    return tm_to_epoch(&tm, epoch);
  }

  /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
  p = s;
  if (take_name(&p, day_long, 7) >= 0 && take_lit(&p, ", ")) {
    int yy;
    if (!take_digits(&p, 2, &tm.tm_mday) || !take_lit(&p, "-"))
      return false;
    tm.tm_mon = take_name(&p, month_short, 12);
    if (tm.tm_mon < 0 || !take_lit(&p, "-") || !take_digits(&p, 2, &yy) ||
        !take_lit(&p, " ") || !take_time(&p, &tm) || !take_lit(&p, " GMT") ||
        *p)
      return false;
    /* A two-digit year more than 50 years ahead means the last century
     * with those digits (RFC 9110 §5.6.7). */
    struct tm now_tm;
    time_t now = (time_t)now_epoch_s;
    int now_year = gmtime_r(&now, &now_tm) ? now_tm.tm_year + 1900 : 1970;
    tm.tm_year = now_year / 100 * 100 + yy;
    if (tm.tm_year > now_year + 50)
      tm.tm_year -= 100;
    return tm_to_epoch(&tm, epoch);
  }

  /* asctime: "Sun Nov  6 08:49:37 1994" */
  p = s;
  if (take_name(&p, day_short, 7) >= 0 && take_lit(&p, " ")) {
    tm.tm_mon = take_name(&p, month_short, 12);
    if (tm.tm_mon < 0 || !take_lit(&p, " "))
      return false;
    if (*p == ' ') {
      p++;
      if (!take_digits(&p, 1, &tm.tm_mday))
        return false;
    } else if (!take_digits(&p, 2, &tm.tm_mday)) {
      return false;
    }
    if (!take_lit(&p, " ") || !take_time(&p, &tm) || !take_lit(&p, " ") ||
        !take_digits(&p, 4, &tm.tm_year) || *p)
      return false;
    return tm_to_epoch(&tm, epoch);
  }
  return false;
}

int wk_http_parse_retry_after(const char *value, long now_epoch_s)
{
  const long long cap_s = HTTP_RETRY_AFTER_MAX_S;
  if (!value)
    return -1;
  /* optional whitespace around the field value */
  while (*value == ' ' || *value == '\t')
    value++;
  size_t n = strlen(value);
  while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
    n--;
  if (n == 0 || n >= HTTP_HEADER_VALUE_MAX)
    return -1;
  char v[HTTP_HEADER_VALUE_MAX];
  memcpy(v, value, n);
  v[n] = '\0';

  long long delay_s;
  if (strspn(v, "0123456789") == n) {
    /* delta-seconds; saturate instead of overflowing */
    delay_s = 0;
    for (size_t i = 0; i < n && delay_s <= cap_s; i++)
      delay_s = delay_s * 10 + (v[i] - '0');
  } else {
    long long at;
    if (!parse_http_date(v, now_epoch_s, &at))
      return -1;
    delay_s = at - (long long)now_epoch_s;
    if (delay_s < 0)
      delay_s = 0;
  }
  if (delay_s > cap_s)
    delay_s = cap_s;
  return (int)(delay_s * 1000);
}

/* ---- curl callbacks ---------------------------------------------------- */

/* Whether the task's cancel check fired; latched in h->cancelled. Called
 * from the request loop and from curl's progress callback. */
static bool check_cancel(wk_http *h)
{
  if (!h->cancelled && h->task && h->task->cancelled &&
      h->task->cancelled(h->task->cancel_ctx))
    h->cancelled = true;
  return h->cancelled;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
  return check_cancel(ud) ? 1 : 0; /* non-zero aborts the transfer */
}

/* Keep the body head; read and drop the rest. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
  wk_http *h = ud;
  size_t n = size * nmemb;
  size_t room = sizeof h->body - h->body_len;
  size_t take = n < room ? n : room;
  memcpy(h->body + h->body_len, data, take);
  h->body_len += take;
  if (take < n)
    h->body_cut = true;
  return n;
}

/* Copy a header value (after "Name:") trimmed into dst. */
static void header_value(char *dst, size_t cap, const char *v, size_t n)
{
  while (n > 0 && (*v == ' ' || *v == '\t')) {
    v++;
    n--;
  }
  while (n > 0 && isspace((unsigned char)v[n - 1]))
    n--;
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

/* Called once per header line of every response, including interim ones
 * (1xx): a status line starts a new response, so forget the last one's. */
static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
  wk_http *h = ud;
  size_t n = size * nitems;
  static const char ra[] = "retry-after:";
  static const char loc[] = "location:";
  if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
    h->retry_after[0] = '\0';
    h->has_retry_after = false;
    h->location[0] = '\0';
  } else if (n >= sizeof ra - 1 && strncasecmp(line, ra, sizeof ra - 1) == 0) {
    header_value(h->retry_after, sizeof h->retry_after, line + sizeof ra - 1,
                 n - (sizeof ra - 1));
    h->has_retry_after = true;
  } else if (n >= sizeof loc - 1 &&
             strncasecmp(line, loc, sizeof loc - 1) == 0) {
    header_value(h->location, sizeof h->location, line + sizeof loc - 1,
                 n - (sizeof loc - 1));
  }
  return n;
}

/* ---- handle ------------------------------------------------------------ */

wk_http *wk_http_new(const wk_http_cfg *cfg)
{
  wk_http *h = calloc(1, sizeof *h);
  const char *url = cfg->url ? cfg->url : "";
  long connect_ms = cfg->connect_timeout_ms > 0
                        ? cfg->connect_timeout_ms
                        : HTTP_CONNECT_TIMEOUT_MS_DEFAULT;
  long total_ms =
      cfg->timeout_ms > 0 ? cfg->timeout_ms : HTTP_TIMEOUT_MS_DEFAULT;
  if (!h)
    return NULL;
  /* clean text: it goes into error messages */
  char masked[2048];
  oq_text_mask_secrets(url, masked, sizeof masked);
  size_t mlen = strlen(masked);
  h->url_masked = malloc(mlen + 1);
  if (h->url_masked)
    oq_text_clean(h->url_masked, mlen + 1, masked, mlen);
  size_t from = 0, at, len;
  for (int i = 0; i < 8 && oq_text_secret_next(url, from, &at, &len); i++) {
    h->secrets[i] = strndup(url + at, len);
    if (!h->secrets[i])
      goto fail;
    from = at + len;
  }
  h->easy = curl_easy_init();
  h->multi = curl_multi_init();
  if (!h->url_masked || !h->easy || !h->multi)
    goto fail;
  snprintf(h->user_agent, sizeof h->user_agent, "onceq-worker/%s",
           oq_version());

  CURL *e = h->easy;
  /* Options that never change between requests; curl copies strings. */
  cm_curl_post p = {.url = url,
                    .user_agent = h->user_agent,
                    .connect_timeout_ms = connect_ms,
                    .timeout_ms = total_ms,
                    .insecure = cfg->insecure,
                    .progress = on_progress,
                    .progress_ud = h};
  CURLcode rc = cm_curl_post_setup(e, &p);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt(e, CURLOPT_WRITEDATA, h);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  if (rc == CURLE_OK)
    rc = curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
  if (rc != CURLE_OK)
    goto fail; /* out of memory (or a libcurl built without http/https) */
  return h;

fail:
  wk_http_free(h);
  return NULL;
}

void wk_http_free(wk_http *h)
{
  if (!h)
    return;
  if (h->multi)
    curl_multi_cleanup(h->multi); /* the easy handle is never left in it */
  if (h->easy)
    curl_easy_cleanup(h->easy);
  free(h->url_masked);
  for (int i = 0; i < 8 && h->secrets[i]; i++) {
    memset(h->secrets[i], 0, strlen(h->secrets[i]));
    free(h->secrets[i]);
  }
  free(h);
}

/* ---- one request ------------------------------------------------------- */

/* True when v can go in a header value as is (no CR, LF or other control
 * characters that would end or split the header). */
static bool header_safe(const char *v)
{
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if (*p < 0x20 || *p == 0x7F)
      return false;
  return true;
}

/* Append one header line to *list; on out-of-memory frees the list, sets
 * *list to NULL and returns false. */
static bool add_line(struct curl_slist **list, const char *line)
{
  struct curl_slist *next = curl_slist_append(*list, line);
  if (!next) {
    curl_slist_free_all(*list);
    *list = NULL;
    return false;
  }
  *list = next;
  return true;
}

/* Append "Name: value" (value already checked with header_safe). */
static bool add_header(struct curl_slist **list, const char *name,
                       const char *value)
{
  char line[HTTP_HEADER_VALUE_MAX + 64];
  /* curl: "Name:" would remove the header; "Name;" sends it empty. */
  if (*value)
    snprintf(line, sizeof line, "%s: %s", name, value);
  else
    snprintf(line, sizeof line, "%s;", name);
  return add_line(list, line);
}

/*
 * Run the transfer through h->multi, checking the cancel check at least
 * every HTTP_POLL_MS. Returns curl's result for the transfer;
 * CURLE_ABORTED_BY_CALLBACK when cancelled.
 */
static CURLcode perform(wk_http *h)
{
  CURLcode result = CURLE_ABORTED_BY_CALLBACK;
  bool done = false;
  /* A transfer stopped while its name is being resolved (our cancel and
   * curl_multi_remove_handle below, or libcurl's own timeout) would wait
   * for the resolver's thread: libcurl's threaded resolver (Debian 12's,
   * 7.88: AsynchDNS without c-ares) cannot interrupt getaddrinfo and joins
   * it, which can take the resolver's whole timeout (resolv.conf: 5 s per
   * try and server). With CURLOPT_QUICK_EXIT (7.87+) it detaches the
   * thread instead, which frees its own memory and socket once getaddrinfo
   * returns: a lookup may outlive its item by that long, nothing lasts.
   * Older libcurl answers CURLE_UNKNOWN_OPTION and keeps waiting. */
  (void)curl_easy_setopt(h->easy, CURLOPT_QUICK_EXIT, 1L);
  if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
    return CURLE_OUT_OF_MEMORY;
  while (!done) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(h->multi, &running);
    if (mc != CURLM_OK) {
      result = CURLE_OUT_OF_MEMORY;
      snprintf(h->errbuf, sizeof h->errbuf, "%s", curl_multi_strerror(mc));
      break;
    }
    int queued = 0;
    CURLMsg *msg = curl_multi_info_read(h->multi, &queued);
    for (; msg; msg = curl_multi_info_read(h->multi, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done)
      break;
    if (check_cancel(h)) {
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    /* Waits for socket activity, curl's next timer, or HTTP_POLL_MS. */
    mc = curl_multi_poll(h->multi, NULL, 0, HTTP_POLL_MS, NULL);
    if (mc != CURLM_OK) {
      result = CURLE_OUT_OF_MEMORY;
      snprintf(h->errbuf, sizeof h->errbuf, "%s", curl_multi_strerror(mc));
      break;
    }
  }
  /* Removing an unfinished transfer aborts it and closes its connection;
   * a finished one leaves its connection in the multi's cache. */
  curl_multi_remove_handle(h->multi, h->easy);
  return result;
}

/* r->error = "POST <masked url>: <curl's detail>[ (<errno text>)]" */
static void transport_error(wk_http *h, CURLcode rc, wk_result *r)
{
  char raw[CURL_ERROR_SIZE + 160];
  char detail[sizeof raw];
  const char *text = h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc);
  long os_errno = 0;
  snprintf(raw, sizeof raw, "%s", text);
  trim_right(raw);
  if (curl_easy_getinfo(h->easy, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK &&
      os_errno != 0) {
    char etext[128];
    if (strerror_r((int)os_errno, etext, sizeof etext) != 0)
      snprintf(etext, sizeof etext, "errno %ld", os_errno);
    if (!strstr(raw, etext)) {
      size_t len = strlen(raw);
      snprintf(raw + len, sizeof raw - len, " (%s)", etext);
    }
  }
  for (int i = 0; i < 8 && h->secrets[i]; i++)
    oq_text_scrub(raw, sizeof raw, h->secrets[i]);
  oq_text_clean(detail, sizeof detail, raw, strlen(raw));
  set_text(r->error, sizeof r->error, "POST %s: %s", h->url_masked, detail);
}

/* Fill r from a complete HTTP response with the given status. */
static void http_outcome(wk_http *h, long status, wk_result *r)
{
  char body[WK_TAIL_MAX + 1];
  oq_text_clean(body, sizeof body, h->body, h->body_len);

  if (status >= 200 && status <= 299) {
    r->outcome = WK_OK;
    set_text(r->output, sizeof r->output, "%s", body);
    r->output_cut = h->body_cut;
    return;
  }
  r->outcome = WK_FAILED;
  trim_right(body);
  const char *colon = body[0] ? ": " : "";
  if (status == 429 || (status >= 500 && status <= 599)) {
    r->retry_after_ms =
        h->has_retry_after
            ? wk_http_parse_retry_after(h->retry_after, (long)time(NULL))
            : -1;
    set_text(r->error, sizeof r->error, "HTTP %ld%s%s", status, colon, body);
  } else if (status >= 300 && status <= 399) {
    char loc[HTTP_HEADER_VALUE_MAX + 8];
    char loc_clean[HTTP_HEADER_VALUE_MAX];
    oq_text_mask_secrets(h->location, loc, sizeof loc);
    oq_text_clean(loc_clean, sizeof loc_clean, loc, strlen(loc));
    set_text(r->error, sizeof r->error,
             "HTTP %ld (redirect to %s not followed)%s%s", status,
             loc_clean[0] ? loc_clean : "(no Location)", colon, body);
  } else {
    set_text(r->error, sizeof r->error, "HTTP %ld%s%s", status, colon, body);
  }
}

void wk_http_run(wk_http *h, const wk_task *t, wk_result *r)
{
  struct curl_slist *headers = NULL;
  const oq_item *it = t->item;
  const char *queue = it->queue ? it->queue : "";
  const char *payload = it->payload ? it->payload : "";
  char attempt[16];

  wk_result_init(r);
  h->task = t;
  h->cancelled = false;
  h->errbuf[0] = '\0';
  h->body_len = 0;
  h->body_cut = false;
  h->retry_after[0] = '\0';
  h->has_retry_after = false;
  h->location[0] = '\0';

  if (check_cancel(h)) {
    r->outcome = WK_ABANDONED;
    set_text(r->error, sizeof r->error, "cancelled before the request");
    goto out;
  }
  if (!header_safe(queue) || !header_safe(it->id)) {
    set_text(r->error, sizeof r->error,
             "queue name or item id has control characters; "
             "cannot send it in an HTTP header");
    goto out;
  }
  snprintf(attempt, sizeof attempt, "%d", it->attempt);
  if (!add_header(&headers, "Content-Type", "application/json") ||
      !add_header(&headers, "Idempotency-Key", it->id) ||
      !add_header(&headers, "Onceq-Attempt", attempt) ||
      !add_header(&headers, "Onceq-Queue", queue) ||
      !add_line(&headers, "Expect:")) { /* no "Expect: 100-continue" */
    set_text(r->error, sizeof r->error, "out of memory building headers");
    goto out;
  }

  curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, payload);
  curl_easy_setopt(h->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                   (curl_off_t)strlen(payload));

  CURLcode rc = perform(h);
  if (h->cancelled) {
    r->outcome = WK_ABANDONED;
    set_text(r->error, sizeof r->error, "cancelled during the request");
  } else if (rc != CURLE_OK) {
    transport_error(h, rc, r);
  } else {
    long status = 0;
    curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &status);
    http_outcome(h, status, r);
  }

out:
  /* Nothing may point at this task's memory once we return. */
  curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, NULL);
  curl_slist_free_all(headers);
  h->task = NULL;
}
