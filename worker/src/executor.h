/*
 * executor.h: the executor threads. Each takes jobs from the work queue,
 * runs the handler (exec, HTTP or SQL) on its own connection and settles
 * the outcome: SQL items are acknowledged in place, exec/HTTP successes go
 * to the acker, failures are recorded, stopped jobs released.
 *
 * A job starts only while its session is LIVE. Children are stopped when
 * it is not (fenced or lost): SIGTERM at once, and SIGKILL no later than
 * WK_KILL_BEFORE_EXPIRY_MS before the session can expire, whatever
 * --kill-grace says, so no child of a fenced session outlives the moment
 * another worker may reap the session and run its items again. The fence
 * margin follows --kill-grace (wk_fence_margin_ms, config.h), so that
 * this cuts the grace short only when the expiry leaves no room for it.
 *
 * Thread safety: the threads share the runtime (runtime.h) only.
 */
#ifndef ONCEQ_WORKER_EXECUTOR_H
#define ONCEQ_WORKER_EXECUTOR_H

#include "runtime.h"

/* SIGKILL a fenced session's children once its expiry is this close. It
 * covers the handler's cancel poll (100 ms) and the kill itself. */
#define WK_KILL_BEFORE_EXPIRY_MS 400

/* What the fence margin adds to --kill-grace (wk_fence_margin_ms): the
 * SIGKILL's WK_KILL_BEFORE_EXPIRY_MS, and the cancel check's period
 * (task.h, 100 ms) by which the SIGTERM may follow the fence. */
#define WK_FENCE_SLACK_MS (WK_KILL_BEFORE_EXPIRY_MS + 100)

/* The shortest deadline of an executor's --sql statements (the runtime's
 * other connections use the fence delay). */
#define WK_SQL_DEADLINE_MS 30000

typedef struct wk_executor {
  wk *w;
  pthread_t thread;
  int index;
} wk_executor;

/* The thread's body (pthread_create with a wk_executor). */
void *wk_executor_main(void *arg);

#endif
