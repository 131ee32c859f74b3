/*
 * worker.h: the worker runtime: one claim loop (the calling thread), N
 * executor threads and one acker thread, around a session that heartbeats
 * and re-registers when lost.
 *
 * Terms:
 *  - job: one claimed item on its way through the worker;
 *  - generation: one session registration; jobs keep the generation they
 *    were claimed under, and acknowledge with that session only;
 *  - draining: no more claims; in-flight jobs finish within the shutdown
 *    timeout, queued ones are released; then the session row is deleted;
 *  - hard stop: children are stopped now, claims released by deleting the
 *    session row.
 *
 * Thread safety: wk_worker_run runs on one thread; `signals` is written by
 * signal handlers (a counter) and read here.
 */
#ifndef ONCEQ_WORKER_WORKER_H
#define ONCEQ_WORKER_WORKER_H

#include "signals.h"

#include "config.h"
#include "metrics.h"

/* Run until drained, stopped by signals (first: drain, second: stop now),
 * or --drain finds nothing ready. Returns the process exit code. */
int wk_worker_run(const wk_config *cfg, wk_metrics *m,
                  cm_signal_count *signals);

#endif
