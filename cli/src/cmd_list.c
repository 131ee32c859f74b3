/*
 * cmd_list.c: `onceq list [--queue Q] [--state S] [--limit N]`: the items
 * of a queue by state, in the order an operator reads them: running
 * (longest first), ready (claim order), scheduled (soonest first), dead
 * (newest first).
 *
 * States (computed, not stored): running = claim IS NOT NULL; ready =
 * unclaimed and run_at <= now(); scheduled = unclaimed and run_at > now();
 * dead = a row of onceq_dead.
 *
 * One statement (UNION ALL of one LIMIT-ed branch per state), so the list is
 * one snapshot and each branch reads at most --limit + 1 rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "views.h"
#include "listing.h"
#include "table.h"

#define DEFAULT_LIMIT 50
#define MAX_LIMIT 100000

/* Columns of every branch, in order. The sort keys (k, a, b) put each
 * state's rows in its own order; now_s is the database's clock. */
#define LIVE_COLS                                                              \
  "id::text, queue, priority, attempts, max_attempts,"                         \
  " extract(epoch from run_at)::float8,"                                       \
  " extract(epoch from claimed_at)::float8,"                                   \
  " NULL::float8, extract(epoch from created_at)::float8,"                     \
  " extract(epoch from now())::float8, claim::text, unique_key, last_error,"   \
  " payload::text"
#define DEAD_COLS                                                              \
  "id::text, queue, priority, attempts, max_attempts, NULL::float8,"           \
  " NULL::float8, extract(epoch from died_at)::float8,"                        \
  " extract(epoch from created_at)::float8,"                                   \
  " extract(epoch from now())::float8, NULL::text, unique_key, last_error,"    \
  " payload::text"
#define QFILTER " AND ($1::text IS NULL OR queue = $1::text)"

static const char *const branch_sql[] = {
    /* running */
    "(SELECT 1 AS k, extract(epoch from claimed_at)::float8 AS a,"
    " 0::float8 AS b, 'running' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NOT NULL" QFILTER
    " ORDER BY claimed_at LIMIT $2::int)",
    /* ready */
    "(SELECT 2 AS k, -priority::float8 AS a,"
    " extract(epoch from run_at)::float8 AS b, 'ready' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NULL AND run_at <= now()" QFILTER
    " ORDER BY priority DESC, run_at LIMIT $2::int)",
    /* scheduled */
    "(SELECT 3 AS k, extract(epoch from run_at)::float8 AS a,"
    " 0::float8 AS b, 'scheduled' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NULL AND run_at > now()" QFILTER
    " ORDER BY run_at LIMIT $2::int)",
    /* dead */
    "(SELECT 4 AS k, -extract(epoch from died_at)::float8 AS a,"
    " 0::float8 AS b, 'dead' AS state, " DEAD_COLS
    " FROM onceq_dead WHERE true" QFILTER
    " ORDER BY died_at DESC LIMIT $2::int)",
};
static const char *const state_names[] = {"running", "ready", "scheduled",
                                          "dead"};
#define NSTATES 4

/* Column indexes in a result row. */
enum {
  C_K,
  C_A,
  C_B,
  C_STATE,
  C_ID,
  C_QUEUE,
  C_PRIO,
  C_ATT,
  C_MAXATT,
  C_RUN_AT,
  C_CLAIMED_AT,
  C_DIED_AT,
  C_CREATED_AT,
  C_NOW,
  C_CLAIM,
  C_UKEY,
  C_ERR,
  C_PAYLOAD,
  C_NCOLS
};

/* The table's columns; with --state dead the last one is the error. */
static const cli_listing_col item_cols[] = {
    {"ID", 0},
    {"QUEUE", CLI_COL_FLEX},
    {"STATE", 0},
    {"ATT", CLI_COL_RIGHT},
    {"PAYLOAD", CLI_COL_FLEX},
    {NULL, 0},
};
static const cli_listing_col dead_cols[] = {
    {"ID", 0},   {"QUEUE", CLI_COL_FLEX},      {"ATT", CLI_COL_RIGHT},
    {"DIED", 0}, {"LAST ERROR", CLI_COL_FLEX}, {NULL, 0},
};

typedef struct list_ctx {
  long limit;
  long n;          /* rows seen (up to limit + 1) */
  bool dead_only;  /* --state dead: the last column is the error */
  cli_listing out; /* --json: inside the "items" array */
} list_ctx;

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq list [--queue Q] [--state S] [--limit N] [--json]\n"
          "  list items: running, then ready (claim order), scheduled, dead\n"
          "  --queue Q    only queue Q (default: every queue)\n"
          "  --state S    ready|scheduled|running|dead (default: all four)\n"
          "  --limit N    at most N items (default %d)\n"
          "  --json       {\"items\":[...],\"more\":bool}, every field\n"
          "A table fits 80 columns (the terminal's width on a terminal):\n"
          "payloads are cut with \"...\"; `onceq show ID` prints one item in\n"
          "full. With --state dead the last column is the last error.\n",
          DEFAULT_LIMIT);
}

static oq_err on_row(void *ud, int ncols, const char *const *v)
{
  list_ctx *c = ud;
  if (ncols < C_NCOLS)
    return OQ_ERR_SQL;
  if (++c->n > c->limit)
    return OQ_OK; /* the extra row only says "more" */
  if (c->out.json) {
    cm_json *j = &c->out.j;
    cm_json_obj(j, NULL);
    cm_json_str(j, "id", v[C_ID]);
    cm_json_str(j, "queue", v[C_QUEUE]);
    cm_json_str(j, "state", v[C_STATE]);
    cm_json_raw(j, "priority", v[C_PRIO]);
    cm_json_raw(j, "attempts", v[C_ATT]);
    cm_json_raw(j, "max_attempts", v[C_MAXATT]);
    cli_json_time(j, "run_at", cli_num(v[C_RUN_AT]));
    cli_json_time(j, "claimed_at", cli_num(v[C_CLAIMED_AT]));
    cm_json_str(j, "session", v[C_CLAIM]);
    cli_json_time(j, "died_at", cli_num(v[C_DIED_AT]));
    cli_json_time(j, "created_at", cli_num(v[C_CREATED_AT]));
    cm_json_str(j, "unique_key", v[C_UKEY]);
    cm_json_str(j, "last_error", v[C_ERR]);
    cm_json_raw(j, "payload", v[C_PAYLOAD]);
    cm_json_end(j);
    return OQ_OK;
  }
  cli_table_cell(c->out.t, v[C_ID]);
  cli_table_cell(c->out.t, v[C_QUEUE]);
  if (c->dead_only) {
    char ago[24];
    cli_table_cellf(c->out.t, "%s/%s", v[C_ATT], v[C_MAXATT]);
    cli_table_cell(c->out.t,
                   cli_fmt_ago(cli_num(v[C_NOW]) - cli_num(v[C_DIED_AT]), ago,
                               sizeof ago));
    cli_table_cell(c->out.t, v[C_ERR]);
  } else {
    cli_table_cell(c->out.t, v[C_STATE]);
    cli_table_cellf(c->out.t, "%s/%s", v[C_ATT], v[C_MAXATT]);
    cli_table_cell(c->out.t, v[C_PAYLOAD]);
  }
  return OQ_OK;
}

int cmd_list(const cli_globals *g, int argc, char **argv)
{
  const char *queue = NULL, *val = NULL;
  int state = -1; /* index in state_names; -1: all */
  long long limit = DEFAULT_LIMIT;
  static const char *const once[] = {"--queue", "--state", "--limit", NULL};
  int rc0 = cli_no_repeats("list", argc, argv, once);
  if (rc0 != CLI_EXIT_OK)
    return rc0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (cli_opt(argc, argv, &i, "--queue", &val)) {
      if (!val || !*val)
        return cli_usage_error("list", "--queue needs a queue name");
      queue = val;
    } else if (cli_opt(argc, argv, &i, "--state", &val)) {
      state = -2;
      for (int s = 0; val && s < NSTATES; s++)
        if (strcmp(val, state_names[s]) == 0)
          state = s;
      if (state < 0)
        return cli_usage_error(
            "list",
            "--state must be ready, scheduled, running or dead (got %s)",
            val ? val : "nothing");
    } else if (cli_opt(argc, argv, &i, "--limit", &val)) {
      if (!cli_parse_int(val, 1, MAX_LIMIT, &limit))
        return cli_usage_error("list", "--limit must be a number from 1 to %d",
                               MAX_LIMIT);
    } else {
      return cli_usage_error("list", "unknown argument %s", argv[i]);
    }
  }

  /* The statement: the chosen branches (static text only). */
  char sql[4096];
  size_t off = 0;
  off += (size_t)snprintf(sql + off, sizeof sql - off, "SELECT * FROM (");
  bool first = true;
  for (int s = 0; s < NSTATES; s++) {
    if (state >= 0 && s != state)
      continue;
    off += (size_t)snprintf(sql + off, sizeof sql - off, "%s%s",
                            first ? "" : " UNION ALL ", branch_sql[s]);
    first = false;
  }
  snprintf(sql + off, sizeof sql - off, ") u ORDER BY k, a, b LIMIT $2::int");

  list_ctx c = {.limit = (long)limit, .dead_only = state == 3};
  char lim[24];
  snprintf(lim, sizeof lim, "%lld", limit + 1);
  const char *params[2] = {queue, lim};
  int rc = cli_listing_open(&c.out, g->json, "items",
                            c.dead_only ? dead_cols : item_cols, "list");
  if (rc == CLI_EXIT_OK)
    rc = cli_query(g, "list", sql, 2, params, on_row, &c);
  if (rc != CLI_EXIT_OK)
    goto out;
  bool more = c.n > c.limit;
  if (c.out.json) {
    cli_listing_end_rows(&c.out);
    cm_json_bool(&c.out.j, "more", more);
    rc = cli_listing_print(&c.out, stdout, "list");
  } else if (c.n == 0) {
    printf("no items%s%s%s%s\n", state >= 0 ? " " : "",
           state >= 0 ? state_names[state] : "", queue ? " in queue " : "",
           queue ? queue : "");
  } else {
    rc = cli_listing_print(&c.out, stdout, "list");
    if (rc != CLI_EXIT_OK)
      goto out;
    fflush(stdout); /* the note comes after the table, on a terminal too */
    if (more)
      fprintf(stderr,
              "onceq: list: more than %ld items; showing the first %ld "
              "(--limit N shows more)\n",
              c.limit, c.limit);
  }
out:
  cli_listing_free(&c.out);
  return rc;
}

int co_view_dead(FILE *f, oq_db *db, long limit)
{
  char sql[2048];
  snprintf(sql, sizeof sql,
           "SELECT * FROM (%s) u ORDER BY k, a, b LIMIT $2::int",
           branch_sql[3]);
  list_ctx c = {.limit = limit, .dead_only = true};
  char lim[24];
  snprintf(lim, sizeof lim, "%ld", limit + 1);
  const char *params[2] = {NULL, lim};
  int rc = cli_listing_open(&c.out, true, "items", dead_cols, "list");
  if (rc == CLI_EXIT_OK && oq_db_query(db, sql, 2, params, on_row, &c) != OQ_OK)
    rc = CLI_EXIT_RUNTIME;
  if (rc == CLI_EXIT_OK) {
    cli_listing_end_rows(&c.out);
    cm_json_bool(&c.out.j, "more", c.n > c.limit);
    rc = cli_listing_print(&c.out, f, "list");
  }
  cli_listing_free(&c.out);
  return rc;
}
