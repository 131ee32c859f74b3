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
 * The statement and the rows are the items view (query/src/views.c),
 * which the status page serves as /api/dead.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "views.h"

#define DEFAULT_LIMIT 50
#define MAX_LIMIT 100000

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

int cmd_list(const cli_globals *g, int argc, char **argv)
{
  const char *queue = NULL, *val = NULL;
  int state = QV_ITEMS_ALL;
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
      for (int s = 0; val && s < QV_ITEMS_NSTATES; s++)
        if (strcmp(val, qv_item_states[s]) == 0)
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

  cm_listing out;
  long n = 0;
  oq_db *db = NULL;
  int rc = qv_items_open(&out, g->json, state);
  if (rc == CLI_EXIT_OK)
    db = cli_connect(g, "list", &rc);
  if (!db)
    goto out;
  oq_err e = qv_items_read(db, queue, state, (long)limit, &out, &n);
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "list", NULL);
    goto out;
  }
  bool more = n > limit;
  if (out.json) {
    cm_listing_end_rows(&out);
    cm_json_bool(&out.j, "more", more);
    rc = cm_listing_print(&out, stdout, "list");
  } else if (n == 0) {
    printf("no items%s%s%s%s\n", state >= 0 ? " " : "",
           state >= 0 ? qv_item_states[state] : "", queue ? " in queue " : "",
           queue ? queue : "");
  } else {
    rc = cm_listing_print(&out, stdout, "list");
    if (rc != CLI_EXIT_OK)
      goto out;
    fflush(stdout); /* the note comes after the table, on a terminal too */
    if (more)
      fprintf(stderr,
              "onceq: list: more than %ld items; showing the first %ld "
              "(--limit N shows more)\n",
              (long)limit, (long)limit);
  }
out:
  oq_db_close(db);
  cm_listing_free(&out);
  return rc;
}
