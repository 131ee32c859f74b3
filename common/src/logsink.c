/* logsink.c: see logsink.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "logsink.h"
#include "onceq/text.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool as_json;

/* Write s as a JSON string body (quotes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
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
    fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"session\":\"",
            when, ts.tv_nsec / 1000000, oq_log_level_name(level));
    json_str(stderr, session);
    fputs("\",\"item\":\"", stderr);
    json_str(stderr, item);
    fputs("\",\"msg\":\"", stderr);
    json_str(stderr, msg);
    fputs("\"}\n", stderr);
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
