/*
 * cmd_pause.c: `onceq pause QUEUE...` and `onceq resume QUEUE...`
 * (oq_queue_pause / oq_queue_resume, onceq/queues.h): claims skip a paused
 * queue from every worker's next claim on; items in flight finish and
 * enqueue still works. One transaction for all the queues named, so a
 * pause of several queues is all or nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct pause_ctx {
  char **queues;
  int n;
  bool pause;
} pause_ctx;

/* The transaction body; may run again on a restart. */
static oq_err pause_tx(oq_db *db, void *ud)
{
  pause_ctx *c = ud;
  oq_err e = OQ_OK;
  for (int k = 0; k < c->n && e == OQ_OK; k++)
    e = c->pause ? oq_queue_pause(db, c->queues[k])
                 : oq_queue_resume(db, c->queues[k]);
  return e;
}

static void usage(FILE *out, bool pause)
{
  if (pause)
    fprintf(out,
            "usage: onceq pause QUEUE... [--json]\n"
            "  stop claims of each QUEUE, fleet-wide, from every worker's\n"
            "  next claim on (within one poll interval). Items already\n"
            "  running finish and are acknowledged as usual; enqueue still\n"
            "  works (new items wait, ready). Idempotent. `onceq resume`\n"
            "  undoes it; `onceq stats` marks paused queues.\n");
  else
    fprintf(out, "usage: onceq resume QUEUE... [--json]\n"
                 "  let workers claim each paused QUEUE again (from their\n"
                 "  next claim on). Idempotent: resuming a queue that is not\n"
                 "  paused is no error.\n");
}

static int run(const cli_globals *g, int argc, char **argv, bool pause)
{
  const char *cmd = pause ? "pause" : "resume";
  pause_ctx c = {.queues = argv + 1, .n = 0, .pause = pause};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, pause);
      return CLI_EXIT_OK;
    }
    if (argv[i][0] == '-')
      return cli_usage_error(cmd, "unknown option %s", argv[i]);
    if (!argv[i][0])
      return cli_usage_error(cmd, "a queue name may not be empty");
  }
  c.n = argc - 1;
  if (c.n == 0)
    return cli_usage_error(cmd, "give the name of each queue to %s", cmd);
  int rc = cli_transact(g, cmd, pause_tx, &c,
                        pause ? "nothing paused" : "nothing resumed");
  if (rc != CLI_EXIT_OK)
    return rc;
  for (int k = 0; k < c.n; k++) {
    if (g->json) {
      cm_json j;
      cm_json_init(&j, stdout);
      cm_json_obj(&j, NULL);
      cm_json_str(&j, "queue", c.queues[k]);
      cm_json_bool(&j, "paused", pause);
      cm_json_end(&j);
    } else {
      printf("queue %s %s\n", c.queues[k], pause ? "paused" : "resumed");
    }
  }
  return CLI_EXIT_OK;
}

int cmd_pause(const cli_globals *g, int argc, char **argv)
{
  return run(g, argc, argv, true);
}

int cmd_resume(const cli_globals *g, int argc, char **argv)
{
  return run(g, argc, argv, false);
}
