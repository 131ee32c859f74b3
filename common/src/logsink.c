/* logsink.c: see logsink.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "logsink.h"
#include "onceq/text.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool as_json;

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
  char safe[4096];
  if (as_json)
    oq_text_clean(safe, sizeof safe, msg, strlen(msg));
  else
    oq_text_escape(safe, sizeof safe, msg);
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
