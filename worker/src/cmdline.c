/*
 * cmdline.c: onceq-worker flags (cmdline.h). One declarative table names
 * every flag, its kind and where it lands; the parser walks it, and the
 * handler table (handler.h) adds the handler flags. --exec takes the rest
 * of the command line, so it must come last.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "executor.h"
#include "flags.h"
#include "handler.h"
#include "handler_exec.h"
#include "onceq/onceq.h"

#define O(f) offsetof(wk_config, f)
static const cm_opt opts[] = {
    {"--concurrency", CM_OPT_INT, O(concurrency), "N", "executor threads (4)"},
    {"--batch", CM_OPT_INT, O(batch), "N",
     "ceiling on items per claim and per --sql ack (1000)"},
    {"--max-held-mib", CM_OPT_INT, O(max_held_mib), "N",
     "payload MiB held at most (claimed, not yet settled) (64)"},
    {"--heartbeat-interval", CM_OPT_DURATION, O(heartbeat_interval_ms), "D",
     "heartbeat period (1s)"},
    {"--session-expiry", CM_OPT_DURATION, O(session_expiry_ms), "D",
     "reaped after this long without heartbeat (5s)"},
    {"--poll-interval", CM_OPT_DURATION, O(poll_interval_ms), "D",
     "poll period (1s PostgreSQL with NOTIFY, 150ms CockroachDB)"},
    {"--timeout", CM_OPT_DURATION, O(timeout_ms), "D",
     "per-item handler timeout (exec: none, http: 30s)"},
    {"--kill-grace", CM_OPT_DURATION, O(kill_grace_ms), "D",
     "SIGTERM to SIGKILL delay for --exec children (5s)"},
    {"--shutdown-timeout", CM_OPT_DURATION, O(shutdown_timeout_ms), "D",
     "how long a drain waits for in-flight work (30s)"},
    {"--retry-base", CM_OPT_DURATION, O(retry_base_ms), "D",
     "first retry delay after a failed attempt, doubling (1s)"},
    {"--metrics-addr", CM_OPT_STRING, O(metrics_addr), "ADDR",
     "serve /metrics and /healthz on HOST:PORT (127.0.0.1)"},
    {"--drain", CM_OPT_FLAG, O(drain), "", "exit 0 once no ready item is left"},
    {"--history", CM_OPT_FLAG, O(history), "",
     "keep onceq_done rows of acked items"},
    {"--sql-per-item", CM_OPT_FLAG, O(sql_per_item), "",
     "--sql: one transaction per item (default: up to --batch per "
     "transaction)"},
    {"--insecure", CM_OPT_FLAG, O(insecure), "",
     "--http: skip TLS verification"},
    {"--partitioned", CM_OPT_FLAG, O(partitioned), "",
     "claim only in this session's parts (see `onceq parts`)"},
    {"--orphan-after", CM_OPT_DURATION, O(orphan_after_ms), "D",
     "also claim items ready this long in unowned parts (30s)"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char usage_options[] =
    "options:\n" CM_FLAGS_HELP_DB CM_FLAGS_HELP_LISTEN_DB
    "  --queue Q            queue to work (repeatable; default: "
    "default)\n"
    "  --env NAME[=VALUE]   --exec children get NAME: the worker's value, or\n"
    "                       VALUE (repeatable, before --exec). Else they get\n"
    "                       only PATH HOME USER LOGNAME SHELL TERM LANG\n"
    "                       LANGUAGE LC_* TZ TMPDIR of the worker's and the\n"
    "                       item's ONCEQ_ITEM_ID ONCEQ_QUEUE "
    "ONCEQ_ATTEMPT\n" CM_FLAGS_HELP_LOG;

/* The handler kinds' flags (handler.h) joined for a message: "--exec,
 * --http, --sql" (sep ", ", last ", "), or "--exec CMD, --http URL or --sql
 * STATEMENT" (brief); children picks the kinds that start children or
 * those that do not, -1 all of them. */
static void join_handlers(char *out, size_t outlen, bool brief, int children,
                          const char *last)
{
  size_t pos = 0, n = 0, total = 0;
  for (size_t i = 0; i < wk_nhandlers; i++)
    total += children < 0 || wk_handlers[i]->children == (children > 0);
  out[0] = '\0';
  for (size_t i = 0; i < wk_nhandlers; i++) {
    const wk_handler *h = wk_handlers[i];
    if (children >= 0 && h->children != (children > 0))
      continue;
    const char *sep = n == 0 ? "" : n + 1 == total ? last : ", ";
    int k = snprintf(out + pos, pos < outlen ? outlen - pos : 0, "%s%s", sep,
                     brief ? h->brief : h->flag);
    pos += k > 0 ? (size_t)k : 0;
    n++;
  }
}

static void print_usage(void)
{
  fputs("usage: onceq-worker [--db URL] [--queue Q ...] [OPTIONS]\n"
        "                    (",
        stdout);
  for (size_t i = 0; i < wk_nhandlers; i++)
    printf("%s%s", i ? " | " : "", wk_handlers[i]->synopsis);
  fputs(")\n\nhandlers (exactly one):\n", stdout);
  for (size_t i = 0; i < wk_nhandlers; i++)
    printf("  %-20s %s\n", wk_handlers[i]->synopsis, wk_handlers[i]->help);
  fputs("\n", stdout);
  fputs(usage_options, stdout);
  cm_opt_print_help(stdout, opts, NOPTS, 20);
  fputs("\n" CM_FLAGS_HELP_DURATIONS
        "exit codes: 0 done or drained, 1 runtime failure, 2 bad usage\n",
        stdout);
}

static int bad(char *err, size_t errlen, const char *fmt, const char *a,
               const char *b)
{
  snprintf(err, errlen, fmt, a, b ? b : "");
  return -1;
}

static int set_handler(wk_config *cfg, const wk_handler *h, const char *flag,
                       char *err, size_t errlen)
{
  if (cfg->handler) {
    char all[256];
    join_handlers(all, sizeof all, false, -1, ", ");
    return bad(err, errlen,
               "more than one handler given (%s and another); choose one "
               "of %s",
               flag, all);
  }
  cfg->handler = h;
  return 0;
}

/*
 * --env SPEC: NAME or NAME=VALUE, NAME a portable variable name that the
 * worker does not set itself. A VALUE may be a secret: it is copied and
 * masked in argv (ps shows NAME=***), and never echoed in an error.
 */
static int add_env(wk_config *cfg, char *val, char *err, size_t errlen)
{
  char *eq = strchr(val, '=');
  size_t n = eq ? (size_t)(eq - val) : strlen(val);
  char name[65];
  snprintf(name, sizeof name, "%.*s", (int)(n < 64 ? n : 64), val);
  bool ok = n > 0 && !(val[0] >= '0' && val[0] <= '9');
  for (size_t k = 0; ok && k < n; k++) {
    char ch = val[k];
    ok = ch == '_' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
         (ch >= '0' && ch <= '9');
  }
  if (!ok)
    return bad(err, errlen,
               "--env %s: a variable name is letters, digits and _, not "
               "starting with a digit; write --env NAME or --env "
               "NAME=VALUE%s",
               n ? name : "=...", NULL);
  if (wk_exec_env_is_item_name(val, n))
    return bad(err, errlen,
               "--env %s: the worker sets %s for each item; choose another "
               "name",
               name, name);
  if (cfg->nenv >= WK_MAX_ENV)
    return bad(err, errlen, "too many --env flags (max 64)%s%s", "", NULL);
  char *copy = strdup(val);
  if (!copy)
    return bad(err, errlen, "out of memory%s%s", "", NULL);
  cfg->env[cfg->nenv++] = copy;
  if (eq && eq[1]) {
    /* out of ps: NAME=*** (the rest of the old value's bytes zeroed) */
    size_t vlen = strlen(eq + 1);
    memset(eq + 1, 0, vlen);
    memcpy(eq + 1, "***", vlen < 3 ? vlen : 3);
  }
  return 0;
}

int wk_config_parse(int argc, char **argv, wk_config *cfg, char *err,
                    size_t errlen)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->concurrency = 4;
  cfg->batch = 1000;
  cfg->max_held_mib = WK_DEFAULT_MAX_HELD_MIB;
  cfg->heartbeat_interval_ms = 1000;
  cfg->session_expiry_ms = 5000;
  cfg->kill_grace_ms = 5000;
  cfg->shutdown_timeout_ms = 30000;
  cfg->retry_base_ms = 1000;
  cfg->orphan_after_ms = 30000;
  cfg->log_level = OQ_LOG_INFO;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    /* "--name=value" is "--name value": a holds the name, val the value */
    char name[64];
    char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    bool inline_val = eq != NULL;
    if (inline_val) {
      size_t n = (size_t)(eq - a);
      if (n >= sizeof name)
        n = sizeof name - 1;
      memcpy(name, a, n);
      name[n] = '\0';
      if (strcmp(name, "--db") == 0 &&
          cm_flag_db(eq + 1, &cfg->db, err, errlen) != 0)
        return -1;
      if (strcmp(name, "--listen-db") == 0 &&
          cm_flag_listen_db(eq + 1, &cfg->listen_db, err, errlen) != 0)
        return -1;
      val = eq + 1;
      a = name;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      print_usage();
      return 1;
    }
    if (strcmp(a, "--version") == 0) {
      printf("onceq-worker %s\n", oq_version());
      return 1;
    }
    /* a handler whose flag takes the rest of the line (--exec) */
    const wk_handler *h = wk_handler_for_arg(a);
    if (h && h->takes_rest) {
      if (set_handler(cfg, h, a, err, errlen) ||
          h->parse(cfg, argc, argv, i, (char *)val, inline_val, err, errlen))
        return -1;
      break; /* the rest of the line is its own */
    }
    /* everything below takes one value */
    int takes_value =
        h || strcmp(a, "--db") == 0 || strcmp(a, "--listen-db") == 0 ||
        strcmp(a, "--queue") == 0 || strcmp(a, "--env") == 0 ||
        strcmp(a, "--log-level") == 0 || strcmp(a, "--log-format") == 0;
    const cm_opt *o = cm_opt_find(opts, NOPTS, a, NULL);
    if (!takes_value && !o) {
      if (a[0] != '-')
        return bad(err, errlen,
                   "unexpected argument %s (options start with --; the "
                   "database goes in --db URL); see onceq-worker --help%s",
                   a, NULL);
      return bad(err, errlen, "unknown option %s; see onceq-worker --help%s", a,
                 NULL);
    }
    if (o && o->kind == CM_OPT_FLAG && inline_val)
      return bad(err, errlen, "%s takes no value (got %s=...)", a, a);
    if ((takes_value || (o && o->kind != CM_OPT_FLAG)) && !val)
      return bad(err, errlen, "%s needs a value; see onceq-worker --help%s", a,
                 NULL);
    if (strcmp(a, "--db") == 0) {
      if (!inline_val && cm_flag_db(argv[i + 1], &cfg->db, err, errlen) != 0)
        return -1;
    } else if (strcmp(a, "--listen-db") == 0) {
      if (!inline_val &&
          cm_flag_listen_db(argv[i + 1], &cfg->listen_db, err, errlen) != 0)
        return -1;
    } else if (strcmp(a, "--queue") == 0) {
      if (cfg->nqueues >= WK_MAX_QUEUES)
        return bad(err, errlen, "too many --queue flags (max 64)%s%s", "",
                   NULL);
      if (!*val)
        return bad(err, errlen, "--queue needs a non-empty name%s%s", "", NULL);
      cfg->queues[cfg->nqueues++] = val;
    } else if (strcmp(a, "--env") == 0) {
      if (add_env(cfg, (char *)val, err, errlen) != 0)
        return -1;
    } else if (h) {
      if (set_handler(cfg, h, a, err, errlen) ||
          h->parse(cfg, argc, argv, i, (char *)val, inline_val, err, errlen))
        return -1;
    } else if (strcmp(a, "--log-level") == 0) {
      if (cm_flag_log_level(val, &cfg->log_level, err, errlen) != 0)
        return -1;
    } else if (strcmp(a, "--log-format") == 0) {
      if (cm_flag_log_format(val, &cfg->log_json, err, errlen) != 0)
        return -1;
    } else {
      if (cm_opt_set(o, val, cfg, err, errlen) != 0)
        return -1;
      if (o->kind == CM_OPT_FLAG)
        continue; /* takes no value */
    }
    if (!inline_val)
      i++;
  }
  if (!cfg->handler) {
    char all[256];
    join_handlers(all, sizeof all, true, -1, " or ");
    return bad(err, errlen, "no handler given; add one of %s%s", all, NULL);
  }
  if (cfg->nenv > 0 && !cfg->handler->children) {
    /* the name only: a value may be a secret */
    char with[128], none[128];
    join_handlers(with, sizeof with, false, 1, " or ");
    join_handlers(none, sizeof none, false, 0, " and ");
    snprintf(err, errlen,
             "--env %.*s passes a variable to %s children; %s start none, so "
             "drop it",
             (int)strcspn(cfg->env[0], "="), cfg->env[0], with, none);
    return -1;
  }
  oq_session_opts so = {.heartbeat_interval_ms =
                            (int)cfg->heartbeat_interval_ms,
                        .expiry_ms = (int)cfg->session_expiry_ms,
                        .fence_margin_ms = wk_fence_margin_ms(cfg)};
  if (cfg->heartbeat_interval_ms > 3600000 ||
      cfg->session_expiry_ms > 86400000 ||
      oq_session_validate(&so, err, errlen) != OQ_OK) {
    if (cfg->heartbeat_interval_ms > 3600000 ||
        cfg->session_expiry_ms > 86400000)
      snprintf(err, errlen,
               "--heartbeat-interval must be <= 1h and "
               "--session-expiry <= 24h");
    return -1;
  }
  if (cfg->orphan_after_ms > 86400000) {
    snprintf(err, errlen, "--orphan-after must be <= 24h");
    return -1;
  }
  if (cfg->nqueues == 0)
    cfg->queues[cfg->nqueues++] = OQ_DEFAULT_QUEUE;
  return 0;
}
