/*
 * retry.h: moving dead items (onceq_dead) back to onceq_items (`onceq
 * retry`), inside the CALLER's transaction.
 *
 * A moved item keeps its id, payload, priority, max_attempts, unique_key
 * and created_at; attempts start again at 0, it is ready now, and
 * last_error is kept (it says why the item died). One statement moves
 * them, so an item is never in both tables, nor in neither.
 *
 * A dead item's unique_key may meanwhile be held by a live item: moving it
 * would break the key's promise (at most one live item per key). With
 * explicit ids that blocks the whole retry; oq_retry_all_dead leaves such
 * items dead and counts them.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_RETRY_H
#define ONCEQ_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Move the n dead items of ids (UUID text) back, all or nothing, in the
 * caller's transaction (run it in oq_db_transact: it may run again on a
 * restart). The dead rows are locked first; on_check (may be NULL) gets
 * one row per id: (id, where: "dead", "live", "done" or "unknown", the
 * live item holding its unique key or NULL, its unique key or NULL). When
 * any id is not dead or its key is held, *blocked is true and nothing
 * moves; else on_moved (may be NULL) is called with (id) for each moved
 * item.
 * Blocks: up to three statements, not retried: bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_retry_dead(oq_db *db, const char *const *ids, size_t n,
                                   oq_row_fn on_check, oq_row_fn on_moved,
                                   void *ud, bool *blocked);

/*
 * Move every dead item (of queue; NULL: of every queue) whose unique key
 * no live item holds, in the caller's transaction; on_moved (may be NULL)
 * is called with (id) for each. *kept (may be NULL) gets how many stay dead
 * because a live item holds their key.
 * Blocks: two statements, not retried: bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_retry_all_dead(oq_db *db, const char *queue,
                                       oq_row_fn on_moved, void *ud,
                                       long *kept);

#ifdef __cplusplus
}
#endif
#endif
