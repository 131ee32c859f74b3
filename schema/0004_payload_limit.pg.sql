-- onceq schema v4 (PostgreSQL): a maximum payload size. Idempotent, like v1.
--
-- A payload's JSON text, as the server prints it (payload::text), may hold
-- at most 1 MiB (1048576 bytes; OQ_MAX_PAYLOAD_BYTES in onceq/enqueue.h):
-- a worker copies every payload it claims (up to 1,000 per claim), so an
-- unbounded payload is unbounded memory (docs/enqueue.md, "Payload size").
-- Larger data belongs elsewhere (object storage, a table of your own),
-- with a reference to it in the payload.
--
-- Enforced at INSERT (and at an UPDATE that sets payload), so enqueue stays
-- a plain INSERT from any language and a larger one fails with SQLSTATE
-- 23514 (check_violation) naming onceq_items_payload_size, the same error
-- the CockroachDB variant's CHECK constraint gives.
--
-- Why a trigger here and not that CHECK constraint: PostgreSQL evaluates
-- every CHECK constraint on every UPDATE of a row, also one marked NOT VALID
-- ("The constraint will still be enforced against subsequent inserts or
-- updates", PostgreSQL docs, ALTER TABLE ... ADD table_constraint NOT
-- VALID). Every claim, release, retry and the reap's ON DELETE SET NULL
-- updates onceq_items rows: the check would convert each payload to text
-- on the claim's hot path, and a row larger than the limit that was
-- already there before this migration would make those updates fail (a
-- reap that cannot delete its session, a claim that fails for the whole
-- batch). The trigger checks only rows that write a payload; rows already
-- there are neither checked nor changed, so the migration cannot fail on
-- them, and they run as before. The WHEN clause keeps the cost of a
-- passing row to one expression, without a plpgsql call.
CREATE OR REPLACE FUNCTION onceq_payload_too_large() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'new row for relation "onceq_items" violates check constraint "onceq_items_payload_size"'
    USING ERRCODE = 'check_violation',
          CONSTRAINT = 'onceq_items_payload_size',
          TABLE = 'onceq_items',
          DETAIL = format('The payload is %s bytes of JSON text; at most 1048576 (1 MiB).',
                          octet_length(NEW.payload::text));
END
$$;
DROP TRIGGER IF EXISTS onceq_items_payload_size ON onceq_items;
CREATE TRIGGER onceq_items_payload_size
  BEFORE INSERT OR UPDATE OF payload ON onceq_items
  FOR EACH ROW WHEN (octet_length(NEW.payload::text) > 1048576)
  EXECUTE FUNCTION onceq_payload_too_large();
