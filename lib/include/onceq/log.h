/*
 * log.h: where the library's log lines go.
 *
 * The sink is the only mutable global in libonceq: set it once at start-up,
 * before any other thread runs. Every line carries the session and item ids
 * it concerns (empty when none) and never a password.
 *
 * Thread safety: oq_log_set_sink once, before threads; logging itself may
 * happen on any thread, so the sink must be thread-safe.
 */
#ifndef ONCEQ_LOG_H
#define ONCEQ_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oq_log_level {
  OQ_LOG_DEBUG = 0,
  OQ_LOG_INFO = 1,
  OQ_LOG_WARN = 2,
  OQ_LOG_ERROR = 3,
  OQ_LOG_OFF = 4
} oq_log_level;

typedef void (*oq_log_sink_fn)(void *ud, oq_log_level level,
                               const char *session, const char *item,
                               const char *msg);

/* Install a sink and the minimum level. NULL sink: lines are dropped.
 * The default is no sink (the library is silent).
 * Blocks: never. */
void oq_log_set_sink(oq_log_sink_fn fn, void *ud, oq_log_level min_level);

/* "debug", "info", ...; -1 when the name is unknown.
 * Blocks: never (like oq_log_level_name). */
int oq_log_level_parse(const char *name);
const char *oq_log_level_name(oq_log_level level);

/* Log one line (printf-style). Use through OQ_LOG so the level is checked
 * before the arguments are formatted.
 * Blocks: as long as the sink takes, on the calling thread: keep the sink fast.
 */
void oq_log_write(oq_log_level level, const char *session, const char *item,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Blocks: never. */
int oq_log_enabled(oq_log_level level);

#define OQ_LOG(level, session, item, ...)                                      \
  do {                                                                         \
    if (oq_log_enabled(level))                                                 \
      oq_log_write((level), (session), (item), __VA_ARGS__);                   \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
