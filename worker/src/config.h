/*
 * config.h: onceq-worker's settings, what the command line (cmdline.h)
 * fills in and every thread reads.
 *
 * Thread safety: filled once on the main thread, then read-only.
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
  char *db;        /* --db (a copy; argv is masked) */
  char *listen_db; /* --listen-db (a copy; argv is masked); NULL: none */
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

/* Free what cfg owns (the copies and the --exec environment); cfg may
 * be half-filled by a failed wk_config_parse (cmdline.h). */
void wk_config_free(wk_config *cfg);

#endif
