-- onceq schema v1 (PostgreSQL). Idempotent: every object is created with
-- IF NOT EXISTS / OR REPLACE so a re-run is harmless. The migration runner
-- holds an advisory lock, so concurrent runners apply it one at a time.

CREATE TABLE IF NOT EXISTS onceq_sessions (
  id             UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  heartbeated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  expiry         INTERVAL NOT NULL,
  created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  hostname       TEXT NOT NULL DEFAULT '',
  pid            INT NOT NULL DEFAULT 0,
  version        TEXT NOT NULL DEFAULT '',
  queues         TEXT NOT NULL DEFAULT '',
  -- takes part in static partition assignment (set by the session's first
  -- partitioned round; lib/src/partition.c)
  partitioned    BOOLEAN NOT NULL DEFAULT false
);

-- part: a slot in 0..1023 used by static partitioning; the default makes a
-- plain INSERT from any language valid.
CREATE TABLE IF NOT EXISTS onceq_items (
  id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  queue        TEXT NOT NULL DEFAULT 'default',
  payload      JSONB NOT NULL DEFAULT '{}',
  priority     INT NOT NULL DEFAULT 0,
  run_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  attempts     INT NOT NULL DEFAULT 0,
  max_attempts INT NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
  unique_key   TEXT UNIQUE,
  last_error   TEXT,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  part         INT NOT NULL DEFAULT (floor(random() * 1024))::INT
                 CHECK (part >= 0 AND part < 1024),
  claim        UUID REFERENCES onceq_sessions (id) ON DELETE SET NULL,
  claimed_at   TIMESTAMPTZ
);

-- The unclaimed items in claim order: both claim statements walk this.
-- part (the slot) is the last key: a partitioned claim's slot range is an
-- Index Cond checked on the index entries themselves, so it walks the
-- queue in (priority, run_at) order and never visits, locks or
-- predicate-locks another block's rows (no second index to maintain).
CREATE INDEX IF NOT EXISTS onceq_items_ready
  ON onceq_items (queue, priority DESC, run_at, part) WHERE claim IS NULL;
-- The reap cascade (SET NULL) and recovery look items up by claim.
CREATE INDEX IF NOT EXISTS onceq_items_claim
  ON onceq_items (claim) WHERE claim IS NOT NULL;
-- Items abandoned on their last attempt; normally empty, swept by reapers.
CREATE INDEX IF NOT EXISTS onceq_items_exhausted
  ON onceq_items (id) WHERE claim IS NULL AND attempts >= max_attempts;

CREATE TABLE IF NOT EXISTS onceq_dead (
  id           UUID PRIMARY KEY,
  queue        TEXT NOT NULL,
  payload      JSONB NOT NULL,
  priority     INT NOT NULL,
  attempts     INT NOT NULL,
  max_attempts INT NOT NULL,
  unique_key   TEXT,
  last_error   TEXT,
  created_at   TIMESTAMPTZ NOT NULL,
  died_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_dead_died_at ON onceq_dead (died_at);

-- No FK to sessions: history outlives the session that wrote it.
CREATE TABLE IF NOT EXISTS onceq_done (
  item_id    UUID PRIMARY KEY,
  queue      TEXT NOT NULL,
  attempts   INT NOT NULL,
  session_id UUID,
  result     TEXT,
  created_at TIMESTAMPTZ NOT NULL,
  done_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_done_done_at ON onceq_done (done_at);

-- Which session owns which part (0..P-1, P in onceq_settings 'partitions').
-- Slot s (onceq_items.part) belongs to part s * P / 1024. part is the key:
-- at most one owner; a reaped session's rows go with it (CASCADE).
CREATE TABLE IF NOT EXISTS onceq_session_parts (
  part       INT PRIMARY KEY CHECK (part >= 0 AND part < 1024),
  session_id UUID NOT NULL REFERENCES onceq_sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS onceq_session_parts_session
  ON onceq_session_parts (session_id);

CREATE TABLE IF NOT EXISTS onceq_settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- Wake idle workers when items are committed: NOTIFY is delivered only at
-- commit, so a rolled-back enqueue never wakes anyone. Statement-level with a
-- transition table, so a bulk insert sends one notification per queue.
CREATE OR REPLACE FUNCTION onceq_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('onceq', q.queue) FROM (SELECT DISTINCT queue FROM new_items) q;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS onceq_items_notify ON onceq_items;
CREATE TRIGGER onceq_items_notify AFTER INSERT ON onceq_items
  REFERENCING NEW TABLE AS new_items
  FOR EACH STATEMENT EXECUTE FUNCTION onceq_notify_insert();
