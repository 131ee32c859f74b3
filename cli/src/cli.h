/*
 * cli.h: what every `onceq` command shares: the command table entry, exit
 * codes, the parsed global options, option parsing, and helpers to
 * connect, to run one transaction and to report one-line errors. Tables,
 * durations, times and JSON are common/src (table.h, fmt.h, jsonout.h).
 *
 * Exit codes (docs/design.md §6, docs/cli.md "Exit codes"): 0 done; 1 runtime
 * or environment failure; 2 bad usage or bad configuration, with one line
 * that names the fix.
 *
 * Thread safety: the CLI is single-threaded except where a command says
 * otherwise (the coordinator daemon).
 */
#ifndef ONCEQ_CLI_H
#define ONCEQ_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "fmt.h"
#include "jsonout.h"
#include "onceq/onceq.h"
#include "say.h"
#include "table.h"

#define CLI_EXIT_OK CM_EXIT_OK
#define CLI_EXIT_RUNTIME CM_EXIT_RUNTIME
#define CLI_EXIT_USAGE CM_EXIT_USAGE
/* `onceq wait` and `onceq push --wait` (cmd_wait.c) */
#define CLI_EXIT_DEAD 3      /* an item was dead-lettered */
#define CLI_EXIT_CANCELLED 4 /* an item was cancelled */
#define CLI_EXIT_TIMEOUT 5   /* an item still pending at --timeout */

typedef struct cli_globals {
  const char *db;        /* --db, a copy (argv is masked); NULL: environment */
  const char *listen_db; /* --listen-db, a copy (argv is masked); NULL:
                            ONCEQ_LISTEN_DATABASE_URL or none */
  bool json;             /* --json (read commands) */
} cli_globals;

/* A command: argv[0] is the command name; options after it are the
 * command's own (global options were already removed). */
typedef int (*cli_cmd_fn)(const cli_globals *g, int argc, char **argv);

typedef struct cli_cmd {
  const char *name;
  cli_cmd_fn run;
  const char *summary; /* one line for `onceq --help` */
} cli_cmd;

/* Print "onceq: <message>; see `onceq CMD --help`" and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print "onceq: CMD: <message>" (one line) and return code. */
int cli_fail(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Refuse a single-value option of once (a NULL-terminated list of
 * "--name") given twice before "--" ("--name V" or "--name=V"): a usage
 * error, not a silent last-wins (issue 14). Returns 0 or 2 after the line. */
int cli_no_repeats(const char *cmd, int argc, char **argv,
                   const char *const *once);
/* Exit code for a library error: configuration problems are 2. */
int cli_exit_for(oq_err e);

/* Connect for command cmd; on failure prints one line and returns NULL
 * with *rc set. Close with oq_db_close. */
oq_db *cli_connect(const cli_globals *g, const char *cmd, int *rc);

/* Connect for command cmd, run fn(db, ud) in one transaction
 * (oq_db_transact: a restart runs it again) and close. Returns CLI_EXIT_OK,
 * or the exit code after one line on stderr ending "; <suffix>" when
 * suffix is not NULL (cli_fail_db), e.g. "nothing cancelled". */
int cli_transact(const cli_globals *g, const char *cmd, oq_tx_fn fn, void *ud,
                 const char *suffix);

/* ---- option parsing and errors ---------------------------------------- */

/* Parse a strict decimal integer in [min, max]; false on anything else
 * ("", "12x", "1e3", overflow). */
bool cli_parse_int(const char *s, long long min, long long max, long long *out);
/*
 * Option matching for command parsers: true when argv[*i] is "--name" or
 * "--name=VALUE". *val gets VALUE, or the next argument (and *i moves past
 * it), or NULL when there is none (report "--name needs a value").
 */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* True when s is a UUID in its canonical text form (8-4-4-4-12 hex). */
bool cli_is_uuid(const char *s);

/*
 * Report a failed database call of command cmd in one line on stderr and
 * return the exit code: a missing onceq table (SQLSTATE 42P01) says to run
 * `onceq migrate` and gives 2; anything else prints oq_db_errmsg(db) with
 * cli_exit_for(e). suffix (may be NULL), e.g. "nothing cancelled", ends
 * the line after "; ".
 */
int cli_fail_db(oq_db *db, oq_err e, const char *cmd, const char *suffix);

/* Commands (one file each: cmd_<name>.c). */
int cmd_migrate(const cli_globals *g, int argc, char **argv);
int cmd_push(const cli_globals *g, int argc, char **argv);
int cmd_list(const cli_globals *g, int argc, char **argv);
int cmd_show(const cli_globals *g, int argc, char **argv);
int cmd_cancel(const cli_globals *g, int argc, char **argv);
int cmd_retry(const cli_globals *g, int argc, char **argv);
int cmd_stats(const cli_globals *g, int argc, char **argv);
int cmd_sessions(const cli_globals *g, int argc, char **argv);
int cmd_keys(const cli_globals *g, int argc, char **argv);
int cmd_parts(const cli_globals *g, int argc, char **argv);
int cmd_reap(const cli_globals *g, int argc, char **argv);
int cmd_pause(const cli_globals *g, int argc, char **argv);
int cmd_resume(const cli_globals *g, int argc, char **argv);
int cmd_limit(const cli_globals *g, int argc, char **argv);
int cmd_coordinator(const cli_globals *g, int argc, char **argv);
int cmd_schedule(const cli_globals *g, int argc, char **argv);
int cmd_wait(const cli_globals *g, int argc, char **argv);

/* Wait for the n items on db (oq_wait; timeout_ms < 0: no limit), print
 * their outcomes for command cmd (text, or JSON lines with --json) and
 * return the exit code (cmd_wait.c has the rules). Ctrl-C ends the wait. */
int cli_wait_ids(oq_db *db, const cli_globals *g, const char *cmd,
                 const char *const *ids, size_t n, long timeout_ms);

#endif
