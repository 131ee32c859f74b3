-- onceq schema v7, CockroachDB VARIANT of 0007_blocked_keys.pg.sql (see
-- it for why): the failed, waiting keyed items, for the blocked keys
-- count. The same partial index; one statement per line.
CREATE INDEX IF NOT EXISTS onceq_items_key_failed ON onceq_items (queue, ordering_key, enqueue_seq) WHERE ordering_key IS NOT NULL AND last_error IS NOT NULL AND claim IS NULL;
