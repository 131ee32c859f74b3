/*
 * main.c: onceq-worker's entry point: flags, logging, signals, metrics,
 * then the worker runtime. Signal handlers only count signals; the claim
 * loop acts on the count (first: drain, second: stop now).
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "logsink.h"
#include "metrics.h"
#include "onceq/onceq.h"
#include "preflight.h"
#include "worker.h"

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig)
{
  (void)sig;
  if (signals_seen < 100)
    signals_seen++;
}

/* The one way usage and configuration errors leave: one line on stderr,
 * with anything that looks like a credential masked (a mistyped flag may
 * carry a database URL). */
static void usage_line(const char *msg)
{
  char masked[OQ_ERRBUF_SIZE];
  oq_text_mask_secrets(msg, masked, sizeof masked);
  fprintf(stderr, "onceq-worker: %s\n", masked);
}

int main(int argc, char **argv)
{
  wk_config cfg;
  char err[OQ_ERRBUF_SIZE];
  int p = wk_config_parse(argc, argv, &cfg, err, sizeof err);
  if (p != 0) {
    if (p < 0)
      usage_line(err);
    wk_config_free(&cfg);
    return p < 0 ? 2 : 0;
  }
  wk_logsink_install((oq_log_level)cfg.log_level, cfg.log_json);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* only the HTTP handler uses libcurl's transfers: its TLS set-up costs
   * about 3 MiB of resident memory that an --sql or --exec worker does
   * not need (the README's memory figure) */
  if (cfg.handler == WK_HANDLER_HTTP &&
      curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "onceq-worker: libcurl failed to initialise\n");
    wk_config_free(&cfg);
    return 1;
  }
  wk_metrics *m = NULL;
  /* handler mistakes stop us here, not one item at a time */
  int rc = wk_preflight(&cfg, err, sizeof err);
  if (rc != 0) {
    usage_line(err);
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
  if (cfg.handler == WK_HANDLER_HTTP)
    curl_global_cleanup();
  wk_config_free(&cfg);
  return rc;
}
