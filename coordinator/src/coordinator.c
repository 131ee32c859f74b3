/*
 * coordinator.c: the coordinator daemon (coordinator.h), which
 * `onceq coordinator` runs (cli/src/cmd_coordinator.c). Several may run; the
 * one whose session holds the lease row (lease.h) leads and, every
 * --interval: reaps expired sessions, enforces retention (janitor.h), sends
 * dead-job webhooks (notify.h), fires due schedules (schedule.h) and
 * refreshes the per-queue Prometheus gauges (metrics.h). The others
 * reap too (harmless: reaping is idempotent) and try the lease each
 * interval, so when the leader's session is reaped (the lease goes with it,
 * ON DELETE CASCADE) one of them takes over within expiry + one interval.
 *
 * The daemon is one loop on one thread (plus the heartbeat's thread and
 * libmicrohttpd's), stepped through the states below. Signal handlers only
 * count signals; no wait is longer than 100 ms between checks of that
 * count, and a webhook request in flight is abandoned within a second.
 * SIGTERM/SIGINT: stop, delete our session (which gives up the lease at
 * once), exit 0. A second signal skips the goodbye.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "coordinator.h"
#include "curlpost.h"
#include "flags.h"
#include "janitor.h"
#include "lease.h"
#include "logsink.h"
#include "notify.h"
#include "qstats.h"
#include "say.h"
#include "schedule.h"
#include "signals.h"
#include "status_page.h"

/* Where the daemon is; stepped once per loop turn. */
typedef enum co_state {
  CO_REGISTER, /* no session (first start, or it was lost): connect,
                  register a session and start its heartbeat */
  CO_FOLLOW,   /* registered; another session holds the lease (or ours is
                  fenced): reap, try the lease */
  CO_LEAD      /* our session holds the lease: all the janitor duties */
} co_state;

typedef struct co_opts {
  int64_t interval_ms;  /* one pass every interval */
  int64_t keep_done_ms; /* < 0: off */
  int64_t keep_dead_ms; /* < 0: off */
  const char *notify_url;
  int64_t notify_timeout_ms;
  const char *metrics_addr;
  int64_t heartbeat_interval_ms;
  int64_t session_expiry_ms;
  int log_level;
  bool log_json;
  const char *status_token; /* the status page's bearer token, or NULL */
  int64_t keep_results_ms;  /* < 0: off */
} co_opts;

typedef struct coord {
  co_opts o;
  oq_db_opts dbo;
  unsigned host_hint;    /* dbo.host_hint: shared by every connection */
  oq_db *db;             /* the loop's connection */
  oq_session *sess;      /* NULL in CO_REGISTER */
  oq_heartbeat *hb;      /* its heartbeat (own thread and connection) */
  co_notifier *notifier; /* NULL without --notify-url */
  co_metrics *metrics;   /* always; served only with --metrics-addr */
  co_state state;
  bool schema_checked;
  int register_failures; /* consecutive; drives the retry wait */
  uint64_t gauges_ms;    /* monotonic time of the last gauge refresh */
  char version[64];      /* our session's version string */
  co_status *status;     /* the status page, with --metrics-addr */
  bool status_open;      /* the page has no bearer token */
} coord;

static cm_signal_count signals_seen;

/* One line on stderr, "onceq: coordinator: ...", and the exit code. */
static int co_fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int co_fail(int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cm_vsay("onceq", "coordinator", NULL, fmt, ap);
  va_end(ap);
  return code;
}

/* A usage error: the line ends with where to read more; exit code 2. */
static int co_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int co_usage_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cm_vsay("onceq", "coordinator", "; see `onceq coordinator --help`", fmt, ap);
  va_end(ap);
  return CM_EXIT_USAGE;
}

static const char *sid(const coord *c)
{
  return c->sess ? oq_session_id(c->sess) : NULL;
}

/* ---- flags ------------------------------------------------------------- */

#define O(f) offsetof(co_opts, f)
static const cm_opt opts[] = {
    {"--interval", CM_OPT_DURATION, O(interval_ms), "D",
     "one pass every D: reap, lease, duties (1s)"},
    {"--keep-done", CM_OPT_DURATION_OFF, O(keep_done_ms), "D|off",
     "delete onceq_done rows older than D (24h)"},
    {"--keep-dead", CM_OPT_DURATION_OFF, O(keep_dead_ms), "D|off",
     "delete onceq_dead rows older than D (168h)"},
    {"--notify-url", CM_OPT_STRING, O(notify_url), "URL",
     "POST each dead item there as JSON (off)"},
    {"--notify-timeout", CM_OPT_DURATION, O(notify_timeout_ms), "D",
     "limit for one webhook request (10s)"},
    {"--metrics-addr", CM_OPT_STRING, O(metrics_addr), "HOST:PORT",
     "serve /metrics and /healthz (off)"},
    {"--heartbeat-interval", CM_OPT_DURATION, O(heartbeat_interval_ms), "D",
     "session heartbeat period (1s)"},
    {"--session-expiry", CM_OPT_DURATION, O(session_expiry_ms), "D",
     "silent this long: session and lease go (5s)"},
    {"--log-level", CM_OPT_LOG_LEVEL, O(log_level), "L",
     "debug|info|warn|error (info)"},
    {"--log-format", CM_OPT_LOG_FORMAT, O(log_json), "F", "text|json (text)"},
    {"--keep-results", CM_OPT_DURATION_OFF, O(keep_results_ms), "D|off",
     "delete kept results (onceq wait) older than D (24h)"},
    {"--status-token", CM_OPT_STRING, O(status_token), "TOKEN",
     "status page needs Bearer TOKEN (ONCEQ_STATUS_TOKEN)"},
};
#define NOPTS (sizeof opts / sizeof opts[0])
_Static_assert(sizeof opts / sizeof opts[0] <= 64, "one bit per option");

static void usage(void)
{
  printf("usage: onceq coordinator [OPTIONS]\n"
         "  the janitor daemon; run one or more, exactly one leads (a lease "
         "row\n"
         "  that references its session) and reaps, enforces retention, "
         "sends\n"
         "  dead-job webhooks and fires schedules. SIGTERM: stop and give "
         "up the\n"
         "  lease at once.\n\noptions:\n");
  cm_opt_print_help(stdout, opts, NOPTS, 24);
  printf("durations: 250ms, 5s, 2m, 1h (combinations like 1h30m)\n");
}

/* Returns 0 (go on), 1 (--help printed) or exit code 2 after a message. */
static int parse(int argc, char **argv, co_opts *o)
{
  memset(o, 0, sizeof *o);
  o->interval_ms = 1000;
  o->keep_done_ms = 24 * 3600 * 1000LL;
  o->keep_dead_ms = 168 * 3600 * 1000LL;
  o->keep_results_ms = 24 * 3600 * 1000LL;
  o->notify_timeout_ms = 10000;
  o->heartbeat_interval_ms = 1000;
  o->session_expiry_ms = 5000;
  o->log_level = OQ_LOG_INFO;
  char err[OQ_ERRBUF_SIZE];
  uint64_t seen = 0; /* bit k: opts[k] was given */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage();
      return 1;
    }
    const char *val = NULL;
    const cm_opt *op = cm_opt_find(opts, NOPTS, a, &val);
    if (!op)
      return co_usage_error("unknown option %s", a);
    /* every option here takes one value: a second one would silently win */
    uint64_t bit = UINT64_C(1) << (op - opts);
    if (seen & bit)
      return co_usage_error("%s is given twice; give it once (a second "
                            "one would silently win)",
                            op->name);
    seen |= bit;
    if (!val) {
      if (i + 1 >= argc)
        return co_usage_error("%s needs a value", op->name);
      val = argv[++i];
    }
    if (cm_opt_set(op, val, o, err, sizeof err) != 0)
      return co_usage_error("%s", err);
  }
  if (o->interval_ms < 50)
    return co_usage_error("--interval must be at least 50ms");
  if (o->heartbeat_interval_ms > 0x7fffffff ||
      o->session_expiry_ms > 0x7fffffff || o->notify_timeout_ms > 0x7fffffff)
    return co_usage_error("a duration is too long");
  return 0;
}

/* ---- session ----------------------------------------------------------- */

/* Called on the heartbeat thread: only logs. The loop reads the state. */
static void on_session_event(void *ud, oq_session *s, oq_session_state st)
{
  (void)ud;
  if (st == OQ_SESSION_LOST)
    OQ_LOG(OQ_LOG_WARN, oq_session_id(s), NULL,
           "session lost (reaped): the lease went with it");
  else if (st == OQ_SESSION_FENCED)
    OQ_LOG(OQ_LOG_WARN, oq_session_id(s), NULL,
           "heartbeat overdue: acting as follower until it lands");
  else
    OQ_LOG(OQ_LOG_INFO, oq_session_id(s), NULL, "heartbeat landing again");
}

static void set_leader(coord *c, bool leader)
{
  bool was = c->state == CO_LEAD;
  if (leader && !was) {
    OQ_LOG(OQ_LOG_INFO, sid(c), NULL, "leader: took the %s lease",
           CO_LEASE_NAME);
    co_metrics_add(c->metrics, CO_C_LEADERSHIPS, 1);
    c->gauges_ms = 0; /* refresh the gauges now */
  } else if (!leader && was) {
    if (signals_seen)
      OQ_LOG(OQ_LOG_INFO, sid(c), NULL, "stopping: giving up the lease");
    else
      OQ_LOG(OQ_LOG_WARN, sid(c), NULL, "no longer the leader");
  }
  if (c->sess)
    c->state = leader ? CO_LEAD : CO_FOLLOW;
  co_metrics_set_leader(c->metrics, leader);
  if (!leader)
    co_metrics_set_queues(c->metrics, NULL);
}

/* Stop the heartbeat, and (goodbye) delete the session row: that releases
 * the lease in the same statement. */
static void drop_session(coord *c, bool goodbye)
{
  if (!c->sess)
    return;
  oq_heartbeat_stop(c->hb);
  c->hb = NULL;
  if (goodbye) {
    if (!oq_db_connected(c->db) && oq_db_reconnect(c->db) != OQ_OK) {
      OQ_LOG(OQ_LOG_WARN, sid(c), NULL,
             "cannot reach the database to end the session: it will be "
             "reaped after its expiry (%s)",
             oq_db_errmsg(c->db));
    } else if (oq_session_end(c->db, c->sess) != OQ_OK) {
      OQ_LOG(OQ_LOG_WARN, sid(c), NULL,
             "ending the session failed: %s; it will be reaped after its "
             "expiry",
             oq_db_errmsg(c->db));
    } else {
      OQ_LOG(OQ_LOG_INFO, sid(c), NULL, "session ended; lease released");
    }
  }
  co_metrics_set_healthy(c->metrics, false);
  oq_session_free(c->sess);
  c->sess = NULL;
}

/*
 * CO_REGISTER: connect (once), check the schema (once), register a session
 * and start its heartbeat. Returns 0 when registered, -1 to retry after a
 * wait, or an exit code for problems waiting cannot fix.
 */
static int do_register(coord *c)
{
  char err[OQ_ERRBUF_SIZE];
  oq_err e;
  if (!c->db) {
    e = oq_db_open(&c->dbo, &c->db, err, sizeof err);
    /* waiting cannot fix a bad conninfo (2) nor a refused password (1,
     * the exit-code rule in cm_exit_for) */
    if (e == OQ_ERR_CONFIG || e == OQ_ERR_AUTH)
      return co_fail(cm_exit_for(e), "%s", err);
    if (e != OQ_OK) {
      OQ_LOG(OQ_LOG_WARN, NULL, NULL, "cannot connect: %s; retrying", err);
      return -1;
    }
  } else if (!oq_db_connected(c->db) && oq_db_reconnect(c->db) != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, NULL, NULL, "cannot connect: %s; retrying",
           oq_db_errmsg(c->db));
    return -1;
  }
  if (!c->schema_checked) {
    e = oq_migrate_check(c->db);
    if (e == OQ_ERR_SCHEMA)
      return co_fail(CM_EXIT_USAGE, "%s", oq_db_errmsg(c->db));
    if (e != OQ_OK) {
      OQ_LOG(OQ_LOG_WARN, NULL, NULL, "schema check failed: %s; retrying",
             oq_db_errmsg(c->db));
      return -1;
    }
    c->schema_checked = true;
  }
  oq_session_opts so = {.heartbeat_interval_ms =
                            (int)c->o.heartbeat_interval_ms,
                        .expiry_ms = (int)c->o.session_expiry_ms,
                        .queues = "",
                        .version = c->version};
  e = oq_session_open(c->db, &so, &c->sess);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, NULL, NULL, "cannot register a session: %s; retrying",
           oq_db_errmsg(c->db));
    return -1;
  }
  e = oq_heartbeat_start(&c->dbo, c->sess, on_session_event, c, &c->hb, err,
                         sizeof err);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, sid(c), NULL, "cannot start the heartbeat: %s", err);
    c->hb = NULL;
    drop_session(c, true);
    return -1;
  }
  co_metrics_set_healthy(c->metrics, true);
  OQ_LOG(OQ_LOG_INFO, sid(c), NULL,
         "coordinator registered; one pass every %lld ms",
         (long long)c->o.interval_ms);
  c->state = CO_FOLLOW;
  return 0;
}

/* ---- one pass ---------------------------------------------------------- */

/* Log a failed step; false when the connection is gone (end the pass). */
static bool step_failed(coord *c, const char *what)
{
  co_metrics_add(c->metrics, CO_C_ERRORS, 1);
  OQ_LOG(OQ_LOG_WARN, sid(c), NULL, "%s failed: %s", what, oq_db_errmsg(c->db));
  return oq_db_connected(c->db);
}

/* The leader's duties, after the reap. */
static void lead(coord *c)
{
  long a = 0, b = 0;
  co_retention r = {c->o.keep_done_ms, c->o.keep_dead_ms, c->notifier != NULL,
                    c->o.keep_results_ms};
  if (co_retention_run(c->db, &r, &signals_seen, &a, &b) != OQ_OK) {
    if (!step_failed(c, "retention"))
      return;
  } else if (a + b > 0) {
    co_metrics_add(c->metrics, CO_C_RETENTION_DONE, (uint64_t)a);
    co_metrics_add(c->metrics, CO_C_RETENTION_DEAD, (uint64_t)b);
    OQ_LOG(OQ_LOG_INFO, sid(c), NULL,
           "retention: deleted %ld onceq_done/onceq_results and %ld "
           "onceq_dead row(s)",
           a, b);
  }
  if (c->notifier && !signals_seen) {
    /* one interval of webhooks per pass at most (notify.h): a slow
     * receiver must not starve retention and schedules */
    if (co_notify_run(c->notifier, c->db, &signals_seen, c->o.interval_ms, &a,
                      &b) != OQ_OK) {
      if (!step_failed(c, "dead-job notification"))
        return;
    }
    co_metrics_add(c->metrics, CO_C_NOTIFIED, (uint64_t)a);
    co_metrics_add(c->metrics, CO_C_NOTIFY_FAILED, (uint64_t)b);
  }
  if (!signals_seen) {
    if (co_schedule_fire_due(c->db, &signals_seen, &a) != OQ_OK) {
      if (!step_failed(c, "schedules"))
        return;
    }
    co_metrics_add(c->metrics, CO_C_SCHEDULE_FIRED, (uint64_t)a);
  }
  /* gauges: only when served, at most every 5 s (each refresh reads up to
   * QV_COUNT_CAP index entries per queue and state) */
  uint64_t every = c->o.interval_ms > 5000 ? (uint64_t)c->o.interval_ms : 5000;
  if (c->o.metrics_addr && !signals_seen &&
      (c->gauges_ms == 0 || oq_monotonic_ms() - c->gauges_ms >= every)) {
    qv_snapshot s;
    if (qv_snapshot_take(c->db, false, &s) == OQ_OK) {
      co_metrics_set_queues(c->metrics, &s);
      qv_snapshot_free(&s);
      c->gauges_ms = oq_monotonic_ms();
    } else {
      (void)step_failed(c, "queue gauges");
    }
  }
}

/* CO_FOLLOW / CO_LEAD: one pass. */
static void pass(coord *c)
{
  oq_session_state st = oq_session_state_get(c->sess);
  if (st == OQ_SESSION_LOST) {
    set_leader(c, false);
    drop_session(c, false);
    c->state = CO_REGISTER;
    return;
  }
  co_metrics_set_healthy(c->metrics, st == OQ_SESSION_LIVE);
  if (!oq_db_connected(c->db) && oq_db_reconnect(c->db) != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, sid(c), NULL, "database unreachable: %s",
           oq_db_errmsg(c->db));
    set_leader(c, false);
    return;
  }
  int ns = 0, nd = 0;
  if (oq_reap(c->db, &ns, &nd) != OQ_OK) {
    if (!step_failed(c, "reap")) {
      set_leader(c, false);
      return;
    }
  }
  co_metrics_add(c->metrics, CO_C_REAPED_SESSIONS, (uint64_t)ns);
  co_metrics_add(c->metrics, CO_C_REAPED_DEAD, (uint64_t)nd);
  bool leader = false;
  char holder[OQ_UUID_LEN + 1] = "";
  if (st == OQ_SESSION_LIVE) {
    oq_err e = co_lease_try(c->db, sid(c), &leader, holder, sizeof holder);
    if (e == OQ_ERR_SESSION_LOST) {
      OQ_LOG(OQ_LOG_WARN, sid(c), NULL,
             "our session row is gone (reaped); registering again");
      set_leader(c, false);
      drop_session(c, false);
      c->state = CO_REGISTER;
      return;
    }
    if (e != OQ_OK) {
      (void)step_failed(c, "lease");
      leader = false;
    } else if (!leader && c->state == CO_FOLLOW && holder[0]) {
      OQ_LOG(OQ_LOG_DEBUG, sid(c), NULL, "follower: lease held by session %s",
             holder);
    }
  }
  set_leader(c, leader);
  if (leader)
    lead(c);
}

/* ---- main -------------------------------------------------------------- */

/*
 * The status page beside /metrics (status_page.h): its token comes from
 * --status-token (then masked in argv, so ps does not show it) or
 * ONCEQ_STATUS_TOKEN. Bound beyond loopback without a token, it logs a
 * warning: the page shows payloads and errors.
 */
static int status_setup(coord *c, int argc, char **argv)
{
  static char token_copy[256];
  const char *token = c->o.status_token;
  if (!token)
    token = getenv("ONCEQ_STATUS_TOKEN");
  /* cut, it would match no request: refuse it instead (no token text) */
  if (token && strlen(token) >= sizeof token_copy)
    return co_fail(CM_EXIT_USAGE,
                   "the status page token (--status-token or "
                   "ONCEQ_STATUS_TOKEN) is %zu characters; use at most %zu",
                   strlen(token), sizeof token_copy - 1);
  token = c->o.status_token;
  if (token) {
    snprintf(token_copy, sizeof token_copy, "%s", token);
    for (int i = 0; i < argc; i++)
      if (argv[i] == token)
        memset(argv[i], '*', strlen(argv[i]));
      else if (strncmp(argv[i], "--status-token=", 15) == 0)
        memset(argv[i] + 15, '*', strlen(argv[i] + 15));
    token = token_copy;
  } else {
    token = getenv("ONCEQ_STATUS_TOKEN");
  }
  c->status = co_status_new(&c->dbo, token);
  if (!c->status)
    return co_fail(CM_EXIT_RUNTIME, "out of memory");
  co_metrics_set_page(c->metrics, co_status_serve, c->status);
  c->status_open = !(token && *token);
  return CM_EXIT_OK;
}

/* Once the address is known good (bound): warn when the page is open to
 * more than this host without a token. */
static void status_warn_if_open(const coord *c)
{
  const char *a = c->o.metrics_addr;
  bool loopback =
      strncmp(a, "127.", 4) == 0 || strncmp(a, "localhost:", 10) == 0 ||
      strncmp(a, "[::1]:", 6) == 0 || strchr(a, ':') == NULL || a[0] == ':';
  if (!loopback && c->status_open)
    OQ_LOG(OQ_LOG_WARN, NULL, NULL,
           "the status page on %s shows payloads and errors to anyone who "
           "can reach it: set --status-token (or ONCEQ_STATUS_TOKEN)",
           a);
}

int co_coordinator_main(const char *db, int argc, char **argv)
{
  coord c;
  char err[OQ_ERRBUF_SIZE];
  int rc = CM_EXIT_OK;
  char *notify_url = NULL; /* --notify-url's copy; argv is masked */
  memset(&c, 0, sizeof c);
  int p = parse(argc, argv, &c.o);
  if (p == 1)
    return CM_EXIT_OK;
  if (p != 0)
    return p;
  oq_session_opts so = {.heartbeat_interval_ms = (int)c.o.heartbeat_interval_ms,
                        .expiry_ms = (int)c.o.session_expiry_ms};
  if (oq_session_validate(&so, err, sizeof err) != OQ_OK)
    return co_fail(CM_EXIT_USAGE, "%s", err);
  snprintf(c.version, sizeof c.version, "%s%s", QV_COORDINATOR_VERSION_PREFIX,
           oq_version());
  c.dbo.conninfo = db;
  c.dbo.application_name = "onceq-coordinator";
  c.dbo.host_hint = &c.host_hint; /* a failover's new primary, found once */
  /* no statement outlives the fence (README "Session lifecycle"): a
   * leader whose heartbeat is stuck on a dead network fences by its clock
   * and stops leading; its calls return by this deadline */
  c.dbo.deadline_ms = (int)(c.o.session_expiry_ms - OQ_FENCE_MARGIN_MS);
  if (c.dbo.deadline_ms < 2000)
    c.dbo.deadline_ms = 2000;
  cm_logsink_install((oq_log_level)c.o.log_level, c.o.log_json);
  /* the log's last line of defence (logsink.h): no thread runs yet */
  cm_logsink_secret(db && *db ? db : oq_conninfo_from_env(), false);
  cm_logsink_secret(getenv("PGPASSWORD"), true);
  cm_logsink_secret(c.o.notify_url, false);
  cm_logsink_secret(
      c.o.status_token ? c.o.status_token : getenv("ONCEQ_STATUS_TOKEN"), true);

  cm_signals_install(&signals_seen);
  if (cm_curl_global_init(err, sizeof err) != 0)
    return co_fail(CM_EXIT_RUNTIME, "%s", err);
  c.metrics = co_metrics_new();
  if (!c.metrics) {
    rc = co_fail(CM_EXIT_RUNTIME, "out of memory");
    goto out;
  }
  if (c.o.notify_url) {
    /* its password stays in a copy and leaves argv (ps, /proc/PID/cmdline);
     * the option points into argv, which is ours to write */
    notify_url = strdup(c.o.notify_url);
    if (!notify_url) {
      rc = co_fail(CM_EXIT_RUNTIME, "out of memory");
      goto out;
    }
    oq_text_mask_secrets_in_place((char *)c.o.notify_url);
    c.o.notify_url = notify_url;
    /* the worker's --http check: an unusable URL stops us now, not one
     * failing webhook per interval */
    if (cm_curl_check_url("--notify-url", c.o.notify_url, err, sizeof err)) {
      rc = co_fail(CM_EXIT_USAGE, "%s", err);
      goto out;
    }
    c.notifier = co_notifier_new(c.o.notify_url, (int)c.o.notify_timeout_ms,
                                 err, sizeof err);
    if (!c.notifier) {
      rc = co_fail(CM_EXIT_USAGE, "%s", err);
      goto out;
    }
  }
  if (c.o.metrics_addr) {
    int port = 0;
    rc = status_setup(&c, argc, argv);
    if (rc != CM_EXIT_OK)
      goto out;
    if (co_metrics_serve(c.metrics, c.o.metrics_addr, &port, err, sizeof err) !=
        0) {
      rc = co_fail(CM_EXIT_USAGE, "%s", err);
      goto out;
    }
    OQ_LOG(OQ_LOG_INFO, NULL, NULL, "metrics on %s (port %d)", c.o.metrics_addr,
           port);
    status_warn_if_open(&c);
  }
  OQ_LOG(OQ_LOG_INFO, NULL, NULL,
         "coordinator starting: retention done=%s dead=%s, notifications %s",
         c.o.keep_done_ms < 0 ? "off" : "on",
         c.o.keep_dead_ms < 0 ? "off" : "on",
         c.notifier ? co_notifier_shown_url(c.notifier) : "off");

  /* the loop: bounded by the signals; each turn is one state step */
  while (!signals_seen) {
    uint64_t start = oq_monotonic_ms();
    if (c.state == CO_REGISTER) {
      int r = do_register(&c);
      if (r > 0) {
        rc = r;
        break;
      }
      if (r < 0) {
        int wait = 1000 << (c.register_failures < 4 ? c.register_failures : 4);
        c.register_failures++;
        cm_nap_until(start + (uint64_t)wait, &signals_seen);
        continue;
      }
      c.register_failures = 0;
    }
    pass(&c);
    cm_nap_until(start + (uint64_t)c.o.interval_ms, &signals_seen);
  }
  if (signals_seen)
    OQ_LOG(OQ_LOG_INFO, sid(&c), NULL, "signal received: stopping");
  set_leader(&c, false);
  /* a second signal: no goodbye; the session is reaped after its expiry */
  drop_session(&c, signals_seen < 2);
out:
  free(notify_url);
  co_notifier_free(c.notifier);
  co_metrics_free(c.metrics); /* stops the server before the page goes */
  co_status_free(c.status);
  oq_db_close(c.db);
  cm_curl_global_cleanup();
  return rc;
}
