/*
 * key_head.h: "is failed item f its key's first?" as the read layer asks
 * it, per engine: the blocked-key count (qstats.c) and `onceq keys
 * --blocked` (keys_view.c) start from the failed, unclaimed keyed items
 * (onceq_items_key_failed, schema v7) and keep those with no earlier item
 * of their key, claimed or not, and no item of their key running, one
 * descent of onceq_items_key_order each.
 * That index is (queue, part, ordering_key, enqueue_seq) on PostgreSQL
 * (schema v11: a key's items share one part there), of the unclaimed
 * keyed rows only (v12), so the claimed ones are asked about apart; and
 * (queue, ordering_key, enqueue_seq) of every keyed row on CockroachDB (a
 * key may span parts).
 *
 * On PostgreSQL the test is a scalar subquery, "is f.enqueue_seq the
 * key's first?", which runs as one descent per failed item whatever the
 * statistics say: as NOT EXISTS it became an anti-join that, with the
 * table analyzed after a drain (no rows counted, pages left), read the
 * whole key index for each failed item (the keyed claim's front walk had
 * the same fault: lib/src/dialect.c, KEY_FRONT; it_cli_blocked_plan).
 */
#ifndef ONCEQ_QUERY_KEY_HEAD_H
#define ONCEQ_QUERY_KEY_HEAD_H

/* f is its key's first unclaimed item (schema v12: the key index holds
 * only unclaimed rows) ... */
#define QV_FAILED_FIRST_PG                                                     \
  "f.enqueue_seq = (SELECT e.enqueue_seq FROM onceq_items e"                   \
  " WHERE e.queue = f.queue AND e.part = f.part"                               \
  " AND e.ordering_key = f.ordering_key AND e.ordering_key IS NOT NULL"        \
  " AND e.claim IS NULL ORDER BY e.enqueue_seq LIMIT 1)"
/* ... and no item of its key is claimed: the keys with a claimed item,
 * read once from the claimed rows of every queue (onceq_items_claim) and
 * hashed, as the claims' `busy` (lib/src/dialect.c, KEYS_CLAIMED_PG). A
 * key with an item running is not blocked, whichever item failed (a lower
 * enqueue_seq can commit after a higher one was claimed). The read costs
 * the claimed rows, as the running count does (qstats.c, SQL_RUNNING),
 * whenever failed keyed items wait (the planner may test the hashed NOT
 * IN before the descent). */
#define QV_KEY_IDLE_PG                                                         \
  " AND (f.queue, f.ordering_key) NOT IN (SELECT c.queue, c.ordering_key"      \
  " FROM onceq_items c WHERE c.claim IS NOT NULL"                              \
  " AND c.ordering_key IS NOT NULL)"
#define QV_FAILED_HEAD_PG QV_FAILED_FIRST_PG QV_KEY_IDLE_PG
/* CockroachDB: no earlier item, claimed or not, and no item of the key
 * claimed (a descent of onceq_items_key_claimed, which CockroachDB keeps) */
#define QV_FAILED_HEAD_CRDB                                                    \
  "NOT EXISTS (SELECT 1 FROM onceq_items e"                                    \
  " WHERE e.queue = f.queue AND e.ordering_key = f.ordering_key"               \
  " AND e.enqueue_seq < f.enqueue_seq)"                                        \
  " AND NOT EXISTS (SELECT 1 FROM onceq_items c WHERE c.queue = f.queue"       \
  " AND c.ordering_key = f.ordering_key AND c.ordering_key IS NOT NULL"        \
  " AND c.claim IS NOT NULL)"
/* the failed keyed items that wait (the partial index's predicate) */
#define QV_FAILED_KEYED                                                        \
  "f.ordering_key IS NOT NULL AND f.last_error IS NOT NULL"                    \
  " AND f.claim IS NULL"

#endif
