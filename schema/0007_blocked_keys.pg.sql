-- onceq schema v7 (PostgreSQL): the blocked ordering keys, counted on
-- every `onceq stats`, status page load and metrics refresh (query/src/
-- qstats.c). Idempotent, like v1.
--
-- A key is blocked when its head (its item with the lowest enqueue_seq)
-- has failed (last_error set) and is not running (claim IS NULL): the
-- definition `onceq keys --blocked` lists. This partial index holds only
-- the keyed items that failed and wait, so the count reads those and, for
-- each, one probe of onceq_items_key_order for an earlier item of its key:
-- its cost follows the failed items, not the table (docs/cli.md, "Blocked
-- keys"). An item enters it when a failure releases it and leaves it when
-- it is claimed again or deleted; the claim and the failure already
-- change the indexed claim column, so no update that was HOT stops being.
CREATE INDEX IF NOT EXISTS onceq_items_key_failed
  ON onceq_items (queue, ordering_key, enqueue_seq)
  WHERE ordering_key IS NOT NULL AND last_error IS NOT NULL
  AND claim IS NULL;
