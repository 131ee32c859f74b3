/*
 * task.h: what a handler is given and what it reports back. Shared by the
 * exec, HTTP and SQL handlers and the executor that runs them.
 *
 * Terms:
 *  - outcome: success (ack), failure (a failed attempt: retry with backoff
 *    or dead-letter), or abandoned (the session was lost or the worker is
 *    stopping now: do not ack, do not fail; the claim is released or reaped).
 *  - cancel check: a callback the handler polls (at least every 100 ms while
 *    it waits) that says whether to stop the work at once.
 *
 * Thread safety: a task and its result belong to one executor thread.
 */
#ifndef ONCEQ_WORKER_TASK_H
#define ONCEQ_WORKER_TASK_H

#include <stdbool.h>

#include "onceq/onceq.h"

#define WK_TAIL_MAX 4096 /* bytes kept of a child's stdout/stderr tail */

typedef enum wk_outcome {
  WK_OK = 0,       /* the work succeeded: acknowledge it */
  WK_FAILED = 1,   /* a failed attempt: oq_fail (retry or dead-letter) */
  WK_ABANDONED = 2 /* stopped on purpose: neither ack nor fail */
} wk_outcome;

/* Polled by handlers; true means stop the work now. */
typedef bool (*wk_cancel_fn)(void *ctx);

typedef struct wk_task {
  const oq_item *item;
  const char *session_id;
  wk_cancel_fn cancelled; /* may be NULL: never cancelled */
  wk_cancel_fn kill_now;  /* may be NULL. Polled like cancelled, also while
                             a stopped child has its grace: true means
                             SIGKILL now (the session is about to expire) */
  void *cancel_ctx;       /* passed to both */
} wk_task;

typedef struct wk_result {
  wk_outcome outcome;
  int retry_after_ms;           /* >= 0: the remote asked for this delay */
  char error[WK_TAIL_MAX + 1];  /* why it failed; becomes last_error */
  char output[WK_TAIL_MAX + 1]; /* result text kept in history; may be "" */
  bool output_cut; /* output is not all the handler printed or returned
                      (onceq_results.truncated) */
} wk_result;

/* Reset a result to "failed, no detail". */
void wk_result_init(wk_result *r);

#endif
