/*
 * onceq.h: the whole public API of libonceq. Link with -lonceq
 * (pkg-config onceq).
 *
 * Each handle (oq_db, oq_session, ...) is documented in its own header;
 * every header states its thread-safety rules, and every call who owns what
 * it returns and how long it may block.
 *
 * Names read oq_<noun>_<verb> (oq_session_open, oq_parts_claim); the
 * protocol's own verbs stand alone (oq_claim, oq_ack, oq_fail, oq_release,
 * oq_reap, oq_enqueue, oq_wait). A suffix means one thing everywhere:
 *  - _open, _start, _new make a handle; _close, _stop, _free (and _end for
 *    a session's row) undo it, and accept NULL;
 *  - _get fills in the caller's memory or returns a value: it never
 *    allocates (oq_session_state_get, oq_parts_get, oq_parts_status_get);
 *  - _read reads the database into memory it allocates, freed by the call
 *    its comment names (oq_parts_report_read, oq_session_claims_read).
 * Internal names are oq__ / OQ__, are not in these headers and are not
 * exported by libonceq.so.
 *
 * Blocking: each call's comment has a "Blocks:" line: what it waits for,
 * what bounds the wait and how to cut it short. The terms it uses:
 *  - the deadline: oq_db_opts.deadline_ms, the longest wait for one
 *    statement's answer; past it the connection is closed (OQ_ERR_CONN, or
 *    OQ_ERR_AMBIGUOUS for a COMMIT). With 0 nothing on the client bounds a
 *    statement: set it in anything that must not hang;
 *  - restarts: 40001/40P01, after which the statement or transaction runs
 *    again, with backoff, within the retry policy (oq_db_opts.retry: at most
 *    30 s in all by default), then OQ_ERR_RETRY;
 *  - cancel by: an oq_db belongs to one thread, so no other thread can
 *    interrupt a call; the deadline, a callback's error, oq_wait's stop
 *    callback and the thread handles' stop calls are the ways to end one.
 */
#ifndef ONCEQ_H
#define ONCEQ_H

#include "onceq/version.h" /* generated: ONCEQ_VERSION */

#include "onceq/err.h"
#include "onceq/backoff.h"
#include "onceq/log.h"
#include "onceq/db.h"
#include "onceq/traits.h"
#include "onceq/migrate.h"
#include "onceq/session.h"
#include "onceq/heartbeat.h"
#include "onceq/reaper.h"
#include "onceq/item.h"
#include "onceq/partition.h"
#include "onceq/ack.h"
#include "onceq/enqueue.h"
#include "onceq/cancel.h"
#include "onceq/queues.h"
#include "onceq/retry.h"
#include "onceq/retention.h"
#include "onceq/duration.h"
#include "onceq/text.h"
#include "onceq/sqlstate.h"
#include "onceq/lease.h"
#include "onceq/dead.h"
#include "onceq/schedule.h"
#include "onceq/wait.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library's version string (ONCEQ_VERSION of the built library).
 * Blocks: never. */
const char *oq_version(void);
#ifdef __cplusplus
}
#endif
#endif
