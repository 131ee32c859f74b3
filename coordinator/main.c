/*
 * main.c: `onceq`, the operator's CLI. This first version has one command,
 * `migrate [--status]`; the others (DESIGN §6) come with the CLI issue.
 *
 * Exit codes (DESIGN §6): 0 done / up to date; 1 runtime failure (or, for
 * --status, migrations pending); 2 bad usage or configuration, with one
 * line naming the fix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onceq/onceq.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

static const char usage[] =
    "usage: onceq [--db URL] COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  migrate [--status]   apply the schema, or show applied/available\n"
    "\n"
    "options:\n"
    "  --db URL             database URL or conninfo (default:\n"
    "                       ONCEQ_DATABASE_URL, then DATABASE_URL, then\n"
    "                       libpq's PG* variables)\n"
    "  --help, --version\n";

/*
 * Overwrite a --db argument in place with its masked form so the password
 * does not show in `ps` (the kernel exposes argv as we leave it).
 */
static void hide_password(char *arg)
{
  char masked[1024];
  oq_conninfo_mask(arg, masked, sizeof masked);
  size_t len = strlen(arg);
  if (strcmp(masked, arg) == 0)
    return;
  if (strlen(masked) <= len) {
    memcpy(arg, masked, strlen(masked));
    memset(arg + strlen(masked), ' ', len - strlen(masked));
  } else {
    memset(arg, '*', len);
  }
}

static int usage_error(const char *fmt, const char *arg)
{
  fprintf(stderr, "onceq: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "; see `onceq --help`\n");
  return EXIT_USAGE;
}

/* Exit code for a failed connect or query: configuration problems are 2. */
static int exit_for(oq_err e)
{
  return (e == OQ_ERR_CONFIG || e == OQ_ERR_AUTH) ? EXIT_USAGE : EXIT_RUNTIME;
}

static int cmd_migrate(oq_db *db, int status_only)
{
  int applied = 0, latest = oq_migrate_latest();
  oq_err e = oq_migrate_status(db, &applied);
  if (e != OQ_OK) {
    fprintf(stderr, "onceq: migrate: %s\n", oq_db_errmsg(db));
    return exit_for(e);
  }
  if (status_only) {
    printf("applied: %d\navailable: %d\n", applied, latest);
    for (int v = 1; v <= latest; v++)
      printf("  %04d_%s %s\n", v, oq_migrate_name(v),
             v <= applied ? "applied" : "pending");
    if (applied < latest) {
      fprintf(stderr, "onceq: %d migration(s) pending; run `onceq migrate`\n",
              latest - applied);
      return EXIT_RUNTIME;
    }
    return 0;
  }
  int from = 0, to = 0;
  e = oq_migrate_run(db, &from, &to);
  if (e != OQ_OK) {
    fprintf(stderr, "onceq: migrate: %s\n", oq_db_errmsg(db));
    return exit_for(e);
  }
  if (from == to)
    printf("schema is up to date (version %d)\n", to);
  else
    printf("migrated schema from version %d to %d\n", from, to);
  return 0;
}

static int cli(int argc, char **argv, char **dburl_copy)
{
  char *dburl = NULL; /* a copy: argv is overwritten to hide passwords */
  const char *cmd = NULL;
  int status_only = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    } else if (strcmp(a, "--version") == 0) {
      printf("onceq %s\n", oq_version());
      return 0;
    } else if (strcmp(a, "--db") == 0) {
      if (i + 1 >= argc)
        return usage_error("%s needs a value (a database URL)", a);
      free(dburl);
      dburl = *dburl_copy = strdup(argv[++i]);
      hide_password(argv[i]);
    } else if (strncmp(a, "--db=", 5) == 0) {
      free(dburl);
      dburl = *dburl_copy = strdup(a + 5);
      hide_password(argv[i] + 5);
    } else if (strcmp(a, "--status") == 0 && cmd &&
               strcmp(cmd, "migrate") == 0) {
      status_only = 1;
    } else if (a[0] == '-') {
      return usage_error("unknown option %s", a);
    } else if (!cmd) {
      cmd = a;
    } else {
      return usage_error("unexpected argument %s", a);
    }
  }
  if (!cmd)
    return usage_error("%s", "no command given");
  if (strcmp(cmd, "migrate") != 0)
    return usage_error("unknown command %s", cmd);

  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_db_opts o = {.conninfo = dburl, .application_name = "onceq"};
  oq_err e = oq_db_open(&o, &db, err, sizeof err);
  if (e != OQ_OK) {
    fprintf(stderr, "onceq: %s\n", err);
    return exit_for(e);
  }
  int rc = cmd_migrate(db, status_only);
  oq_db_close(db);
  return rc;
}

int main(int argc, char **argv)
{
  char *dburl = NULL;
  int rc = cli(argc, argv, &dburl);
  free(dburl);
  return rc;
}
