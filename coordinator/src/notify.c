/*
 * notify.c: the dead-job webhook (notify.h): reads the unnotified dead
 * items through the onceq_dead_unnotified partial index, POSTs each one,
 * and records the answer.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "due.h"
#include "curlpost.h"
#include "onceq/text.h"
#include "notify.h"

/* The receiver gets the dead row as JSON, built by the database
 * (qv_dead_unnotified, due.h); the answer is recorded with
 * oq_dead_mark_notified (onceq/dead.h). */
_Static_assert(CO_NOTIFY_BATCH == QV_DUE_BATCH, "one pass's read");

struct co_notifier {
  CURL *curl;
  char *url;
  char shown[512];        /* url with credentials masked */
  int timeout_ms;         /* per request */
  int failures;           /* consecutive failed attempts; 0 after success */
  uint64_t next_try_ms;   /* monotonic: no pass before this */
  uint64_t rng;           /* backoff jitter */
  oq_retry_policy policy; /* 1 s doubling to 5 min */
  const cm_signal_count *stop; /* for the progress callback */
};

co_notifier *co_notifier_new(const char *url, int timeout_ms, char *err,
                             size_t errlen)
{
  if (!url ||
      (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) ||
      strlen(url) < 9) {
    snprintf(err, errlen,
             "--notify-url '%.100s': expected an http:// or https:// URL",
             url ? url : "");
    return NULL;
  }
  co_notifier *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  n->url = strdup(url);
  n->curl = curl_easy_init();
  if (!n->url || !n->curl) {
    snprintf(err, errlen, "cannot initialise libcurl");
    co_notifier_free(n);
    return NULL;
  }
  oq_text_mask_secrets(url, n->shown, sizeof n->shown);
  n->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
  n->policy = oq_retry_policy_item();
  n->policy.base_ms = 1000;
  n->policy.cap_ms = 300000;
  n->policy.max_attempts = 0;
  n->policy.max_total_ms = 0;
  n->policy.jitter = 0.2;
  n->rng = oq_monotonic_ms() ^ (uint64_t)(uintptr_t)n ^ 0x9E3779B97F4A7C15ull;
  if (n->rng == 0)
    n->rng = 1;
  return n;
}

void co_notifier_free(co_notifier *n)
{
  if (!n)
    return;
  if (n->curl)
    curl_easy_cleanup(n->curl);
  free(n->url);
  free(n);
}

const char *co_notifier_shown_url(const co_notifier *n)
{
  return n->shown;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
  (void)ptr;
  (void)ud;
  return size * nmemb;
}

/* libcurl calls this at least once a second during a transfer: a non-zero
 * return aborts it, so a SIGTERM never waits out the request timeout. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
  (void)dltotal;
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  const co_notifier *n = ud;
  return n->stop && *n->stop ? 1 : 0;
}

/* POST body; returns the HTTP status, or 0 with why filled on a transport
 * failure. The Idempotency-Key names one death, not the item: "<id>.<died_at
 * in microseconds since the epoch>", so a retried item that dies again is
 * delivered under a new key (a receiver that keeps keys would drop it
 * otherwise), while a resend of the same death keeps its key. */
static long post(co_notifier *n, const char *id, const char *died_us,
                 const char *body, char *why, size_t whylen)
{
  char key[128], ua[64];
  struct curl_slist *h = NULL, *t;
  long status = 0;
  snprintf(key, sizeof key, "Idempotency-Key: %s.%s", id, died_us);
  snprintf(ua, sizeof ua, "onceq-coordinator/%s", oq_version());
  t = curl_slist_append(h, "Content-Type: application/json");
  if (t)
    h = t;
  t = curl_slist_append(h, key);
  if (t)
    h = t;
  t = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
  if (t)
    h = t;
  CURL *c = n->curl;
  curl_easy_reset(c);
  cm_curl_post p = {.url = n->url,
                    .user_agent = ua,
                    .connect_timeout_ms =
                        n->timeout_ms < 5000 ? n->timeout_ms : 5000,
                    .timeout_ms = n->timeout_ms,
                    .progress = on_progress,
                    .progress_ud = n};
  CURLcode rc = cm_curl_post_setup(c, &p);
  if (rc != CURLE_OK) {
    snprintf(why, whylen, "%s", curl_easy_strerror(rc));
    curl_slist_free_all(h);
    return 0;
  }
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  rc = curl_easy_perform(c);
  if (rc == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  else
    snprintf(why, whylen, "%s", curl_easy_strerror(rc));
  curl_slist_free_all(h);
  return status;
}

static bool permanent_rejection(long status)
{
  return status == 400 || status == 409 || status == 410 || status == 413 ||
         status == 415 || status == 422;
}

oq_err co_notify_run(co_notifier *n, oq_db *db, const cm_signal_count *stop,
                     int64_t budget_ms, long *sent, long *failed)
{
  qv_rows r = {0};
  uint64_t t0 = oq_monotonic_ms();
  *sent = *failed = 0;
  if (oq_monotonic_ms() < n->next_try_ms)
    return OQ_OK; /* backing off after a failure */
  n->stop = stop;
  oq_err e = qv_dead_unnotified(db, &r);
  for (int i = 0; e == OQ_OK && i < r.nrows && !*stop; i++) {
    const char *id = qv_rows_get(&r, i, 0);
    const char *died = qv_rows_get(&r, i, 1);
    const char *body = qv_rows_get(&r, i, 2);
    const char *died_us = qv_rows_get(&r, i, 3);
    char why[CURL_ERROR_SIZE + 64] = "";
    if (!id || !died || !body || !died_us)
      continue;
    /* The budget: a slow receiver must not hold up the pass's other
     * duties (retention, schedules). The rest stay unnotified, so the next
     * pass reads them again, oldest first: the order holds. */
    if (i > 0 && oq_monotonic_ms() - t0 >= (uint64_t)budget_ms) {
      OQ_LOG(OQ_LOG_DEBUG, NULL, NULL,
             "dead-job webhook: %lld ms spent this pass; %d item(s) left "
             "for the next",
             (long long)(oq_monotonic_ms() - t0), r.nrows - i);
      break;
    }
    long status = post(n, id, died_us, body, why, sizeof why);
    if (*stop)
      break; /* abandoned mid-request: the next leader sends it again */
    if ((status >= 200 && status < 300) || permanent_rejection(status)) {
      long marked = 0;
      e = oq_dead_mark_notified(db, id, died, status, &marked);
      if (e != OQ_OK)
        break;
      if (status >= 300)
        OQ_LOG(OQ_LOG_ERROR, NULL, id,
               "dead-job webhook rejected the item with HTTP %ld; marked "
               "notified (notify_status %ld), not sent again",
               status, status);
      else
        OQ_LOG(OQ_LOG_INFO, NULL, id, "dead item notified (HTTP %ld)%s", status,
               marked ? "" : "; already marked by another leader");
      (*sent)++;
      n->failures = 0;
      continue;
    }
    (*failed)++;
    n->failures++;
    int delay = oq_backoff_delay_ms(&n->policy, n->failures, &n->rng);
    n->next_try_ms = oq_monotonic_ms() + (uint64_t)delay;
    if (status == 0)
      OQ_LOG(OQ_LOG_WARN, NULL, id,
             "dead-job webhook %s failed: %s; retrying in %d ms "
             "(attempt %d)",
             n->shown, why, delay, n->failures);
    else
      OQ_LOG(OQ_LOG_WARN, NULL, id,
             "dead-job webhook %s answered HTTP %ld; retrying in %d ms "
             "(attempt %d)",
             n->shown, status, delay, n->failures);
    break; /* keep the order: this item stays first in line */
  }
  qv_rows_free(&r);
  return e;
}
