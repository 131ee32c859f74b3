/*
 * main.c: onceq-worker's entry point: flags, logging, signals, metrics,
 * then the worker runtime. Signal handlers only count signals; the claim
 * loop acts on the count (first: drain, second: stop now).
 */

#include <stdlib.h>

#include "cmdline.h"
#include "flags.h"
#include "handler.h"
#include "lazylib.h"
#include "logsink.h"
#include "metrics.h"
#include "onceq/onceq.h"
#include "say.h"
#include "signals.h"
#include "worker.h"

static cm_signal_count signals_seen;

/* The one way usage and configuration errors leave: one line on stderr,
 * with anything that looks like a credential masked (a mistyped flag may
 * carry a database URL). */
static void usage_line(const char *msg)
{
  cm_say("onceq-worker", NULL, NULL, "%s", msg);
}

/*
 * Can we reach the database at all? One connection before anything else,
 * so that the exit code follows the one rule of every binary (docs/cli.md
 * "Exit codes"): 2 for what the user must fix (a bad conninfo, a role or
 * database that does not exist), 1 for what a later run may not meet (the
 * server down or unreachable, a refused password). Returns 0 or the code
 * after one line on stderr.
 */
static int reach_database(const wk_config *cfg, oq_db **db)
{
  char err[OQ_ERRBUF_SIZE];
  oq_db_opts o = {.conninfo = cfg->db,
                  .application_name = "onceq-worker-preflight"};
  oq_err e = oq_db_open(&o, db, err, sizeof err);
  if (e == OQ_OK)
    return 0;
  usage_line(err);
  return cm_exit_for(e);
}

int main(int argc, char **argv)
{
  cm_exec_lean(argv); /* idle RSS: GnuTLS stays uninitialised */
  wk_config cfg;
  char err[OQ_ERRBUF_SIZE];
  int p = wk_config_parse(argc, argv, &cfg, err, sizeof err);
  if (p != 0) {
    if (p < 0)
      usage_line(err);
    wk_config_free(&cfg);
    return p < 0 ? 2 : 0;
  }
  cm_logsink_install((oq_log_level)cfg.log_level, cfg.log_json);
  /* the log's last line of defence (logsink.h): no thread runs yet */
  cm_logsink_secret(cfg.db && *cfg.db ? cfg.db : oq_conninfo_from_env(), false);
  cm_logsink_secret(getenv("PGPASSWORD"), true);
  cm_logsink_secret(cfg.http_url, false);
  cm_logsink_secret(cm_listen_db(cfg.listen_db), false);
  cm_signals_install(&signals_seen);
  /* what the handler kind loads process-wide (libcurl for --http only) */
  const wk_handler *h = cfg.handler;
  if (h->init && h->init(err, sizeof err) != 0) {
    usage_line(err);
    wk_config_free(&cfg);
    return 1;
  }
  wk_metrics *m = NULL;
  oq_db *pre = NULL;
  int rc = reach_database(&cfg, &pre);
  if (rc != 0)
    goto out;
  /* handler mistakes stop us here, not one item at a time (on the same
   * connection: one fewer to open before the first claim) */
  rc = h->check ? h->check(&cfg, pre, err, sizeof err) : 0;
  oq_db_close(pre);
  if (rc != 0) {
    usage_line(err);
    goto out;
  }
  /* after the start-up checks, so that a usage error stays one line;
   * before the threads (it may read environ, and nobody may setenv then) */
  if (h->prepare && h->prepare(&cfg) != 0) {
    usage_line("out of memory");
    rc = 1;
    goto out;
  }
  rc = 1;
  m = wk_metrics_new();
  if (!m)
    goto out;
  if (cfg.metrics_addr) {
    int port = 0;
    if (wk_metrics_serve(m, cfg.metrics_addr, &port, err, sizeof err) != 0) {
      usage_line(err);
      rc = 2;
      goto out;
    }
    OQ_LOG(OQ_LOG_INFO, NULL, NULL, "metrics on %s (port %d)", cfg.metrics_addr,
           port);
  }
  rc = wk_worker_run(&cfg, m, &signals_seen);
out:
  wk_metrics_free(m);
  if (h->cleanup)
    h->cleanup();
  wk_config_free(&cfg);
  return rc;
}
