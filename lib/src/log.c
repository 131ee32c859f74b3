/*
 * log.c: the log sink. The sink and level are the only mutable globals in
 * libonceq, written once at start-up before threads run (log.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "onceq/log.h"

static oq_log_sink_fn sink_fn;
static void *sink_ud;
static oq_log_level sink_level = OQ_LOG_OFF;

static const char *const names[] = {"debug", "info", "warn", "error", "off"};

void oq_log_set_sink(oq_log_sink_fn fn, void *ud, oq_log_level min_level)
{
  sink_fn = fn;
  sink_ud = ud;
  sink_level = fn ? min_level : OQ_LOG_OFF;
}

int oq_log_enabled(oq_log_level level)
{
  return sink_fn != NULL && level >= sink_level && level < OQ_LOG_OFF;
}

int oq_log_level_parse(const char *name)
{
  if (!name)
    return -1;
  for (int i = 0; i <= OQ_LOG_OFF; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  if (strcmp(name, "warning") == 0)
    return OQ_LOG_WARN;
  return -1;
}

const char *oq_log_level_name(oq_log_level level)
{
  if ((int)level < 0 || level > OQ_LOG_OFF)
    return "?";
  return names[level];
}

void oq_log_write(oq_log_level level, const char *session, const char *item,
                  const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  if (!oq_log_enabled(level))
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  sink_fn(sink_ud, level, session ? session : "", item ? item : "", msg);
}
