/*
 * preflight.h: start-up checks of the handler configuration, so a mistake
 * that would fail every item (SQL that does not prepare, a command that is
 * not there, a URL libcurl cannot use) stops the worker at once with one
 * line, instead of burning attempts and dead-lettering work (docs/design.md §6:
 * exit 2 is bad configuration).
 *
 * Thread safety: called once on the main thread before the worker runs.
 */
#ifndef ONCEQ_WORKER_PREFLIGHT_H
#define ONCEQ_WORKER_PREFLIGHT_H

#include <stddef.h>

#include "config.h"
#include "onceq/db.h"

/*
 * Check cfg's handler through its row's check (handler.h): --sql is
 * prepared on db, the start-up check's
 * connection (parameter types jsonb, uuid, text, int4 for $1..$4), and
 * deallocated, never run;
 * --exec's command is resolved through PATH and must be an executable
 * file; --http's URL must parse with libcurl's URL API. Returns 0 when the
 * worker may start, else the exit code (2) with one line in err naming the
 * problem and the fix (passwords masked).
 */
int wk_preflight(const wk_config *cfg, oq_db *db, char *err, size_t errlen);

/* The --sql check alone: the text checks below, then sql is prepared on
 * db as wk_preflight says. 0, or 2 with one line in err. */
int wk_preflight_sql(const char *sql, oq_db *db, char *err, size_t errlen);

/* The SQL text checks that need no server: 0 when sql may be prepared,
 * else 2 with one line in err (empty statement, transaction control). */
int wk_preflight_sql_text(const char *sql, char *err, size_t errlen);

/* The --exec command check alone: 0 or 2 with one line in err. path is the
 * PATH to search (NULL: the environment's, or "/usr/bin:/bin"). */
int wk_preflight_exec(const char *cmd, const char *path, char *err,
                      size_t errlen);

#endif
