-- onceq schema v12 (PostgreSQL): the keyed index holds only the unclaimed
-- keyed rows. Idempotent, like v1; it depends on v11 (the index's columns)
-- and on no migration after it.
--
-- A claim is an UPDATE that sets `claim`, never heap-only (v10's
-- comment), so every claimed row's new version got an entry in each index
-- whose predicate it satisfies: onceq_items_key_order (queue, part,
-- ordering_key, enqueue_seq: two text and two integer columns) among them,
-- for every keyed claim. With `claim IS NULL` in its predicate a claimed
-- version is not indexed there: a keyed claim writes the entries an
-- unkeyed one writes. Measured (docs/benchmarks.md, "The keyed index
-- without the claimed rows (session 23)"): the ack's next-item statement
-- for 250 keys, and the keyed drains.
--
-- Every reader of the index asks for unclaimed rows (`claim IS NULL` in
-- its WHERE, so the planner may use the partial index) and learns about a
-- key's claimed items another way, as the claims already did
-- (lib/src/dialect.c, KEYS_CLAIMED_PG): a key's first unclaimed row is its
-- head unless an item of the key is claimed.
--
-- Rebuilding takes the table's ACCESS EXCLUSIVE lock until the migration
-- commits (lib/src/migrate.c): apply it when the fleet is quiet, as any
-- migration, and with no v11 worker left running: a v11 worker stays
-- correct (it only looks in the wrong places), but its statements no
-- longer find an index for their key probes. Measured at 40,000 items:
-- its check "does the queue hold keyed items?" scans the table on every
-- claim (an unkeyed claim of 10: 0.28 -> 6.3 ms), and its keyed claim of
-- 1,000 took 6.1 s, past the 4 s statement deadline, so it stops claiming
-- keyed items. Its next session is refused, as a schema newer than the
-- binary always is (docs/worker.md).
--
-- Rebuilt unless the index already has v11's columns and this predicate
-- (a second run changes nothing).
DO $$
DECLARE def text := coalesce(pg_get_indexdef(
  to_regclass('onceq_items_key_order')), '');
BEGIN
  IF position('(queue, part, ordering_key, enqueue_seq)' IN def) = 0
      OR position('claim IS NULL' IN def) = 0 THEN
    DROP INDEX IF EXISTS onceq_items_key_order;
    CREATE INDEX onceq_items_key_order
      ON onceq_items (queue, part, ordering_key, enqueue_seq)
      WHERE ordering_key IS NOT NULL AND claim IS NULL;
  END IF;
END
$$;
