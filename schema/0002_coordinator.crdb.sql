-- onceq schema v2, CockroachDB VARIANT of 0002_coordinator.pg.sql (see it
-- for what each object is for). Differs in INT4 for the 32-bit
-- integer column (CockroachDB's INT is 64-bit) and gc.ttlseconds on the
-- lease table (at the end). The runner executes each
-- statement on its own, outside an explicit transaction; each one is
-- idempotent (IF NOT EXISTS), so a re-run after a partial failure is safe.
-- No statement may end a line with ';' except at its end.
--
-- The lease FK is a separate table's only FK to onceq_sessions, with one
-- action (CASCADE); onceq_items.claim keeps its single SET NULL path.

CREATE TABLE IF NOT EXISTS onceq_leases (
  name        TEXT PRIMARY KEY,
  session_id  UUID NOT NULL REFERENCES onceq_sessions (id) ON DELETE CASCADE,
  acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_leases_session ON onceq_leases (session_id);

CREATE TABLE IF NOT EXISTS onceq_schedules (
  name         TEXT PRIMARY KEY CHECK (name <> ''),
  cron         TEXT NOT NULL,
  queue        TEXT NOT NULL CHECK (queue <> ''),
  payload      JSONB NOT NULL DEFAULT '{}',
  next_run_at  TIMESTAMPTZ NOT NULL,
  last_run_at  TIMESTAMPTZ,
  last_item_id UUID,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_schedules_due
  ON onceq_schedules (next_run_at);

ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS notified_at TIMESTAMPTZ;
ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS notify_status INT4;
CREATE INDEX IF NOT EXISTS onceq_dead_unnotified
  ON onceq_dead (died_at) WHERE notified_at IS NULL;
CREATE INDEX IF NOT EXISTS onceq_dead_queue ON onceq_dead (queue);

-- https://www.cockroachlabs.com/docs/stable/configure-replication-zones
-- (gc.ttlseconds): lease rows are rewritten on every leadership change and
-- deleted with their session; keep 10 minutes of MVCC history like the
-- queue tables in 0001.
ALTER TABLE onceq_leases CONFIGURE ZONE USING gc.ttlseconds = 600;
