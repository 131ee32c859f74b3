/*
 * handler.h: the handler kinds (--exec, --http, --sql), registered in one
 * table (handler.c). A row is all the worker knows of a kind: its flag and
 * --help lines, the parse of its flag, its start-up check, its
 * process-wide set-up, and the hooks the executors run it by. Everything
 * else (config.c, preflight.c, executor.c, worker.c, main.c) asks the row,
 * so a new kind is its module (the runner: handler_exec.c, handler_http.c,
 * handler_sql.c) plus one row.
 *
 * Two ways to run an item, one per row:
 *  - a task (run): the handler fills a wk_result (task.h) outside any
 *    transaction; the executor settles a failure and hands a success to
 *    the acker (exec, HTTP);
 *  - a statement (handle): the handler's work runs inside the item's ack
 *    transaction and settles it (SQL).
 *
 * Thread safety: the table is constant. Each hook says on which thread it
 * is called.
 */
#ifndef ONCEQ_WORKER_HANDLER_H
#define ONCEQ_WORKER_HANDLER_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime.h"
#include "task.h"

typedef struct wk_handler {
  const char *flag;     /* "--exec"; without the dashes, the log's name */
  const char *synopsis; /* "--exec CMD [ARG...]": --help's lines */
  const char *brief;    /* "--exec CMD": the error that lists the kinds */
  const char *help;     /* --help's description; a line after the first
                           starts with 23 blanks */
  bool takes_rest;      /* the flag takes the rest of the command line */
  bool children;        /* starts child processes: it takes --env, and
                           the fence margin covers --kill-grace */

  /* Main thread, while parsing, after the flag was accepted as the one
   * handler: its value. val is the value ("--flag=val" or the next
   * argument; inline_val says which), NULL only for a takes_rest flag
   * that stands alone: such a flag owns argv[i + 1 ..]. 0, or -1 with one
   * line in err. */
  int (*parse)(wk_config *cfg, int argc, char **argv, int i, char *val,
               bool inline_val, char *err, size_t errlen);
  /* Main thread, start-up (preflight.h): 0 when the worker may start, else
   * the exit code (2) with one line in err. NULL: nothing to check. */
  int (*check)(const wk_config *cfg, oq_db *db, char *err, size_t errlen);
  /* Main thread, before the database is reached: process-wide set-up of
   * what the kind loads (libcurl). 0, or -1 with one line in err (exit 1).
   * cleanup undoes it at exit. NULL: none. */
  int (*init)(char *err, size_t errlen);
  void (*cleanup)(void);
  /* Main thread, after the start-up checks and before any other thread
   * (it may read environ): 0, or -1 when out of memory. NULL: none. */
  int (*prepare)(wk_config *cfg);

  /* A task kind. state_new (executor thread, at its start and again
   * before a job while it returned NULL) makes the thread's handle, freed
   * with state_free; NULL means it cannot now (out of memory): the job is
   * released, and the log names state_what. run runs one attempt (on an
   * executor thread). */
  void *(*state_new)(const wk_config *cfg);
  void (*state_free)(void *state);
  const char *state_what;
  void (*run)(void *state, const wk_config *cfg, const wk_task *t,
              wk_result *r);

  /* A statement kind (executor thread, on its connection): run j's work
   * and acknowledge it in one transaction, settling j (the caller frees
   * it); handle_batch does so for n jobs of one session. */
  void (*handle)(wk *w, oq_db *db, wk_job *j);
  void (*handle_batch)(wk *w, oq_db *db, wk_job **jobs, size_t n);
  /* The most jobs one executor turn takes (handle_batch when above 1).
   * NULL: 1. */
  int (*batch_max)(const wk_config *cfg);
} wk_handler;

/* The table, in --help's order, and its length. */
extern const wk_handler *const wk_handlers[];
extern const size_t wk_nhandlers;

/* The kind whose flag arg is, alone or as --flag=value; NULL: none. */
const wk_handler *wk_handler_for_arg(const char *arg);

/* The kind named name ("exec", "http", "sql"); NULL: none. */
const wk_handler *wk_handler_named(const char *name);

/* The most jobs an executor takes at once for cfg's handler (>= 1). */
int wk_handler_batch_max(const wk_config *cfg);

#endif
