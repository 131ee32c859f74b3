/*
 * flags.h: the flags both daemons take, parsed and worded once:
 * --log-level, --log-format, --db, durations (--heartbeat-interval,
 * --session-expiry, ...); --metrics-addr is parsed and served by
 * cm_promhttp_serve (promhttp.h). Each daemon keeps its own
 * table of flags (worker/src/config.c, coordinator/src/coordinator.c) and
 * hands these values here. Each parser returns 0, or -1 with one line in
 * err that names the flag, the value and what is expected (the caller
 * adds its program's name and masks credentials).
 *
 * Thread safety: no shared state.
 */
#ifndef ONCEQ_COMMON_FLAGS_H
#define ONCEQ_COMMON_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The --help lines of the shared flags, to print under "options:". */
#define CM_FLAGS_HELP_DB                                                       \
  "  --db URL             database URL or conninfo (default:\n"                \
  "                       ONCEQ_DATABASE_URL, DATABASE_URL, PG* variables)\n"
#define CM_FLAGS_HELP_LOG                                                      \
  "  --log-level L        debug|info|warn|error (info)\n"                      \
  "  --log-format F       text|json (text)\n"
#define CM_FLAGS_HELP_DURATIONS "durations: 250ms, 5s, 2m, 1h (or 1h30m)\n"

/* A duration flag: above zero (one rule for both daemons), or "off"
 * (*ms = -1) when off_ok. */
int cm_flag_duration(const char *flag, const char *val, bool off_ok,
                     int64_t *ms, char *err, size_t errlen);

/* --log-level: *level an oq_log_level. */
int cm_flag_log_level(const char *val, int *level, char *err, size_t errlen);

/* --log-format text|json. */
int cm_flag_log_format(const char *val, bool *json, char *err, size_t errlen);

/*
 * --db: *db becomes a copy of val (free with free; a previous one is
 * freed) and val itself, which points into argv, is masked in place so
 * `ps` and /proc/PID/cmdline do not show a password. An empty value is
 * refused (an unset variable in a script; libpq's defaults would be a
 * guess).
 */
int cm_flag_db(char *val, char **db, char *err, size_t errlen);

/* The variable --listen-db falls back to. */
#define CM_LISTEN_DB_ENV "ONCEQ_LISTEN_DATABASE_URL"
#define CM_FLAGS_HELP_LISTEN_DB                                                \
  "  --listen-db URL      a direct (unpooled) connection for LISTEN/NOTIFY\n"  \
  "                       wake-ups when --db goes through a transaction\n"     \
  "                       pooler (default: " CM_LISTEN_DB_ENV ")\n"

/*
 * --listen-db: like cm_flag_db (a copy in *db, val masked in argv, empty
 * refused), for the direct connection that carries LISTEN when --db goes
 * through a transaction pooler (docs/deployment.md, "Poolers and high
 * availability").
 */
int cm_flag_listen_db(char *val, char **db, char *err, size_t errlen);

/* --listen-db's value, else ONCEQ_LISTEN_DATABASE_URL when it is set and
 * not empty, else NULL. Not a copy. */
const char *cm_listen_db(const char *flag_value);

/*
 * The one line a daemon logs at start when its --db goes through a
 * connection pooler (oq_db_pooled): what changes, and how wake-ups come
 * back. listen_db: the --listen-db in use (NULL: none); poll_ms: the poll
 * period the daemon falls back to. who: the program's name.
 */
void cm_log_pooler(const char *who, const char *sid, const char *listen_db,
                   long poll_ms);

#endif
