/*
 * acker.h: the acker thread. It acknowledges succeeded exec/HTTP jobs by
 * group commit: while executors are still finishing, it waits up to 2 ms
 * to gather more, then sends one claim-checked
 * DELETE ... WHERE id = ANY($ids) AND claim = $session per session
 * generation. It keeps trying while the jobs' session is not lost; jobs it
 * could not acknowledge ask for a reconciliation sweep.
 *
 * Thread safety: one acker thread, on its own connection.
 */
#ifndef ONCEQ_WORKER_ACKER_H
#define ONCEQ_WORKER_ACKER_H

#include "runtime.h"

/* The thread's body (pthread_create with the wk). */
void *wk_acker_main(void *arg);

#endif
