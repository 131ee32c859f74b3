-- onceq schema v10 (PostgreSQL): item ids are time-ordered, and the claim
-- walks items of one (priority, run_at) in enqueue order. Idempotent, like
-- v1; it depends on v5 (enqueue_seq) and on no migration after it.
--
-- A claim is an UPDATE of each claimed row, and every UPDATE that sets
-- `claim` adds the row's new version to each index of the table, the
-- primary key among them (a heap-only update is impossible: `claim` is in
-- onceq_items_claim and in onceq_items_ready's predicate). With random
-- (version 4) ids, the 1,000 rows of a claim put their primary-key entries
-- on 1,000 random leaf pages; with ids that grow with time, claimed in
-- that order, they fill a few adjacent pages. Measured on the default
-- `--sql` ledger drain (docs/benchmarks.md, "Time-ordered item ids").
--
-- onceq_item_id() is a version 7 UUID (RFC 9562: 48 bits of Unix time in
-- milliseconds, then the version, 74 random bits and the variant), built
-- from gen_random_uuid() (core since PostgreSQL 13) so it needs no
-- extension: the random UUID's first 6 bytes are replaced by the time,
-- and its version nibble 4 (0100) becomes 7 (0111) by setting bits 52 and
-- 53 (set_bit numbers bits from the least significant bit of byte 0).
-- clock_timestamp(), not now(): the ids of one large INSERT grow with it.
-- A plain SQL function, so the planner inlines it into each INSERT.
-- Ids stay unique by their 74 random bits; within one millisecond their
-- order is random. Only the DEFAULT changes: an id a producer chooses is
-- still its own, and the items already queued keep theirs.
--
-- onceq_items_ready gains enqueue_seq (v5: a sequence's number, given at
-- INSERT, so it follows enqueue order as the ids do, in 8 bytes instead of
-- 16) after run_at, so the items of one priority and run_at (one bulk
-- INSERT's) are claimed in enqueue order too, and their ids with them.
-- part stays the last key: a partitioned claim's slot range is still an
-- Index Cond on the entries (test/parts/parts_explain.c). Rebuilding it
-- takes the table's ACCESS EXCLUSIVE lock until the migration commits
-- (lib/src/migrate.c): claims wait meanwhile, so apply it when the fleet
-- is quiet, as any migration.
CREATE OR REPLACE FUNCTION onceq_item_id() RETURNS uuid
  LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(date_part('epoch', clock_timestamp())
    * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
ALTER TABLE onceq_items ALTER COLUMN id SET DEFAULT onceq_item_id();
-- Rebuilt only when it lacks enqueue_seq: a second run changes nothing.
DO $$
BEGIN
  IF position('enqueue_seq' IN coalesce(pg_get_indexdef(
      to_regclass('onceq_items_ready')), '')) = 0 THEN
    DROP INDEX IF EXISTS onceq_items_ready;
    CREATE INDEX onceq_items_ready ON onceq_items
      (queue, priority DESC, run_at, enqueue_seq, part) WHERE claim IS NULL;
  END IF;
END
$$;
