/*
 * cmd_schedule.c: `onceq schedule add NAME CRON QUEUE PAYLOAD`,
 * `onceq schedule list [--json]`, `onceq schedule rm NAME...`. The rows
 * live in onceq_schedules; the coordinator leader fires them
 * (coordinator/src/schedule.h).
 *
 * A bad cron expression, bad JSON, a name that exists (add) or one that
 * does not (rm): one line, exit 2, nothing changed (rm of several names is
 * one transaction: all or nothing).
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rows.h"
#include "cron.h"
#include "views.h"

#define NAME_MAX_LEN 100

static void usage(void)
{
  printf("usage: onceq schedule add NAME CRON QUEUE PAYLOAD_JSON\n"
         "       onceq schedule list [--json]\n"
         "       onceq schedule rm NAME...\n"
         "  CRON: 5 fields, quoted: minute hour day-of-month month "
         "day-of-week,\n"
         "  with *, N, N-M, lists a,b, steps */S or N-M/S, names jan-dec and\n"
         "  sun-sat, or @hourly/@daily/@weekly/@monthly/@yearly; times are "
         "UTC.\n"
         "  The coordinator leader (`onceq coordinator`) enqueues each "
         "occurrence\n"
         "  once, with unique key schedule:NAME:<epoch seconds>; occurrences\n"
         "  missed while no coordinator ran are enqueued when one starts.\n"
         "  NAME: 1-%d of A-Z a-z 0-9 _ . -\n",
         NAME_MAX_LEN);
}

/* "2026-11-23T08:00:00Z" for Unix seconds. */
static bool valid_name(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > NAME_MAX_LEN)
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
      return false;
  return true;
}

static int sched_add(const cli_globals *g, int argc, char **argv)
{
  char why[256], next_s[40];
  cm_cron c;
  if (argc != 6)
    return cli_usage_error("schedule",
                           "add takes NAME CRON QUEUE PAYLOAD_JSON (quote the "
                           "cron expression: '*/5 * * * *')");
  const char *name = argv[2], *expr = argv[3], *queue = argv[4],
             *payload = argv[5];
  if (!valid_name(name))
    return cli_usage_error("schedule",
                           "bad NAME '%.120s': use 1-%d of A-Z a-z 0-9 _ . -",
                           name, NAME_MAX_LEN);
  if (cm_cron_parse(expr, &c, why, sizeof why) != 0)
    return cli_usage_error("schedule", "%s", why);
  if (!queue[0])
    return cli_usage_error("schedule", "QUEUE must not be empty");

  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "schedule", &rc);
  if (!db)
    return rc;
  qv_rows r = {0};
  oq_err e = oq_migrate_check(db);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "schedule", "%s", oq_db_errmsg(db));
    goto out;
  }
  /* the first occurrence after the database's now() */
  e = qv_query(db, "SELECT extract(epoch FROM now())::float8", 0, NULL, &r);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "schedule", "%s", oq_db_errmsg(db));
    goto out;
  }
  int64_t now = (int64_t)floor(cm_atof(qv_rows_get(&r, 0, 0), 0));
  qv_rows_free(&r);
  int64_t next;
  if (cm_cron_next(&c, now, &next) != 0) {
    rc = cli_usage_error("schedule", "cron '%s' never fires", expr);
    goto out;
  }
  cm_fmt_utc(next_s, sizeof next_s, (double)next);
  bool added = false;
  e = oq_schedule_add(db, name, expr, queue, payload, next_s, &added);
  if (e != OQ_OK) {
    const char *st = oq_db_sqlstate(db);
    if (strncmp(st, "22", 2) == 0) /* data exception: invalid JSON */
      rc = cli_usage_error("schedule", "PAYLOAD is not valid JSON: %s",
                           oq_db_errmsg(db));
    else
      rc = cli_fail(cli_exit_for(e), "schedule", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (!added) {
    rc = cli_fail(CLI_EXIT_USAGE, "schedule",
                  "a schedule named %s already exists (nothing changed); "
                  "remove it first with `onceq schedule rm %s`",
                  name, name);
    goto out;
  }
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "name", name);
    cm_json_str(&j, "cron", expr);
    cm_json_str(&j, "queue", queue);
    cm_json_str(&j, "next_run_at", next_s);
    cm_json_int(&j, "next_run_epoch", (long long)next);
    cm_json_end(&j);
  } else {
    printf("added schedule %s: '%s' on queue %s; next run %s\n", name, expr,
           queue, next_s);
  }
out:
  qv_rows_free(&r);
  oq_db_close(db);
  return rc;
}

static int sched_list(const cli_globals *g, int argc, char **argv)
{
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--json") != 0)
      return cli_usage_error("schedule", "list: unknown argument %s", argv[i]);
  }
  bool json = g->json || argc > 2;
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "schedule", &rc);
  if (!db)
    return rc;
  qv_rows r = {0};
  oq_err e = oq_migrate_check(db);
  if (e == OQ_OK)
    e = qv_schedules_read(db, &r);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "schedule", "%s", oq_db_errmsg(db));
    goto out;
  }
  cm_json j;
  cm_json_init(&j, stdout);
  if (json)
    cm_json_arr(&j, NULL);
  else if (r.nrows == 0)
    printf("no schedules (add one with `onceq schedule add NAME CRON QUEUE "
           "PAYLOAD`)\n");
  else
    printf("%-14s %-14s %-10s %-16s %7s %8s\n", "NAME", "CRON", "QUEUE",
           "NEXT RUN (UTC)", "IN", "LAST");
  for (int i = 0; i < r.nrows; i++) {
    double next = cm_atof(qv_rows_get(&r, i, QV_SCHED_NEXT), 0);
    double last = cm_atof(qv_rows_get(&r, i, QV_SCHED_LAST), -1);
    double now = cm_atof(qv_rows_get(&r, i, QV_SCHED_NOW), 0);
    char when[40], in[32], ago[32];
    cm_fmt_utc(when, sizeof when, next);
    if (json) {
      cm_json_obj(&j, NULL);
      cm_json_str(&j, "name", qv_rows_get(&r, i, QV_SCHED_NAME));
      cm_json_str(&j, "cron", qv_rows_get(&r, i, QV_SCHED_CRON));
      cm_json_str(&j, "queue", qv_rows_get(&r, i, QV_SCHED_QUEUE));
      /* the payload is JSON already: embed it as is */
      cm_json_raw(&j, "payload", qv_rows_get(&r, i, QV_SCHED_PAYLOAD));
      cm_json_str(&j, "next_run_at", when);
      cm_json_int(&j, "next_run_epoch", (long long)llround(next));
      if (last >= 0)
        cm_json_str(&j, "last_run_at", cm_fmt_utc(ago, sizeof ago, last));
      else
        cm_json_raw(&j, "last_run_at", NULL);
      cm_json_str(&j, "last_item_id", qv_rows_get(&r, i, QV_SCHED_LAST_ITEM));
      cm_json_end(&j);
    } else {
      /* "2026-11-22 08:00" of "2026-11-22T08:00:00Z" */
      when[10] = ' ';
      when[16] = '\0';
      cm_fmt_dur(in, sizeof in, next - now);
      if (next < now)
        snprintf(in, sizeof in, "due");
      cm_fmt_dur(ago, sizeof ago, last >= 0 ? now - last : -1);
      printf("%-14.14s %-14.14s %-10.10s %-16s %7s %8s\n",
             qv_rows_get(&r, i, QV_SCHED_NAME),
             qv_rows_get(&r, i, QV_SCHED_CRON),
             qv_rows_get(&r, i, QV_SCHED_QUEUE), when, in, ago);
    }
  }
  if (json)
    cm_json_end(&j);
out:
  qv_rows_free(&r);
  oq_db_close(db);
  return rc;
}

/* rm: every name in one transaction; a missing one rolls all back. */
typedef struct rm_ctx {
  char **names;
  int n;
  const char *missing; /* the first name that did not exist */
} rm_ctx;

static oq_err rm_tx(oq_db *db, void *ud)
{
  rm_ctx *x = ud;
  x->missing = NULL;
  for (int i = 0; i < x->n; i++) {
    long n = 0;
    oq_err e = oq_schedule_remove(db, x->names[i], &n);
    if (e != OQ_OK)
      return e;
    if (n == 0) {
      x->missing = x->names[i];
      return OQ_ERR_INVALID; /* rolls back */
    }
  }
  return OQ_OK;
}

static int sched_rm(const cli_globals *g, int argc, char **argv)
{
  if (argc < 3)
    return cli_usage_error("schedule", "rm takes one or more NAMEs");
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "schedule", &rc);
  if (!db)
    return rc;
  rm_ctx x = {argv + 2, argc - 2, NULL};
  oq_err e = oq_migrate_check(db);
  if (e == OQ_OK)
    e = oq_db_transact(db, rm_tx, &x);
  if (e == OQ_ERR_INVALID && x.missing) {
    rc = cli_fail(CLI_EXIT_USAGE, "schedule",
                  "no schedule named %s (nothing removed); see `onceq "
                  "schedule list`",
                  x.missing);
  } else if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "schedule", "%s", oq_db_errmsg(db));
  } else if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_arr(&j, "removed");
    for (int i = 0; i < x.n; i++)
      cm_json_str(&j, NULL, x.names[i]);
    cm_json_end(&j);
    cm_json_end(&j);
  } else {
    for (int i = 0; i < x.n; i++)
      printf("removed schedule %s\n", x.names[i]);
  }
  oq_db_close(db);
  return rc;
}

int cmd_schedule(const cli_globals *g, int argc, char **argv)
{
  if (argc < 2)
    return cli_usage_error("schedule", "expected add, list or rm");
  const char *sub = argv[1];
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 ||
      strcmp(sub, "help") == 0) {
    usage();
    return CLI_EXIT_OK;
  }
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0) {
      usage();
      return CLI_EXIT_OK;
    }
  if (strcmp(sub, "add") == 0)
    return sched_add(g, argc, argv);
  if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0)
    return sched_list(g, argc, argv);
  if (strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0)
    return sched_rm(g, argc, argv);
  return cli_usage_error("schedule",
                         "unknown subcommand %s; use add, list or rm", sub);
}
