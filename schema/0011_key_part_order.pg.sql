-- onceq schema v11 (PostgreSQL): a key's slot is the same on every server
-- version, and the keyed index leads with it. Idempotent, like v1; it
-- depends on v5 (ordering keys) and on no migration after it.
--
-- onceq_items_key_order was (queue, ordering_key, enqueue_seq). A
-- --partitioned worker owns a run of slots, yet the loose scan of a keyed
-- claim (lib/src/dialect.c, KEY_HEADS) walked every key of the queue: 999
-- descents, most of an empty claim's time, for a worker whose slots hold a
-- quarter of the keys. With part as the second column the scan walks only
-- the keys in the worker's run, and a claim that is not partitioned walks
-- every (part, key) pair, one per key as before. Measured on the four-worker
-- --partitioned ledger drain (docs/benchmarks.md, "The keyed index leads
-- with the slot (session 19)").
--
-- Every probe of one key (the next-item statement, the front walk's "no
-- earlier item", `onceq keys`, the blocked count) then names the key's
-- part, so all items of one queue and key must share one part, on
-- PostgreSQL always (CockroachDB keeps v5's index and its probes look
-- across parts: 0011_key_part_order.crdb.sql). Three things keep it:
--  - onceq_key_slot(key) is the first 32 bits of the SHA-256 of the key's
--    bytes (UTF-8 in a UTF8 database), modulo 1024: a documented function
--    whose result never changes (SHA-256, not md5, which a server in FIPS
--    mode refuses); hashtext, which v5 used, is an internal function that
--    PostgreSQL has changed between major versions (8.3 to 8.4) and says
--    not to rely on (pgsql-hackers, "Document hashtext() and Friends?",
--    2012), so after such an upgrade a key's old and new items would have
--    had different slots;
--  - the trigger sets part on INSERT and now also on an UPDATE that names
--    ordering_key or part (a claim names neither, so it pays nothing);
--  - the keyed rows already queued get their new slot below (an UPDATE of
--    every keyed row, once). A slot only decides which worker looks for
--    an item: a claimed item stays claimed and is acknowledged by its own
--    claim-checked DELETE, whichever slot it moves to.
-- The slots are recomputed whenever this runs (a re-run finds none to
-- change); the index is rebuilt once (below). Both steps take locks until
-- the migration commits (lib/src/migrate.c): apply it when the fleet is
-- quiet, as any migration. A v10 worker still running stays correct (its
-- probes of one key look across parts; without the key as a prefix of the
-- index they read the queue's keyed entries: slower keyed claims); its
-- next session is refused, as a schema newer than the binary always is
-- (docs/worker.md).
--
-- The key's bytes are its text in the database's own encoding
-- (convert_to to that encoding converts nothing and cannot fail; to 'UTF8'
-- it would refuse a SQL_ASCII database's non-UTF-8 keys). STABLE, as
-- getdatabaseencoding() is: no index is built on it.
CREATE OR REPLACE FUNCTION onceq_key_slot(k text) RETURNS integer
  LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT ('x' || encode(substring(sha256(convert_to(k,
    getdatabaseencoding())) FROM 1 FOR 4), 'hex'))::bit(32)::integer & 1023
$$;

-- The same expression as onceq_key_slot, written out: the trigger then
-- calls only pg_catalog functions, found whatever the search_path (a
-- data-only pg_restore runs with an empty one). it_lib_ordering checks
-- that the two agree.
CREATE OR REPLACE FUNCTION onceq_key_part() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.part := ('x' || encode(substring(sha256(convert_to(NEW.ordering_key,
    getdatabaseencoding())) FROM 1 FOR 4), 'hex'))::bit(32)::integer & 1023;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS onceq_items_key_part ON onceq_items;
CREATE TRIGGER onceq_items_key_part
  BEFORE INSERT OR UPDATE OF ordering_key, part ON onceq_items
  FOR EACH ROW WHEN (NEW.ordering_key IS NOT NULL)
  EXECUTE FUNCTION onceq_key_part();

UPDATE onceq_items SET part = onceq_key_slot(ordering_key)
  WHERE ordering_key IS NOT NULL
  AND part IS DISTINCT FROM onceq_key_slot(ordering_key);

-- Rebuilt unless its second column is already part (pg_index.indkey is
-- 0-based; the index's text would also name the table's schema).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_index x JOIN pg_attribute a
      ON a.attrelid = x.indrelid AND a.attnum = x.indkey[1]
      WHERE x.indexrelid = to_regclass('onceq_items_key_order')
      AND a.attname = 'part') THEN
    DROP INDEX IF EXISTS onceq_items_key_order;
    CREATE INDEX onceq_items_key_order
      ON onceq_items (queue, part, ordering_key, enqueue_seq)
      WHERE ordering_key IS NOT NULL;
  END IF;
END
$$;
