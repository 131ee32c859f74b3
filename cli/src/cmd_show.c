/*
 * cmd_show.c: `onceq show ID`: one item in full, wherever it is: live in
 * onceq_items (ready, scheduled or running, with the session that holds
 * it), dead in onceq_dead, or acknowledged in the onceq_done history
 * (written only when history is enabled, e.g. onceq-worker --history).
 * One statement (qv_item_find, query/src/views.h), so the answer is one
 * snapshot; this file prints it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "itemids.h"
#include "views.h"

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq show ID [--json]\n"
          "  print one item in full: a live item (ready, scheduled or\n"
          "  running, with its session), a dead one, or an acknowledged one\n"
          "  from the done history (kept when the worker runs --history)\n"
          "  exit 2 when no item has that id\n");
}

/* "label:" padded to one column, then the value, escaped (oq_text_escape):
 * a queue name or a handler's error is text from outside, and a newline or
 * an escape sequence in it must not reach the terminal raw. */
static void kv(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void kv(const char *label, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *raw = n >= 0 ? malloc((size_t)n + 1) : NULL;
  char *safe = raw ? malloc((size_t)n * 6 + 1) : NULL; /* \u009B: 6 */
  printf("%-12s ", label);
  if (safe) {
    va_start(ap, fmt);
    vsnprintf(raw, (size_t)n + 1, fmt, ap);
    va_end(ap);
    oq_text_escape(safe, (size_t)n * 6 + 1, raw);
    fputs(safe, stdout);
  } else {
    fputs("(out of memory)", stdout);
  }
  free(raw);
  free(safe);
  putchar('\n');
}

static const char *or_dash(const char *s)
{
  return s && *s ? s : "-";
}

/* "2024-05-01T09:30:00Z (12s ago)" for an epoch column. */
static const char *when(const char *epoch, const char *now, char *buf,
                        size_t len)
{
  char t[32], ago[24];
  double e = cm_atof(epoch, NAN);
  if (isnan(e))
    return "-";
  snprintf(buf, len, "%s (%s)", cm_fmt_utc(t, sizeof t, e),
           cm_fmt_ago(ago, sizeof ago, cm_atof(now, NAN) - e));
  return buf;
}

static void print_human(const char *const *v)
{
  char b[96];
  const char *kind = v[QV_ITEM_KIND];
  kv("id:", "%s", v[QV_ITEM_ID]);
  if (strcmp(kind, "live") == 0)
    kv("state:", "%s (live, in onceq_items)", v[QV_ITEM_STATE]);
  else if (strcmp(kind, "dead") == 0)
    kv("state:", "dead (in onceq_dead; `onceq retry ID` runs it again)");
  else
    kv("state:", "done (acknowledged; a history row in onceq_done)");
  kv("queue:", "%s", v[QV_ITEM_QUEUE]);
  if (v[QV_ITEM_PRIO])
    kv("priority:", "%s", v[QV_ITEM_PRIO]);
  if (v[QV_ITEM_MAXATT])
    kv("attempts:", "%s of %s", v[QV_ITEM_ATT], v[QV_ITEM_MAXATT]);
  else
    kv("attempts:", "%s", or_dash(v[QV_ITEM_ATT]));
  kv("created_at:", "%s",
     when(v[QV_ITEM_CREATED_AT], v[QV_ITEM_NOW], b, sizeof b));
  if (strcmp(kind, "live") == 0) {
    kv("run_at:", "%s", when(v[QV_ITEM_RUN_AT], v[QV_ITEM_NOW], b, sizeof b));
    if (v[QV_ITEM_SESSION]) {
      kv("claimed_at:", "%s",
         when(v[QV_ITEM_CLAIMED_AT], v[QV_ITEM_NOW], b, sizeof b));
      char ago[24];
      kv("session:", "%s (host %s, pid %s, heartbeat %s)", v[QV_ITEM_SESSION],
         or_dash(v[QV_ITEM_HOST]), or_dash(v[QV_ITEM_PID]),
         cm_fmt_ago(ago, sizeof ago,
                    cm_atof(v[QV_ITEM_NOW], NAN) -
                        cm_atof(v[QV_ITEM_BEAT], NAN)));
    }
  } else if (strcmp(kind, "dead") == 0) {
    kv("died_at:", "%s", when(v[QV_ITEM_DIED_AT], v[QV_ITEM_NOW], b, sizeof b));
  } else {
    kv("done_at:", "%s", when(v[QV_ITEM_DONE_AT], v[QV_ITEM_NOW], b, sizeof b));
    kv("session:", "%s", or_dash(v[QV_ITEM_SESSION]));
    kv("result:", "%s", or_dash(v[QV_ITEM_RESULT]));
  }
  if (strcmp(kind, "done") != 0) {
    kv("unique_key:", "%s", or_dash(v[QV_ITEM_UKEY]));
    kv("last_error:", "%s", or_dash(v[QV_ITEM_ERR]));
    printf("%-12s %s\n",
           "payload:", v[QV_ITEM_PAYLOAD]); /* JSON text: escaped */
  } else {
    kv("payload:", "(not kept in the history)");
  }
}

static void print_json(const char *const *v)
{
  cm_json j;
  cm_json_init(&j, stdout);
  cm_json_obj(&j, NULL);
  cm_json_str(&j, "id", v[QV_ITEM_ID]);
  cm_json_str(&j, "where", v[QV_ITEM_KIND]);
  cm_json_str(&j, "state", v[QV_ITEM_STATE]);
  cm_json_str(&j, "queue", v[QV_ITEM_QUEUE]);
  cm_json_raw(&j, "priority", v[QV_ITEM_PRIO]);
  cm_json_raw(&j, "attempts", v[QV_ITEM_ATT]);
  cm_json_raw(&j, "max_attempts", v[QV_ITEM_MAXATT]);
  cm_json_time(&j, "created_at", cm_atof(v[QV_ITEM_CREATED_AT], NAN));
  cm_json_time(&j, "run_at", cm_atof(v[QV_ITEM_RUN_AT], NAN));
  cm_json_time(&j, "claimed_at", cm_atof(v[QV_ITEM_CLAIMED_AT], NAN));
  cm_json_time(&j, "died_at", cm_atof(v[QV_ITEM_DIED_AT], NAN));
  cm_json_time(&j, "done_at", cm_atof(v[QV_ITEM_DONE_AT], NAN));
  cm_json_str(&j, "session", v[QV_ITEM_SESSION]);
  cm_json_str(&j, "session_host", v[QV_ITEM_HOST]);
  cm_json_raw(&j, "session_pid", v[QV_ITEM_PID]);
  cm_json_str(&j, "unique_key", v[QV_ITEM_UKEY]);
  cm_json_str(&j, "last_error", v[QV_ITEM_ERR]);
  cm_json_str(&j, "result", v[QV_ITEM_RESULT]);
  cm_json_raw(&j, "payload", v[QV_ITEM_PAYLOAD]);
  cm_json_end(&j);
}

int cmd_show(const cli_globals *g, int argc, char **argv)
{
  const char *id = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      return cli_usage_error("show", "unknown option %s", argv[i]);
    } else if (id) {
      return cli_usage_error("show", "one ID at a time (got %s and %s)", id,
                             argv[i]);
    } else {
      id = argv[i];
    }
  }
  if (!id)
    return cli_usage_error("show", "give the item ID to show");
  int rc = cli_id_check("show", id, NULL);
  if (rc != CLI_EXIT_OK)
    return rc;
  oq_db *db = cli_connect(g, "show", &rc);
  if (!db)
    return rc;
  qv_rows r = {0};
  int best = -1;
  oq_err e = qv_item_find(db, id, &r, &best);
  if (e == OQ_ERR_SQL && best >= 0) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "show", "%d columns, not %d", r.ncols,
                  QV_ITEM_NCOLS);
  } else if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "show", NULL);
  } else if (best < 0) {
    rc = cli_fail(CLI_EXIT_USAGE, "show",
                  "no item %s (not live, not dead, not in the done history)",
                  id);
  } else {
    const char *row[QV_ITEM_NCOLS];
    for (int i = 0; i < QV_ITEM_NCOLS; i++)
      row[i] = qv_rows_get(&r, best, i);
    if (g->json)
      print_json(row);
    else
      print_human(row);
  }
  qv_rows_free(&r);
  oq_db_close(db);
  return rc;
}
