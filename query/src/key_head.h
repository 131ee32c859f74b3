/*
 * key_head.h: "is failed item f its key's first?" as the read layer asks
 * it, per engine: the blocked-key count (qstats.c) and `onceq keys
 * --blocked` (keys_view.c) start from the failed, unclaimed keyed items
 * (onceq_items_key_failed, schema v7) and keep those with no earlier item
 * of their key, one descent of onceq_items_key_order each. That index is
 * (queue, part, ordering_key, enqueue_seq) on PostgreSQL (schema v11: a
 * key's items share one part there) and (queue, ordering_key, enqueue_seq)
 * on CockroachDB (a key may span parts).
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

#define QV_FAILED_HEAD_PG                                                      \
  "f.enqueue_seq = (SELECT e.enqueue_seq FROM onceq_items e"                   \
  " WHERE e.queue = f.queue AND e.part = f.part"                               \
  " AND e.ordering_key = f.ordering_key AND e.ordering_key IS NOT NULL"        \
  " ORDER BY e.enqueue_seq LIMIT 1)"
#define QV_FAILED_HEAD_CRDB                                                    \
  "NOT EXISTS (SELECT 1 FROM onceq_items e"                                    \
  " WHERE e.queue = f.queue AND e.ordering_key = f.ordering_key"               \
  " AND e.enqueue_seq < f.enqueue_seq)"
/* the failed keyed items that wait (the partial index's predicate) */
#define QV_FAILED_KEYED                                                        \
  "f.ordering_key IS NOT NULL AND f.last_error IS NOT NULL"                    \
  " AND f.claim IS NULL"

#endif
