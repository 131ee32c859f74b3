-- onceq schema v5 (PostgreSQL): ordering keys. Idempotent, like v1.
--
-- ordering_key (the name Google Pub/Sub and SQS FIFO users know): items of
-- one queue and one key are claimed one at a time, in enqueue order; NULL
-- (the default) means no ordering, as before. Set by the same plain INSERT.
--
-- enqueue_seq is "enqueue order": a bigint from a sequence, assigned at
-- INSERT by the column default. Within one transaction later INSERTs get
-- higher numbers; a transaction that commits before another one enqueues
-- (causal order) gives it the lower number. Two concurrent transactions
-- get numbers in the order they called nextval, not the order they commit
-- (sequences are not transactional: PostgreSQL docs, "Sequence
-- Manipulation Functions"), so their relative order is not defined by
-- anything the producer can observe; the claim still starts them one at a
-- time (docs/enqueue.md, "Ordering keys").
--
-- The column is added without a default first and then given one, so the
-- migration does not rewrite the table (a volatile default on ADD COLUMN
-- would): rows already there keep a NULL enqueue_seq and have no key.
CREATE SEQUENCE IF NOT EXISTS onceq_items_enqueue_seq AS BIGINT;
ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS ordering_key TEXT;
ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS enqueue_seq BIGINT;
ALTER TABLE onceq_items ALTER COLUMN enqueue_seq
  SET DEFAULT nextval('onceq_items_enqueue_seq');
ALTER SEQUENCE onceq_items_enqueue_seq OWNED BY onceq_items.enqueue_seq;
-- A keyed item without an enqueue order could never be ordered; the
-- check is two NULL tests, cheap on every UPDATE. NOT VALID: the rows
-- already there (no key: the column is new) are not scanned while the
-- migration holds its lock on the table.
ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS onceq_items_key_has_seq;
ALTER TABLE onceq_items ADD CONSTRAINT onceq_items_key_has_seq
  CHECK (ordering_key IS NULL OR enqueue_seq IS NOT NULL) NOT VALID;

-- The claim's "is there an earlier item of this key still here?" probe
-- (lib/src/dialect.c, KEY_HEAD): one index descent per keyed candidate.
-- Partial, so a queue without keys maintains nothing.
CREATE INDEX IF NOT EXISTS onceq_items_key_order
  ON onceq_items (queue, ordering_key, enqueue_seq)
  WHERE ordering_key IS NOT NULL;
-- The keyed items in flight: the claim also skips a key with an item
-- claimed (a lower enqueue_seq committed after a higher one was claimed).
CREATE INDEX IF NOT EXISTS onceq_items_key_claimed
  ON onceq_items (queue, ordering_key)
  WHERE ordering_key IS NOT NULL AND claim IS NOT NULL;

-- A dead letter keeps its key: `onceq retry` puts it back at the end of
-- its key (a new enqueue_seq).
ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS ordering_key TEXT;

-- --partitioned: a key's items fall into one slot, so one part owns the
-- key and each part is a FIFO per key (as in Kafka). A column default
-- cannot read another column, so a trigger sets part from the key's hash
-- when a key is given (an explicit part is overridden for keyed items).
-- hashtext is stable across restarts of one major version; a different
-- slot after an upgrade changes only which part looks, never the order,
-- which the claim checks across parts.
CREATE OR REPLACE FUNCTION onceq_key_part() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.part := hashtext(NEW.ordering_key) & 1023;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS onceq_items_key_part ON onceq_items;
CREATE TRIGGER onceq_items_key_part
  BEFORE INSERT ON onceq_items
  FOR EACH ROW WHEN (NEW.ordering_key IS NOT NULL)
  EXECUTE FUNCTION onceq_key_part();
