/*
 * cmd_wait.c: `onceq wait ID... [--timeout D] [--json]`: wait for items'
 * outcomes (oq_wait, wait.h), and cli_wait_ids, which `onceq push --wait`
 * shares.
 *
 * Output: one item acknowledged: its result on stdout as kept (a newline
 * added when it has none); several: one line each, "ID<TAB>STATE<TAB>
 * result" with the result escaped onto the line. Dead, cancelled and
 * still-pending items get one line on stderr each. --json: one object per
 * item per line: {"id", "state", "result", "truncated", "error",
 * "attempts"}.
 *
 * Exit codes (cli.h): 0 every item acknowledged; CLI_EXIT_TIMEOUT (5) some
 * item still pending when --timeout passed (or Ctrl-C); else
 * CLI_EXIT_DEAD (3) some item dead-lettered; else CLI_EXIT_CANCELLED (4)
 * some item cancelled; else 2 when some id is no item at all.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "flags.h"
#include "table.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
  (void)sig;
  interrupted = 1;
}

static bool stop_requested(void *ud)
{
  (void)ud;
  return interrupted != 0;
}

/* One result on one line: control characters escaped. */
static void print_escaped(FILE *f, const char *s)
{
  size_t cap = strlen(s) * 4 + 1;
  char *buf = malloc(cap);
  if (!buf)
    return;
  oq_text_escape(buf, cap, s);
  fputs(buf, f);
  free(buf);
}

static void print_json(cm_json *j, const oq_wait_result *r)
{
  cm_json_obj(j, NULL);
  cm_json_str(j, "id", r->id);
  cm_json_str(j, "state", oq_wait_state_name(r->state));
  cm_json_str(j, "result", r->result);
  cm_json_bool(j, "truncated", r->truncated);
  cm_json_str(j, "error", r->error);
  if (r->state == OQ_WAIT_DEAD)
    cm_json_int(j, "attempts", r->attempts);
  else
    cm_json_raw(j, "attempts", NULL);
  cm_json_end(j);
}

static void print_text(const char *cmd, const oq_wait_result *r, size_t n,
                       long timeout_ms)
{
  char msg[600] = "";
  if (r->error)
    oq_text_escape(msg, sizeof msg, r->error);
  switch (r->state) {
  case OQ_WAIT_DONE:
    if (n == 1) {
      if (r->result) {
        size_t len = strlen(r->result);
        fwrite(r->result, 1, len, stdout);
        if (len == 0 || r->result[len - 1] != '\n')
          putchar('\n');
      }
    } else {
      printf("%s\tdone\t", r->id);
      print_escaped(stdout, r->result ? r->result : "");
      putchar('\n');
    }
    if (r->truncated)
      fprintf(stderr,
              "onceq: %s: %s: the result is cut (at most %d characters are "
              "kept; --exec keeps the last and --http the first 4 KiB)\n",
              cmd, r->id, OQ_RESULT_MAX_CHARS);
    break;
  case OQ_WAIT_DEAD:
    if (n > 1)
      printf("%s\tdead\t\n", r->id);
    fprintf(stderr, "onceq: %s: %s is dead after %d attempt(s): %s\n", cmd,
            r->id, r->attempts, msg[0] ? msg : "(no error text)");
    break;
  case OQ_WAIT_CANCELLED:
    if (n > 1)
      printf("%s\tcancelled\t\n", r->id);
    fprintf(stderr, "onceq: %s: %s was cancelled (`onceq cancel`)%s%s\n", cmd,
            r->id, msg[0] ? "; its last error: " : "", msg);
    break;
  case OQ_WAIT_PENDING: {
    char d[16];
    if (n > 1)
      printf("%s\tpending\t\n", r->id);
    if (interrupted)
      fprintf(stderr, "onceq: %s: %s still pending (interrupted)\n", cmd,
              r->id);
    else
      fprintf(stderr, "onceq: %s: %s still pending after %s (--timeout)\n", cmd,
              r->id, cm_fmt_dur(d, sizeof d, (double)timeout_ms / 1000.0));
    break;
  }
  case OQ_WAIT_UNKNOWN:
    if (n > 1)
      printf("%s\tunknown\t\n", r->id);
    fprintf(stderr,
            "onceq: %s: no item %s (not live, not dead, and no kept outcome: "
            "a wrong id, its result's retention has passed, or it finished "
            "before anyone asked for its result: enqueue with keep_result)\n",
            cmd, r->id);
    break;
  }
}

/*
 * Through a connection pooler (oq_db_pooled) LISTEN cannot work on db:
 * open --listen-db (or ONCEQ_LISTEN_DATABASE_URL), a direct connection,
 * for the wake-ups; without one, say once on stderr that the wait polls
 * and how to get wake-ups back. NULL: wait on db alone.
 */
static oq_db *open_listen_db(oq_db *db, const cli_globals *g, const char *cmd)
{
  const char *direct = cm_listen_db(g->listen_db);
  if (!oq_db_pooled(db) && !direct)
    return NULL;
  if (!direct) {
    fprintf(stderr,
            "onceq: %s: the database is reached through a connection "
            "pooler, which cannot carry LISTEN/NOTIFY: polling (up to 1 s "
            "apart); give --listen-db URL (or " CM_LISTEN_DB_ENV
            ") a direct connection for wake-ups\n",
            cmd);
    return NULL;
  }
  oq_db *l = NULL;
  char err[OQ_ERRBUF_SIZE];
  oq_db_opts o = {.conninfo = direct, .application_name = "onceq-listen"};
  if (oq_db_open(&o, &l, err, sizeof err) != OQ_OK) {
    fprintf(stderr, "onceq: %s: --listen-db: %s; polling\n", cmd, err);
    return NULL;
  }
  return l;
}

int cli_wait_ids(oq_db *db, const cli_globals *g, const char *cmd,
                 const char *const *ids, size_t n, long timeout_ms)
{
  oq_wait_result *res = calloc(n ? n : 1, sizeof *res);
  if (!res)
    return cli_fail(CLI_EXIT_RUNTIME, cmd, "out of memory");
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  oq_wait_opts wo = {.timeout_ms = timeout_ms, .stop = stop_requested};
  oq_db *listen = open_listen_db(db, g, cmd);
  wo.listen = listen;
  oq_err e = oq_wait(db, ids, n, &wo, res);
  oq_db_close(listen);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  int rc = CLI_EXIT_OK;
  if (e != OQ_OK && e != OQ_ERR_TIMEOUT && e != OQ_ERR_CALLBACK) {
    rc = e == OQ_ERR_INVALID
             ? cli_fail(CLI_EXIT_USAGE, cmd, "%s", oq_db_errmsg(db))
             : cli_fail_db(db, e, cmd, NULL);
    goto out;
  }
  cm_json j;
  cm_json_init(&j, stdout);
  bool pending = false, dead = false, cancelled = false, unknown = false;
  for (size_t i = 0; i < n; i++) {
    if (g->json)
      print_json(&j, &res[i]);
    else
      print_text(cmd, &res[i], n, timeout_ms);
    pending |= res[i].state == OQ_WAIT_PENDING;
    dead |= res[i].state == OQ_WAIT_DEAD;
    cancelled |= res[i].state == OQ_WAIT_CANCELLED;
    unknown |= res[i].state == OQ_WAIT_UNKNOWN;
  }
  fflush(stdout);
  rc = pending     ? CLI_EXIT_TIMEOUT
       : dead      ? CLI_EXIT_DEAD
       : cancelled ? CLI_EXIT_CANCELLED
       : unknown   ? CLI_EXIT_USAGE
                   : CLI_EXIT_OK;
out:
  oq_wait_results_free(res, n);
  free(res);
  return rc;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq wait ID... [--timeout D] [--json]\n"
          "  wait until each item is acknowledged, dead-lettered or\n"
          "  cancelled (a live item is asked to keep its result). One item\n"
          "  acknowledged: its result on stdout; several: \"ID<TAB>STATE<TAB>"
          "RESULT\"\n"
          "  lines. --timeout D (250ms, 5s, 2m, 1h): give up after D\n"
          "  (default: no limit).\n"
          "exit codes: 0 all acknowledged, 3 dead-lettered, 4 cancelled,\n"
          "  5 still pending at --timeout (or interrupted), 2 no such item\n"
          "  or bad usage, 1 runtime failure\n");
}

int cmd_wait(const cli_globals *g, int argc, char **argv)
{
  const char **ids = calloc((size_t)argc + 1, sizeof *ids);
  size_t n = 0;
  long timeout_ms = -1;
  int rc = CLI_EXIT_OK;
  const char *val = NULL;
  if (!ids)
    return cli_fail(CLI_EXIT_RUNTIME, "wait", "out of memory");
  static const char *const once[] = {"--timeout", NULL};
  rc = cli_no_repeats("wait", argc, argv, once);
  if (rc != CLI_EXIT_OK) {
    free(ids);
    return rc;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      goto out;
    } else if (cli_opt(argc, argv, &i, "--timeout", &val)) {
      int64_t ms = 0;
      if (!val || oq_duration_parse(val, &ms) != OQ_OK || ms <= 0) {
        rc = cli_usage_error("wait",
                             "--timeout must be a duration above zero like "
                             "250ms, 5s, 2m or 1h (got %s)",
                             val ? val : "nothing");
        goto out;
      }
      timeout_ms = (long)ms;
    } else if (a[0] == '-') {
      rc = cli_usage_error("wait", "unknown option %s", a);
      goto out;
    } else if (!cli_is_uuid(a)) {
      rc = cli_usage_error("wait",
                           "%.80s is not an item id (a UUID such as "
                           "2d2daced-df73-46ab-84ba-7fe5e2a051ab)",
                           a);
      goto out;
    } else {
      ids[n++] = a;
    }
  }
  if (n == 0) {
    rc = cli_usage_error("wait", "give the ID of each item to wait for");
    goto out;
  }
  oq_db *db = cli_connect(g, "wait", &rc);
  if (!db)
    goto out;
  rc = cli_wait_ids(db, g, "wait", ids, n, timeout_ms);
  oq_db_close(db);
out:
  free(ids);
  return rc;
}
