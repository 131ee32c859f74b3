/*
 * reconcile.h: the reconciliation sweep. It enforces the runtime's
 * invariant (runtime.h): it reads the ids the database says the session
 * holds and releases, by the claim's identity, every one that no job holds
 * in memory. Such a claim has nobody to finish it: a claim whose commit
 * landed but whose reply was lost, a job dropped because its release, ack
 * or failure could not be written, a claim made while out of memory.
 *
 * The claim loop runs it after any reconnect of its connection, on a
 * FENCED -> LIVE transition, after an ambiguous claim, when a thread
 * dropped a job unsettled (wk_sweep_request), and at least once per
 * session expiry.
 *
 * Why it cannot release a claim that someone holds: the claim loop is the
 * only thread that claims, and it runs the sweep, so no claim appears
 * during one. A job that was held when the ids were read and is gone when
 * memory is checked has settled, and settling changed the row (deleted,
 * released, failed), so the identity-matched release skips it.
 *
 * Thread safety: claim loop only, on its own connection.
 */
#ifndef ONCEQ_WORKER_RECONCILE_H
#define ONCEQ_WORKER_RECONCILE_H

#include "runtime.h"

/* Sweep g's session now; trigger names why (logged). *released (may be
 * NULL) gets the number of claims released. */
oq_err wk_reconcile(wk *w, oq_db *db, wk_gen *g, const char *trigger,
                    size_t *released);

#endif
