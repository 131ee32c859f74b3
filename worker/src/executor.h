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
 * margin follows --kill-grace (wk_fence_margin_ms, below), so that
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
