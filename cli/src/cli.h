/*
 * cli.h: what every `onceq` command shares: the command table entry, exit
 * codes, the parsed global options, and helpers to connect, to run one
 * transaction or statement and to report one-line errors.
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

#include "onceq/onceq.h"
#include "say.h"

#define CLI_EXIT_OK CM_EXIT_OK
#define CLI_EXIT_RUNTIME CM_EXIT_RUNTIME
#define CLI_EXIT_USAGE CM_EXIT_USAGE
/* `onceq wait` and `onceq push --wait` (cmd_wait.c) */
#define CLI_EXIT_DEAD 3      /* an item was dead-lettered */
#define CLI_EXIT_CANCELLED 4 /* an item was cancelled */
#define CLI_EXIT_TIMEOUT 5   /* an item still pending at --timeout */

typedef struct cli_globals {
  const char *db; /* --db, a copy (argv is masked); NULL: environment */
  bool json;      /* --json (read commands) */
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

/* Connect for command cmd, run one statement (oq_db_query: each row to fn)
 * and close. Returns CLI_EXIT_OK, or the exit code after one line on
 * stderr (cli_fail_db). */
int cli_query(const cli_globals *g, const char *cmd, const char *sql,
              int nparams, const char *const *params, oq_row_fn fn, void *ud);

/* Commands (one file each: cmd_<name>.c). */
int cmd_migrate(const cli_globals *g, int argc, char **argv);
int cmd_push(const cli_globals *g, int argc, char **argv);
int cmd_list(const cli_globals *g, int argc, char **argv);
int cmd_show(const cli_globals *g, int argc, char **argv);
int cmd_cancel(const cli_globals *g, int argc, char **argv);
int cmd_retry(const cli_globals *g, int argc, char **argv);
int cmd_stats(const cli_globals *g, int argc, char **argv);
int cmd_sessions(const cli_globals *g, int argc, char **argv);
int cmd_parts(const cli_globals *g, int argc, char **argv);
int cmd_reap(const cli_globals *g, int argc, char **argv);
int cmd_coordinator(const cli_globals *g, int argc, char **argv);
int cmd_schedule(const cli_globals *g, int argc, char **argv);
int cmd_wait(const cli_globals *g, int argc, char **argv);

/* Wait for the n items on db (oq_wait; timeout_ms < 0: no limit), print
 * their outcomes for command cmd (text, or JSON lines with --json) and
 * return the exit code (cmd_wait.c has the rules). Ctrl-C ends the wait. */
int cli_wait_ids(oq_db *db, const cli_globals *g, const char *cmd,
                 const char *const *ids, size_t n, long timeout_ms);

#endif
