-- onceq schema v3 (PostgreSQL): results and waiting (`onceq wait`,
-- `onceq push --wait`, oq_wait). Idempotent, like v1.
--
-- An item asks for its outcome to be kept with keep_result = true: a
-- column, not a payload field, so a plain INSERT from any language can set
-- it and no handler has to know about it. `onceq wait` also sets it on a
-- live item it is asked to wait for.
ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS
  keep_result BOOLEAN NOT NULL DEFAULT false;

-- One row per finished item that asked (keep_result), written in the same
-- transaction that removed the item: by the acknowledgement (outcome
-- 'done', with the handler's result) or by `onceq cancel` ('cancelled').
-- A dead-lettered item is found in onceq_dead instead. Because the ack's
-- claim-checked DELETE and this INSERT are one statement, a row exists if
-- and only if that ack committed: a rolled-back ack leaves no row.
-- result is bounded to 65536 characters; truncated says it was cut.
-- Retention: `onceq coordinator --keep-results` (default 24h).
CREATE TABLE IF NOT EXISTS onceq_results (
  item_id     UUID PRIMARY KEY,
  queue       TEXT NOT NULL,
  outcome     TEXT NOT NULL CHECK (outcome IN ('done', 'cancelled')),
  result      TEXT,
  truncated   BOOLEAN NOT NULL DEFAULT false,
  finished_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_results_finished_at
  ON onceq_results (finished_at);

-- Wake waiters: a row leaving onceq_items that asked for its result
-- (acknowledged, dead-lettered or cancelled) sends NOTIFY onceq_finished
-- with the item id. NOTIFY is delivered at commit, so a rolled-back ack
-- wakes nobody; waiters re-read the tables anyway, never trust the
-- notification alone. Items without keep_result cost one WHEN check.
CREATE OR REPLACE FUNCTION onceq_notify_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('onceq_finished', OLD.id::text);
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS onceq_items_finished ON onceq_items;
CREATE TRIGGER onceq_items_finished AFTER DELETE ON onceq_items
  FOR EACH ROW WHEN (OLD.keep_result)
  EXECUTE FUNCTION onceq_notify_finished();
