/*
 * cli.h: what every `onceq` command shares: the command table entry, exit
 * codes, the parsed global options, and helpers to connect and to report
 * one-line errors.
 *
 * Exit codes (DESIGN §6): 0 done; 1 runtime failure; 2 bad usage or bad
 * configuration, with one line that names the fix.
 *
 * Thread safety: the CLI is single-threaded except where a command says
 * otherwise (the coordinator daemon).
 */
#ifndef ONCEQ_CLI_H
#define ONCEQ_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "onceq/onceq.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_RUNTIME 1
#define CLI_EXIT_USAGE 2

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
/* Exit code for a library error: configuration problems are 2. */
int cli_exit_for(oq_err e);

/* Connect for command cmd; on failure prints one line and returns NULL
 * with *rc set. Close with oq_db_close. */
oq_db *cli_connect(const cli_globals *g, const char *cmd, int *rc);

/* Overwrite a conninfo in argv with its masked form (for `ps`). */
void cli_hide_password(char *arg);

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

#endif
