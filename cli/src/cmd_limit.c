/*
 * cmd_limit.c: `onceq limit QUEUE --concurrency N|none`: a queue's
 * fleet-wide concurrency limit (oq_queue_set_limits, onceq/queues.h): at
 * most N of its items claimed at once across every worker, counted in the
 * database by the claim itself. `none` removes it.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct limit_ctx {
  const char *queue;
  int max_running; /* < 0: none */
} limit_ctx;

/* The transaction body; may run again on a restart. */
static oq_err limit_tx(oq_db *db, void *ud)
{
  limit_ctx *c = ud;
  return oq_queue_set_limits(db, c->queue, c->max_running);
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq limit QUEUE --concurrency N|none [--json]\n"
          "  at most N items of QUEUE claimed at once across every worker\n"
          "  and process (0 stops new claims like a pause); `none` removes\n"
          "  the limit. Items of a crashed worker count until its session\n"
          "  is reaped. A lower limit takes nothing away from running\n"
          "  items: claims wait until fewer than N run.\n");
}

int cmd_limit(const cli_globals *g, int argc, char **argv)
{
  static const char *const once[] = {"--concurrency", NULL};
  int rc = cli_no_repeats("limit", argc, argv, once);
  if (rc != CLI_EXIT_OK)
    return rc;
  limit_ctx c = {NULL, -2};
  for (int i = 1; i < argc; i++) {
    const char *val = NULL;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--concurrency", &val)) {
      long long n = 0;
      if (!val)
        return cli_usage_error("limit", "--concurrency needs a value (a "
                                        "whole number, or none)");
      if (strcmp(val, "none") == 0)
        c.max_running = -1;
      else if (cli_parse_int(val, 0, 1000000000, &n))
        c.max_running = (int)n;
      else
        return cli_usage_error("limit",
                               "--concurrency %s: give a whole number from 0 "
                               "to 1000000000, or none",
                               val);
    } else if (argv[i][0] == '-') {
      return cli_usage_error("limit", "unknown option %s", argv[i]);
    } else if (c.queue) {
      return cli_usage_error("limit", "give one queue (%s and %s)", c.queue,
                             argv[i]);
    } else if (!argv[i][0]) {
      return cli_usage_error("limit", "a queue name may not be empty");
    } else {
      c.queue = argv[i];
    }
  }
  if (!c.queue)
    return cli_usage_error("limit", "give the queue to limit");
  if (c.max_running == -2)
    return cli_usage_error("limit", "give --concurrency N or --concurrency "
                                    "none");
  rc = cli_transact(g, "limit", limit_tx, &c, "nothing changed");
  if (rc != CLI_EXIT_OK)
    return rc;
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "queue", c.queue);
    if (c.max_running < 0)
      cm_json_raw(&j, "concurrency", NULL);
    else
      cm_json_int(&j, "concurrency", c.max_running);
    cm_json_end(&j);
  } else if (c.max_running < 0) {
    printf("queue %s: no concurrency limit\n", c.queue);
  } else {
    printf("queue %s: at most %d item%s claimed at once\n", c.queue,
           c.max_running, c.max_running == 1 ? "" : "s");
  }
  return CLI_EXIT_OK;
}
