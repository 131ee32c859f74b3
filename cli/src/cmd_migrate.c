/*
 * cmd_migrate.c: `onceq migrate [--status] [--dry-run]`: apply the embedded
 * schema versions, or show applied/available. --status exits 1 when
 * migrations are pending (0 when up to date).
 */
#include <string.h>

#include "cli.h"

int cmd_migrate(const cli_globals *g, int argc, char **argv)
{
  bool status_only = false, dry_run = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--status") == 0)
      status_only = true;
    else if (strcmp(argv[i], "--dry-run") == 0)
      dry_run = true;
    else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: onceq migrate [--status] [--dry-run]\n"
             "  apply every missing schema version (idempotent, safe to run "
             "concurrently)\n"
             "  --status   list applied and pending versions; exit 0 when up "
             "to date, 1 when not\n"
             "  --dry-run  list what would be applied, change nothing\n");
      return CLI_EXIT_OK;
    } else
      return cli_usage_error("migrate", "unknown option %s", argv[i]);
  }
  int rc = 0;
  oq_db *db = cli_connect(g, "migrate", &rc);
  if (!db)
    return rc;
  int applied = 0, latest = oq_migrate_latest();
  oq_err e = oq_migrate_status(db, &applied);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "migrate", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (status_only || dry_run) {
    if (g->json) {
      cm_json j;
      cm_json_init(&j, stdout);
      cm_json_obj(&j, NULL);
      cm_json_int(&j, "applied", applied);
      cm_json_int(&j, "available", latest);
      cm_json_end(&j);
    } else {
      printf("applied: %d\navailable: %d\n", applied, latest);
      for (int v = 1; v <= latest; v++)
        printf("  %04d_%s %s\n", v, oq_migrate_name(v),
               v <= applied ? "applied"
               : dry_run    ? "would be applied"
                            : "pending");
    }
    if (status_only && applied < latest) {
      fprintf(stderr,
              "onceq: migrate: %d migration(s) pending; run `onceq migrate`\n",
              latest - applied);
      rc = CLI_EXIT_RUNTIME;
    }
    goto out;
  }
  int from = 0, to = 0;
  e = oq_migrate_run(db, &from, &to);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "migrate", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (from == to)
    printf("schema is up to date (version %d)\n", to);
  else
    printf("migrated schema from version %d to %d\n", from, to);
out:
  oq_db_close(db);
  return rc;
}
