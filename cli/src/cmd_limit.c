/*
 * cmd_limit.c: `onceq limit QUEUE --concurrency N|none`: a queue's
 * fleet-wide concurrency limit (oq_queue_set_limits, onceq/queues.h): at
 * most N of its items claimed at once across every worker, counted in the
 * database by the claim itself. `none` removes it. With no option it
 * shows the queue's controls (oq_queue_controls_get): both limits and
 * whether it is paused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct limit_ctx {
  const char *queue;
  int max_running; /* < 0: none; -2: not given */
  bool rate_given;
  int rate_n; /* 0: none */
  int64_t rate_ms;
  const char *rate_text;
} limit_ctx;

/* The transaction body; may run again on a restart. */
static oq_err limit_tx(oq_db *db, void *ud)
{
  limit_ctx *c = ud;
  oq_err e = OQ_OK;
  if (c->max_running != -2)
    e = oq_queue_set_limits(db, c->queue, c->max_running);
  if (e == OQ_OK && c->rate_given)
    e = oq_queue_set_rate(db, c->queue, c->rate_n, c->rate_ms);
  return e;
}

/* "N/D": N starts per duration D ("10/1s", "600/1m"); false if not. */
static bool parse_rate(const char *s, int *n, int64_t *ms)
{
  const char *slash = strchr(s, '/');
  char num[16];
  long long v = 0;
  if (!slash || slash == s || (size_t)(slash - s) >= sizeof num)
    return false;
  memcpy(num, s, (size_t)(slash - s));
  num[slash - s] = '\0';
  if (!cli_parse_int(num, 1, 1000000000, &v))
    return false;
  if (oq_duration_parse(slash + 1, ms) != OQ_OK || *ms <= 0)
    return false;
  *n = (int)v;
  return true;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq limit QUEUE [--concurrency N|none] [--rate N/D|none]"
          " [--json]\n"
          "  without an option: show QUEUE's limits and whether it is\n"
          "  paused\n"
          "  at most N items of QUEUE claimed at once across every worker\n"
          "  and process (0 stops new claims like a pause); `none` removes\n"
          "  the limit. Items of a crashed worker count until its session\n"
          "  is reaped. A lower limit takes nothing away from running\n"
          "  items: claims wait until fewer than N run.\n"
          "  --rate N/D: at most N starts per duration D across the fleet\n"
          "  (10/1s, 600/1m), a token bucket: up to N at once after a quiet\n"
          "  spell, N per D in the long run; `none` removes it.\n");
}

/* "1500ms" -> "1500ms", 60000 -> "1m": the largest unit that divides. */
static void fmt_interval(char *buf, size_t len, int64_t ms)
{
  if (ms > 0 && ms % 3600000 == 0)
    snprintf(buf, len, "%lldh", (long long)(ms / 3600000));
  else if (ms > 0 && ms % 60000 == 0)
    snprintf(buf, len, "%lldm", (long long)(ms / 60000));
  else if (ms > 0 && ms % 1000 == 0)
    snprintf(buf, len, "%llds", (long long)(ms / 1000));
  else
    snprintf(buf, len, "%lldms", (long long)ms);
}

/* `onceq limit QUEUE`: the queue's controls as stored now. */
static int show(const cli_globals *g, const char *queue)
{
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "limit", &rc);
  if (!db)
    return rc;
  oq_queue_controls qc;
  oq_err e = oq_queue_controls_get(db, queue, &qc);
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "limit", "nothing shown");
    goto out;
  }
  char every[32];
  fmt_interval(every, sizeof every, qc.rate_interval_ms);
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "queue", queue);
    cm_json_bool(&j, "paused", qc.paused);
    if (qc.max_running >= 0)
      cm_json_int(&j, "concurrency", qc.max_running);
    else
      cm_json_raw(&j, "concurrency", NULL);
    if (qc.rate_limit > 0) {
      cm_json_int(&j, "rate", qc.rate_limit);
      cm_json_int(&j, "rate_interval_ms", qc.rate_interval_ms);
    } else {
      cm_json_raw(&j, "rate", NULL);
      cm_json_raw(&j, "rate_interval_ms", NULL);
    }
    cm_json_end(&j);
    goto out;
  }
  if (qc.max_running >= 0)
    printf("queue %s: at most %d item%s claimed at once\n", queue,
           qc.max_running, qc.max_running == 1 ? "" : "s");
  else
    printf("queue %s: no concurrency limit\n", queue);
  if (qc.rate_limit > 0)
    printf("queue %s: at most %d start%s per %s\n", queue, qc.rate_limit,
           qc.rate_limit == 1 ? "" : "s", every);
  else
    printf("queue %s: no rate limit\n", queue);
  printf("queue %s: %s\n", queue, qc.paused ? "paused" : "not paused");
out:
  oq_db_close(db);
  return rc;
}

int cmd_limit(const cli_globals *g, int argc, char **argv)
{
  static const char *const once[] = {"--concurrency", "--rate", NULL};
  int rc = cli_no_repeats("limit", argc, argv, once);
  if (rc != CLI_EXIT_OK)
    return rc;
  limit_ctx c = {.max_running = -2};
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
    } else if (cli_opt(argc, argv, &i, "--rate", &val)) {
      if (!val)
        return cli_usage_error("limit", "--rate needs a value (N/DURATION, "
                                        "e.g. 10/1s, or none)");
      c.rate_given = true;
      c.rate_text = val;
      if (strcmp(val, "none") != 0 && !parse_rate(val, &c.rate_n, &c.rate_ms))
        return cli_usage_error("limit",
                               "--rate %s: give N/DURATION (N from 1 to "
                               "1000000000, e.g. 10/1s or 600/1m), or none",
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
  if (c.max_running == -2 && !c.rate_given)
    return show(g, c.queue);
  rc = cli_transact(g, "limit", limit_tx, &c, "nothing changed");
  if (rc != CLI_EXIT_OK)
    return rc;
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "queue", c.queue);
    if (c.max_running >= 0)
      cm_json_int(&j, "concurrency", c.max_running);
    else if (c.max_running == -1)
      cm_json_raw(&j, "concurrency", NULL);
    if (c.rate_given && c.rate_n > 0) {
      cm_json_int(&j, "rate", c.rate_n);
      cm_json_int(&j, "rate_interval_ms", c.rate_ms);
    } else if (c.rate_given) {
      cm_json_raw(&j, "rate", NULL);
    }
    cm_json_end(&j);
    return CLI_EXIT_OK;
  }
  if (c.max_running == -1)
    printf("queue %s: no concurrency limit\n", c.queue);
  else if (c.max_running >= 0)
    printf("queue %s: at most %d item%s claimed at once\n", c.queue,
           c.max_running, c.max_running == 1 ? "" : "s");
  if (c.rate_given && c.rate_n > 0)
    printf("queue %s: at most %d start%s per %s\n", c.queue, c.rate_n,
           c.rate_n == 1 ? "" : "s", strchr(c.rate_text, '/') + 1);
  else if (c.rate_given)
    printf("queue %s: no rate limit\n", c.queue);
  return CLI_EXIT_OK;
}
