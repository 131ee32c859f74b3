/*
 * cmd_show.c: `onceq show ID`: one item in full, wherever it is: live in
 * onceq_items (ready, scheduled or running, with the session that holds
 * it), dead in onceq_dead, or acknowledged in the onceq_done history
 * (written only when history is enabled, e.g. onceq-worker --history).
 * One statement, so the answer is one snapshot.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rows.h"
#include "itemids.h"

static const char show_sql[] =
    "SELECT 'live', CASE WHEN i.claim IS NOT NULL THEN 'running'"
    " WHEN i.run_at > now() THEN 'scheduled' ELSE 'ready' END,"
    " i.id::text, i.queue, i.priority, i.attempts, i.max_attempts,"
    " extract(epoch from i.run_at)::float8,"
    " extract(epoch from i.claimed_at)::float8, NULL::float8, NULL::float8,"
    " extract(epoch from i.created_at)::float8,"
    " extract(epoch from now())::float8, i.claim::text, s.hostname,"
    " s.pid::text, extract(epoch from s.heartbeated_at)::float8,"
    " i.unique_key, i.last_error, NULL::text, i.payload::text"
    " FROM onceq_items i LEFT JOIN onceq_sessions s ON s.id = i.claim"
    " WHERE i.id = $1::uuid"
    " UNION ALL "
    "SELECT 'dead', 'dead', id::text, queue, priority, attempts, max_attempts,"
    " NULL, NULL, extract(epoch from died_at)::float8, NULL,"
    " extract(epoch from created_at)::float8, extract(epoch from "
    "now())::float8,"
    " NULL, NULL, NULL, NULL, unique_key, last_error, NULL, payload::text"
    " FROM onceq_dead WHERE id = $1::uuid"
    " UNION ALL "
    "SELECT 'done', 'done', item_id::text, queue, NULL, attempts, NULL, NULL,"
    " NULL, NULL, extract(epoch from done_at)::float8,"
    " extract(epoch from created_at)::float8, extract(epoch from "
    "now())::float8,"
    " session_id::text, NULL, NULL, NULL, NULL, NULL, result, NULL"
    " FROM onceq_done WHERE item_id = $1::uuid";

enum {
  C_KIND,
  C_STATE,
  C_ID,
  C_QUEUE,
  C_PRIO,
  C_ATT,
  C_MAXATT,
  C_RUN_AT,
  C_CLAIMED_AT,
  C_DIED_AT,
  C_DONE_AT,
  C_CREATED_AT,
  C_NOW,
  C_SESSION,
  C_HOST,
  C_PID,
  C_BEAT,
  C_UKEY,
  C_ERR,
  C_RESULT,
  C_PAYLOAD,
  C_NCOLS
};

static int kind_rank(const char *kind)
{
  if (!kind)
    return 0;
  return strcmp(kind, "live") == 0 ? 3 : strcmp(kind, "dead") == 0 ? 2 : 1;
}

/* The row to show: live wins over dead over done; -1 when there is none. */
static int best_row(const co_rows *r)
{
  int best = -1, best_rank = 0;
  for (int i = 0; i < r->nrows; i++) {
    int rank = kind_rank(co_rows_get(r, i, C_KIND));
    if (rank > best_rank) {
      best = i;
      best_rank = rank;
    }
  }
  return best;
}

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
  const char *kind = v[C_KIND];
  kv("id:", "%s", v[C_ID]);
  if (strcmp(kind, "live") == 0)
    kv("state:", "%s (live, in onceq_items)", v[C_STATE]);
  else if (strcmp(kind, "dead") == 0)
    kv("state:", "dead (in onceq_dead; `onceq retry ID` runs it again)");
  else
    kv("state:", "done (acknowledged; a history row in onceq_done)");
  kv("queue:", "%s", v[C_QUEUE]);
  if (v[C_PRIO])
    kv("priority:", "%s", v[C_PRIO]);
  if (v[C_MAXATT])
    kv("attempts:", "%s of %s", v[C_ATT], v[C_MAXATT]);
  else
    kv("attempts:", "%s", or_dash(v[C_ATT]));
  kv("created_at:", "%s", when(v[C_CREATED_AT], v[C_NOW], b, sizeof b));
  if (strcmp(kind, "live") == 0) {
    kv("run_at:", "%s", when(v[C_RUN_AT], v[C_NOW], b, sizeof b));
    if (v[C_SESSION]) {
      kv("claimed_at:", "%s", when(v[C_CLAIMED_AT], v[C_NOW], b, sizeof b));
      char ago[24];
      kv("session:", "%s (host %s, pid %s, heartbeat %s)", v[C_SESSION],
         or_dash(v[C_HOST]), or_dash(v[C_PID]),
         cm_fmt_ago(ago, sizeof ago,
                    cm_atof(v[C_NOW], NAN) - cm_atof(v[C_BEAT], NAN)));
    }
  } else if (strcmp(kind, "dead") == 0) {
    kv("died_at:", "%s", when(v[C_DIED_AT], v[C_NOW], b, sizeof b));
  } else {
    kv("done_at:", "%s", when(v[C_DONE_AT], v[C_NOW], b, sizeof b));
    kv("session:", "%s", or_dash(v[C_SESSION]));
    kv("result:", "%s", or_dash(v[C_RESULT]));
  }
  if (strcmp(kind, "done") != 0) {
    kv("unique_key:", "%s", or_dash(v[C_UKEY]));
    kv("last_error:", "%s", or_dash(v[C_ERR]));
    printf("%-12s %s\n", "payload:", v[C_PAYLOAD]); /* JSON text: escaped */
  } else {
    kv("payload:", "(not kept in the history)");
  }
}

static void print_json(const char *const *v)
{
  cm_json j;
  cm_json_init(&j, stdout);
  cm_json_obj(&j, NULL);
  cm_json_str(&j, "id", v[C_ID]);
  cm_json_str(&j, "where", v[C_KIND]);
  cm_json_str(&j, "state", v[C_STATE]);
  cm_json_str(&j, "queue", v[C_QUEUE]);
  cm_json_raw(&j, "priority", v[C_PRIO]);
  cm_json_raw(&j, "attempts", v[C_ATT]);
  cm_json_raw(&j, "max_attempts", v[C_MAXATT]);
  cm_json_time(&j, "created_at", cm_atof(v[C_CREATED_AT], NAN));
  cm_json_time(&j, "run_at", cm_atof(v[C_RUN_AT], NAN));
  cm_json_time(&j, "claimed_at", cm_atof(v[C_CLAIMED_AT], NAN));
  cm_json_time(&j, "died_at", cm_atof(v[C_DIED_AT], NAN));
  cm_json_time(&j, "done_at", cm_atof(v[C_DONE_AT], NAN));
  cm_json_str(&j, "session", v[C_SESSION]);
  cm_json_str(&j, "session_host", v[C_HOST]);
  cm_json_raw(&j, "session_pid", v[C_PID]);
  cm_json_str(&j, "unique_key", v[C_UKEY]);
  cm_json_str(&j, "last_error", v[C_ERR]);
  cm_json_str(&j, "result", v[C_RESULT]);
  cm_json_raw(&j, "payload", v[C_PAYLOAD]);
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
  co_rows r = {0};
  const char *params[1] = {id};
  oq_err e = co_query(db, show_sql, 1, params, &r);
  int best = e == OQ_OK ? best_row(&r) : -1;
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "show", NULL);
  } else if (best >= 0 && r.ncols < C_NCOLS) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "show", "%d columns, not %d", r.ncols,
                  C_NCOLS);
  } else if (best < 0) {
    rc = cli_fail(CLI_EXIT_USAGE, "show",
                  "no item %s (not live, not dead, not in the done history)",
                  id);
  } else {
    const char *row[C_NCOLS];
    for (int i = 0; i < C_NCOLS; i++)
      row[i] = co_rows_get(&r, best, i);
    if (g->json)
      print_json(row);
    else
      print_human(row);
  }
  co_rows_free(&r);
  oq_db_close(db);
  return rc;
}
