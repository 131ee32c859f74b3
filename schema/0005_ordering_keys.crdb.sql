-- onceq schema v5, CockroachDB VARIANT of 0005_ordering_keys.pg.sql (see
-- it for the columns). Differences:
--  * enqueue_seq comes from a sequence, not unique_rowid(): unique_rowid()
--    is built from the inserting node's clock and node id and is only
--    "somewhat time-ordered" (CockroachDB docs, SQL FAQs, "What are the
--    differences between UUID, sequences, and unique_rowid()?",
--    https://www.cockroachlabs.com/docs/stable/sql-faqs), so an enqueue on
--    one node committed before another enqueue on a node whose clock lags
--    could get the higher number. A sequence is "highly time-ordered":
--    nextval on any node after a committed nextval returns more, which
--    keeps causally ordered enqueues in order, at the price of one
--    contended counter per INSERT (docs/cockroachdb.md).
--  * no trigger setting part from the key: producers on CockroachDB that
--    use --partitioned should set part to a hash of the key themselves;
--    a key spread over parts is still ordered, since the claim looks
--    across parts, only slower.
-- Each statement runs on its own and is idempotent.
CREATE SEQUENCE IF NOT EXISTS onceq_items_enqueue_seq;
ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS ordering_key STRING;
-- The default is set after the column is added, as on PostgreSQL: ADD
-- COLUMN with DEFAULT nextval() on a table that has rows fails on
-- CockroachDB ("nextval(): cannot backfill such sequence operation",
-- cockroachdb/cockroach#42508); SET DEFAULT backfills nothing, so rows
-- already there keep a NULL enqueue_seq and have no key.
ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS enqueue_seq INT8;
ALTER TABLE onceq_items ALTER COLUMN enqueue_seq SET DEFAULT nextval('onceq_items_enqueue_seq');
CREATE INDEX IF NOT EXISTS onceq_items_key_order ON onceq_items (queue, ordering_key, enqueue_seq) WHERE ordering_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS onceq_items_key_claimed ON onceq_items (queue, ordering_key) WHERE ordering_key IS NOT NULL AND claim IS NOT NULL;
ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS ordering_key STRING;
