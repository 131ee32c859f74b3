-- onceq schema v1, CockroachDB VARIANT. Differs from 0001_init.pg.sql in:
--  * no LISTEN/NOTIFY trigger (CockroachDB has neither; workers poll);
--  * gc.ttlseconds lowered on the queue tables, so MVCC garbage left by
--    claims and acks does not pile up ahead of the live rows;
--  * the ready index STORING the columns the claim returns;
--  * partitioned claims get their own index, onceq_items_part_ready, with
--    part second, so that each block is a key span of its own and a claim
--    never meets another block's intents (PostgreSQL instead keeps part as
--    the last key of onceq_items_ready and checks the range in the index).
-- Every statement is idempotent; the runner executes them outside an
-- explicit transaction (schema changes in explicit transactions are limited
-- in CockroachDB).

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

CREATE TABLE IF NOT EXISTS onceq_items (
  id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
  queue        TEXT NOT NULL DEFAULT 'default',
  payload      JSONB NOT NULL DEFAULT '{}',
  priority     INT4 NOT NULL DEFAULT 0,
  run_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  attempts     INT4 NOT NULL DEFAULT 0,
  max_attempts INT4 NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
  unique_key   TEXT UNIQUE,
  last_error   TEXT,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  part         INT4 NOT NULL DEFAULT (floor(random() * 1024))::INT4
                 CHECK (part >= 0 AND part < 1024),
  claim        UUID REFERENCES onceq_sessions (id) ON DELETE SET NULL,
  claimed_at   TIMESTAMPTZ
);

CREATE INDEX IF NOT EXISTS onceq_items_ready
  ON onceq_items (queue, priority DESC, run_at)
  STORING (attempts, max_attempts) WHERE claim IS NULL;
-- Partitioned claims: a block of parts is one contiguous slot range, so
-- each session's claims scan a span of its own.
CREATE INDEX IF NOT EXISTS onceq_items_part_ready
  ON onceq_items (queue, part, priority DESC, run_at)
  STORING (attempts, max_attempts) WHERE claim IS NULL;
CREATE INDEX IF NOT EXISTS onceq_items_claim
  ON onceq_items (claim) WHERE claim IS NOT NULL;
CREATE INDEX IF NOT EXISTS onceq_items_exhausted
  ON onceq_items (id) WHERE claim IS NULL AND attempts >= max_attempts;

CREATE TABLE IF NOT EXISTS onceq_dead (
  id           UUID PRIMARY KEY,
  queue        TEXT NOT NULL,
  payload      JSONB NOT NULL,
  priority     INT4 NOT NULL,
  attempts     INT4 NOT NULL,
  max_attempts INT4 NOT NULL,
  unique_key   TEXT,
  last_error   TEXT,
  created_at   TIMESTAMPTZ NOT NULL,
  died_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_dead_died_at ON onceq_dead (died_at);

CREATE TABLE IF NOT EXISTS onceq_done (
  item_id    UUID PRIMARY KEY,
  queue      TEXT NOT NULL,
  attempts   INT4 NOT NULL,
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
  part       INT4 PRIMARY KEY CHECK (part >= 0 AND part < 1024),
  session_id UUID NOT NULL REFERENCES onceq_sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS onceq_session_parts_session
  ON onceq_session_parts (session_id);

CREATE TABLE IF NOT EXISTS onceq_settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- https://www.cockroachlabs.com/docs/stable/configure-replication-zones
-- (gc.ttlseconds): queue rows are short-lived; keep 10 minutes of history.
ALTER TABLE onceq_items CONFIGURE ZONE USING gc.ttlseconds = 600;
ALTER TABLE onceq_sessions CONFIGURE ZONE USING gc.ttlseconds = 600;
ALTER TABLE onceq_session_parts CONFIGURE ZONE USING gc.ttlseconds = 600;
