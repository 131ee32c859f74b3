/* logsink.c: see logsink.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "logsink.h"
#include "onceq/text.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool as_json;
/* set before any thread starts (cm_logsink_secret), read-only after;
 * kept for the process's life */
static char *secrets[CM_SECRETS_MAX];
static int nsecrets;

static void add_secret(const char *s, size_t n)
{
  if (n >= 2 && s[0] == '\'' && s[n - 1] == '\'') { /* password='a b' */
    s++;
    n -= 2;
  }
  if (n < CM_SECRET_MIN || nsecrets == CM_SECRETS_MAX)
    return;
  for (int i = 0; i < nsecrets; i++)
    if (strlen(secrets[i]) == n && memcmp(secrets[i], s, n) == 0)
      return;
  char *copy = strndup(s, n);
  if (copy)
    secrets[nsecrets++] = copy;
}

void cm_logsink_secret(const char *text, bool whole)
{
  if (!text || !*text)
    return;
  if (whole) {
    add_secret(text, strlen(text));
    return;
  }
  size_t from = 0, start, len;
  while (oq_text_secret_next(text, from, &start, &len)) {
    add_secret(text + start, len);
    from = start + len;
  }
}

void cm_logsink_scrub(char *buf, size_t cap)
{
  size_t n = strlen(buf);
  char *tmp = malloc(cap);
  if (tmp) {
    oq_text_mask_secrets(buf, tmp, cap);
    memcpy(buf, tmp, strlen(tmp) + 1);
    free(tmp);
  } else if (n) { /* no memory to mask it: say nothing of it */
    snprintf(buf, cap, "(a message was dropped: out of memory)");
  }
  for (int i = 0; i < nsecrets; i++)
    oq_text_scrub(buf, cap, secrets[i]);
}

/* One JSON log line: {"ts","level","session","item","msg"}, built with
 * jansson (keys in this order). Returns false on out-of-memory. */
static bool json_line(FILE *f, const char *ts, const char *level,
                      const char *session, const char *item, const char *msg)
{
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "ts", ts, "level", level,
                        "session", session, "item", item, "msg", msg);
  if (!o)
    return false;
  int rc = json_dumpf(o, f, JSON_COMPACT);
  json_decref(o);
  if (rc == 0)
    fputc('\n', f);
  return rc == 0;
}

static void sink(void *ud, oq_log_level level, const char *session,
                 const char *item, const char *msg)
{
  (void)ud;
  struct timespec ts;
  struct tm tm;
  char when[40];
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  /* Messages carry outside text (a handler's stderr, a queue name): in
   * JSON it must be valid UTF-8; in text, one message stays one line and
   * sends the terminal no control sequences (oq_text_escape). */
  char masked[2048], safe[4096];
  snprintf(masked, sizeof masked, "%s", msg);
  cm_logsink_scrub(masked, sizeof masked);
  if (as_json)
    oq_text_clean(safe, sizeof safe, masked, strlen(masked));
  else
    oq_text_escape(safe, sizeof safe, masked);
  msg = safe;
  pthread_mutex_lock(&mu);
  if (as_json) {
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%s.%03ldZ", when, ts.tv_nsec / 1000000);
    (void)json_line(stderr, stamp, oq_log_level_name(level), session, item,
                    msg);
  } else {
    fprintf(stderr, "%s.%03ldZ %-5s", when, ts.tv_nsec / 1000000,
            oq_log_level_name(level));
    if (*session)
      fprintf(stderr, " session=%s", session);
    if (*item)
      fprintf(stderr, " item=%s", item);
    fprintf(stderr, " %s\n", msg);
  }
  fflush(stderr);
  pthread_mutex_unlock(&mu);
}

void cm_logsink_install(oq_log_level level, bool json)
{
  as_json = json;
  oq_log_set_sink(sink, NULL, level);
}
