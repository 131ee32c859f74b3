/*
 * main.c: `onceq`, the operator's CLI. Global options (--db, --json) may
 * come before or after the command; everything else belongs to the
 * command, which lives in its own cmd_<name>.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "flags.h"

static const cli_cmd commands[] = {
    {"migrate", cmd_migrate, "apply the schema, or show applied/available"},
    {"push", cmd_push, "enqueue one item, or JSON lines from stdin (bulk)"},
    {"list", cmd_list, "list items by queue and state"},
    {"show", cmd_show, "show one item (live, dead or done)"},
    {"cancel", cmd_cancel, "delete items; a running one's ack is rejected"},
    {"retry", cmd_retry, "move dead items back to ready"},
    {"stats", cmd_stats, "per-queue counts, lag, rates, scaling hint"},
    {"sessions", cmd_sessions, "live worker sessions and their claims"},
    {"keys", cmd_keys, "ordering keys: heads, blocked keys, last errors"},
    {"parts", cmd_parts, "partition owners and load; `parts set P`"},
    {"pause", cmd_pause, "stop claims of queues fleet-wide (items finish)"},
    {"resume", cmd_resume, "let workers claim paused queues again"},
    {"limit", cmd_limit, "a queue's fleet-wide concurrency limit"},
    {"reap", cmd_reap, "reap expired sessions once, releasing claims"},
    {"coordinator", cmd_coordinator, "the janitor daemon (leader by lease)"},
    {"schedule", cmd_schedule, "add|list|rm cron schedules"},
    {"wait", cmd_wait, "wait for items' results (exit 0/3 dead/4/5 timeout)"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(void)
{
  printf("usage: onceq [--db URL] [--json] COMMAND [OPTIONS]\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    printf("  %-12s %s\n", commands[i].name, commands[i].summary);
  printf("\nglobal options:\n"
         "  --db URL     database URL or conninfo (default: "
         "ONCEQ_DATABASE_URL,\n"
         "               then DATABASE_URL, then libpq's PG* variables)\n"
         "  --listen-db URL\n"
         "               a direct connection for the wake-ups of wait and\n"
         "               push --wait when --db goes through a pooler\n"
         "               (default: ONCEQ_LISTEN_DATABASE_URL)\n"
         "  --json       machine-readable output (read commands)\n"
         "  --help, --version\n"
         "\n`onceq COMMAND --help` for a command's options.\n"
         "exit codes: 0 done, 1 runtime failure, 2 bad usage\n");
}

int main(int argc, char **argv)
{
  cli_globals g = {0};
  char *db_copy = NULL;
  char *listen_copy = NULL;
  /* pull global options out of argv, keeping the command's arguments */
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  int nrest = 0, rc = CLI_EXIT_USAGE;
  if (!rest)
    return CLI_EXIT_RUNTIME;
  bool db_given = false;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    bool db_flag = strcmp(a, "--db") == 0 || strncmp(a, "--db=", 5) == 0;
    if (db_flag && db_given) {
      /* one rule with the commands' own flags (cli_no_repeats) */
      rc = cli_usage_error(NULL, "--db is given twice; give it once (a "
                                 "second one would silently win)");
      goto out;
    }
    if (strcmp(a, "--db") == 0) {
      if (i + 1 >= argc) {
        rc = cli_usage_error(NULL, "--db needs a value (a database URL)");
        goto out;
      }
      db_given = true;
      db_copy = strdup(argv[++i]);
      oq_conninfo_mask_in_place(argv[i]);
    } else if (strncmp(a, "--db=", 5) == 0) {
      db_given = true;
      db_copy = strdup(a + 5);
      oq_conninfo_mask_in_place(a + 5);
    } else if (strcmp(a, "--listen-db") == 0 ||
               strncmp(a, "--listen-db=", 12) == 0) {
      char err[256];
      char *val = a[11] == '=' ? a + 12 : i + 1 < argc ? argv[++i] : NULL;
      if (!val) {
        rc = cli_usage_error(NULL, "--listen-db needs a value (a direct "
                                   "database URL)");
        goto out;
      }
      if (cm_flag_listen_db(val, &listen_copy, err, sizeof err) != 0) {
        rc = cli_usage_error(NULL, "%s", err);
        goto out;
      }
    } else if (strcmp(a, "--json") == 0) {
      g.json = true;
    } else if (nrest == 0 &&
               (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
      usage();
      rc = CLI_EXIT_OK;
      goto out;
    } else if (nrest == 0 && strcmp(a, "--version") == 0) {
      printf("onceq %s\n", oq_version());
      rc = CLI_EXIT_OK;
      goto out;
    } else if (nrest == 0 && a[0] == '-') {
      oq_conninfo_mask_in_place(a); /* --database=URL: not in ps either */
      rc = cli_usage_error(NULL, "unknown option %s", a);
      goto out;
    } else {
      rest[nrest++] = a;
    }
  }
  g.db = db_copy;
  g.listen_db = listen_copy;
  if (db_copy && !*db_copy) {
    /* an unset variable in a script; libpq's defaults would be a guess */
    rc = cli_usage_error(NULL, "--db is empty; give a database URL, or leave "
                               "--db out to use ONCEQ_DATABASE_URL, "
                               "DATABASE_URL or libpq's PG* variables");
    goto out;
  }
  if (nrest == 0) {
    rc = cli_usage_error(NULL, "no command given");
    goto out;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(rest[0], commands[i].name) == 0) {
      rc = commands[i].run(&g, nrest, rest);
      goto out;
    }
  rc = cli_usage_error(NULL, "unknown command %s%s", rest[0],
                       strstr(rest[0], "://") || strchr(rest[0], '=')
                           ? " (the database goes in --db URL)"
                           : "");
out:
  free(rest);
  free(db_copy);
  free(listen_copy);
  return rc;
}
