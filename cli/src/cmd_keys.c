/*
 * cmd_keys.c: `onceq keys [--blocked] [--queue Q] [--limit N]`: the
 * ordering keys with items (schema v5), each with its head (the one item
 * of the key a claim may take) and how many items wait behind it;
 * --blocked only the keys whose head failed and holds the rest back
 * (strict order: until it succeeds or is dead-lettered). The statement
 * and the rows are the keys view (query/src/keys_view.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "keys_view.h"

#define DEFAULT_LIMIT 50
#define MAX_LIMIT 100000

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq keys [--blocked] [--queue Q] [--limit N] [--json]\n"
          "  ordering keys with items, by queue and key: the head (the only\n"
          "  item of the key a worker may take: running, ready, retrying or\n"
          "  exhausted), its attempts, the items waiting behind it and the\n"
          "  head's last error\n"
          "  --blocked    only keys whose head failed and holds the rest back\n"
          "               until it succeeds or is dead-lettered\n"
          "  --queue Q    only queue Q (default: every queue)\n"
          "  --limit N    at most N keys (default %d)\n"
          "  --json       {\"keys\":[...],\"more\":bool}, every field\n",
          DEFAULT_LIMIT);
}

int cmd_keys(const cli_globals *g, int argc, char **argv)
{
  const char *queue = NULL, *val = NULL;
  bool blocked = false;
  long long limit = DEFAULT_LIMIT;
  static const char *const once[] = {"--queue", "--limit", "--blocked", NULL};
  int rc0 = cli_no_repeats("keys", argc, argv, once);
  if (rc0 != CLI_EXIT_OK)
    return rc0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--blocked") == 0) {
      blocked = true;
    } else if (cli_opt(argc, argv, &i, "--queue", &val)) {
      if (!val || !*val)
        return cli_usage_error("keys", "--queue needs a queue name");
      queue = val;
    } else if (cli_opt(argc, argv, &i, "--limit", &val)) {
      if (!cli_parse_int(val, 1, MAX_LIMIT, &limit))
        return cli_usage_error("keys", "--limit must be a number from 1 to %d",
                               MAX_LIMIT);
    } else {
      return cli_usage_error("keys", "unknown argument %s", argv[i]);
    }
  }

  cm_listing out;
  qv_keys_sum sum = {0};
  oq_db *db = NULL;
  int rc = qv_keys_open(&out, g->json);
  if (rc == CLI_EXIT_OK)
    db = cli_connect(g, "keys", &rc);
  if (!db)
    goto out;
  oq_err e = qv_keys_read(db, queue, blocked, (long)limit, &out, &sum);
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "keys", NULL);
    goto out;
  }
  bool more = sum.n > limit;
  if (out.json) {
    cm_listing_end_rows(&out);
    cm_json_bool(&out.j, "more", more);
    rc = cm_listing_print(&out, stdout, "keys");
  } else if (sum.n == 0) {
    printf("no %skeys%s%s\n", blocked ? "blocked " : "",
           queue ? " in queue " : "", queue ? queue : "");
  } else {
    rc = cm_listing_print(&out, stdout, "keys");
    if (rc != CLI_EXIT_OK)
      goto out;
    fflush(stdout); /* the note comes after the table, on a terminal too */
    if (more)
      fprintf(stderr,
              "onceq: keys: more than %ld keys; showing the first %ld "
              "(--limit N shows more)\n",
              (long)limit, (long)limit);
  }
out:
  oq_db_close(db);
  cm_listing_free(&out);
  return rc;
}
