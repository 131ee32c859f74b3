/*
 * preflight.h: start-up checks of the handler configuration, so a mistake
 * that would fail every item (SQL that does not prepare, a command that is
 * not there, a URL libcurl cannot use) stops the worker at once with one
 * line, instead of burning attempts and dead-lettering work (docs/design.md §6:
 * exit 2 is bad configuration). The handler table (handler.h) runs them
 * as each kind's check; --http's URL check is cm_curl_check_url
 * (curlpost.h).
 *
 * Thread safety: called once on the main thread before the worker runs.
 */
#ifndef ONCEQ_WORKER_PREFLIGHT_H
#define ONCEQ_WORKER_PREFLIGHT_H

#include <stddef.h>

#include "onceq/db.h"

/* The --sql check: the text checks below, then sql is prepared on db, the
 * start-up check's connection (parameter types jsonb, uuid, text, int4 for
 * $1..$4), and deallocated, never run. 0, or 2 with one line in err naming
 * the problem and the fix. */
int wk_preflight_sql(const char *sql, oq_db *db, char *err, size_t errlen);

/* The SQL text checks that need no server: 0 when sql may be prepared,
 * else 2 with one line in err (empty statement, transaction control). */
int wk_preflight_sql_text(const char *sql, char *err, size_t errlen);

/* The --exec command check alone: 0 or 2 with one line in err. path is the
 * PATH to search (NULL: the environment's, or "/usr/bin:/bin"). */
int wk_preflight_exec(const char *cmd, const char *path, char *err,
                      size_t errlen);

#endif
