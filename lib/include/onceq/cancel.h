/*
 * cancel.h: cancelling live items (`onceq cancel`), inside the CALLER's
 * transaction.
 *
 * A cancelled item is deleted from onceq_items, running or not, and leaves
 * a 'cancelled' row in onceq_results: the durable trace that tells a cancel
 * from an ack, for a waiter (oq_wait) and for a worker reconciling an
 * ambiguous ack (an item gone with this row was cancelled, not
 * acknowledged). A running item's worker can then no longer acknowledge
 * it: the ack's claim check finds no row, so its ack-transaction writes
 * never commit. External effects already started are not undone.
 *
 * Terms:
 *  - where: the table an id is found in: "live" (onceq_items), "dead"
 *    (onceq_dead), "done" (the onceq_done history) or "unknown".
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_CANCEL_H
#define ONCEQ_CANCEL_H

#include <stddef.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Cancel the n items of ids (UUID text), all or nothing, in the caller's
 * transaction (run it in oq_db_transact: it may run again on a restart).
 * Every live id is locked first (FOR UPDATE), so an ack in flight waits
 * for this transaction and then loses. on_row (may be NULL) gets one row
 * per live id: (id, "live", the session holding its claim or NULL). When
 * any id is not live, nothing is deleted, on_row is then also called with
 * (id, where, NULL) for each id that is not, and *cancelled (may be NULL)
 * is 0. Else every id is deleted with its 'cancelled' result row (its result:
 * the item's last error, NULL if no attempt failed) and *cancelled is the
 * count. A cancel writes no onceq_dead row.
 * Blocks: two statements, not retried: bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_cancel(oq_db *db, const char *const *ids, size_t n,
                               oq_row_fn on_row, void *ud, long *cancelled);

#ifdef __cplusplus
}
#endif
#endif
