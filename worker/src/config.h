/*
 * config.h: onceq-worker's settings and their command-line parsing
 * (docs/design.md §6: the flag names are an interface scripts rely on).
 *
 * Thread safety: parsed once on the main thread, then read-only.
 */
#ifndef ONCEQ_WORKER_CONFIG_H
#define ONCEQ_WORKER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WK_MAX_QUEUES 64
#define WK_MAX_ENV 64

struct wk_handler; /* a handler kind, a row of handler.h's table */

/* --max-held-mib's default: the payloads a worker holds stay well inside
 * the shipped 256 MiB memory limit (deploy/), with room for one claim's
 * result while it is copied (about as much again) and the handlers'
 * buffers. docs/worker.md, "Memory". */
#define WK_DEFAULT_MAX_HELD_MIB 64

typedef struct wk_config {
  char *db;                          /* --db (a copy; argv is masked) */
  const char *queues[WK_MAX_QUEUES]; /* --queue, repeatable */
  size_t nqueues;                    /* 0 means "default" */
  int concurrency;                   /* executor threads */
  int batch;                         /* max items claimed per round */
  int max_held_mib; /* --max-held-mib: payload MiB held, claimed and not
                       yet freed; a claim stops once it is reached */
  const struct wk_handler *handler; /* --exec, --http or --sql (handler.h);
                                       NULL until one is given */
  char **exec_argv;                 /* --exec: NULL-terminated (into argv) */
  char *env[WK_MAX_ENV]; /* --env NAME or NAME=VALUE, repeatable (copies:
                            a VALUE is masked in argv) */
  size_t nenv;
  char **exec_env;      /* --exec: the children's base environment, built by
                           main at start-up (wk_exec_env_new); owned */
  const char *http_url; /* --http (a copy; argv is masked) */
  const char *sql;      /* --sql */
  int64_t heartbeat_interval_ms;
  int64_t session_expiry_ms;
  int64_t poll_interval_ms; /* 0: engine default */
  int64_t timeout_ms;       /* per item, exec/http; 0: none */
  int64_t kill_grace_ms;
  int64_t shutdown_timeout_ms;
  int64_t retry_base_ms;    /* item retry backoff base */
  const char *metrics_addr; /* NULL: no endpoint */
  int log_level;            /* oq_log_level */
  bool log_json;
  bool drain;        /* exit 0 once nothing is ready */
  bool history;      /* write onceq_done rows */
  bool sql_per_item; /* --sql: one ack transaction per item, not batches */
  bool insecure;     /* --http: skip TLS verification */

  /* --partitioned: claim only in this session's parts; --orphan-after:
   * also claim items ready this long in parts with no live owner */
  bool partitioned;
  int64_t orphan_after_ms;
} wk_config;

/*
 * Parse argv into cfg (defaults first). Returns 0 to run, 1 when --help or
 * --version was printed (exit 0), -1 on bad usage with one line in err
 * naming the fix (exit 2). argv entries holding a password are masked in
 * place so `ps` does not show it. Free with wk_config_free.
 */
int wk_config_parse(int argc, char **argv, wk_config *cfg, char *err,
                    size_t errlen);
void wk_config_free(wk_config *cfg);

/*
 * The session's fence margin (docs/design.md §4a: it covers the kill grace
 * of children). --exec: --kill-grace + WK_FENCE_SLACK_MS, so that a child
 * SIGTERMed at the fence keeps its whole grace before the SIGKILL that
 * comes WK_KILL_BEFORE_EXPIRY_MS before the expiry; at least
 * OQ_FENCE_MARGIN_MS, at most expiry - 3 x heartbeat interval (a fence
 * never engages before three beats in a row failed to land; the expiry is
 * at least 3 x interval + 1 s, so that bound is never below the default).
 * A handler that starts no child (--http, --sql): OQ_FENCE_MARGIN_MS.
 */
int wk_fence_margin_ms(const wk_config *cfg);
/* What an --exec child gets between SIGTERM and SIGKILL when its session
 * is fenced: --kill-grace, or less when the margin above was capped. */
int wk_fence_grace_ms(const wk_config *cfg);

#endif
