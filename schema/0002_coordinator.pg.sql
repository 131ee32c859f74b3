-- onceq schema v2 (PostgreSQL): what the coordinator daemon (`onceq
-- coordinator`) and `onceq schedule` keep. Idempotent, like v1.

-- Leadership: at most one row per name; the holder is a live session. When
-- the session is reaped (or ends), ON DELETE CASCADE removes the lease in
-- the same statement, so leadership fails over by the same reaping that
-- releases claims. This is a second FK to onceq_sessions, on a different
-- table: onceq_items.claim keeps its single FK path.
CREATE TABLE IF NOT EXISTS onceq_leases (
  name        TEXT PRIMARY KEY,
  session_id  UUID NOT NULL REFERENCES onceq_sessions (id) ON DELETE CASCADE,
  acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- The cascade looks leases up by session.
CREATE INDEX IF NOT EXISTS onceq_leases_session ON onceq_leases (session_id);

-- Cron schedules. next_run_at is the next occurrence not yet enqueued; the
-- leader advances it with a compare-and-set in the same transaction that
-- enqueues the occurrence (unique_key 'schedule:<name>:<epoch seconds>'),
-- so each occurrence is enqueued once, across leader changes.
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

-- Dead-job notifications: notified_at is set once the --notify-url
-- receiver settled the item (2xx, or a permanent 4xx kept in
-- notify_status). The partial index holds only the items still to notify.
ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS notified_at TIMESTAMPTZ;
ALTER TABLE onceq_dead ADD COLUMN IF NOT EXISTS notify_status INT;
CREATE INDEX IF NOT EXISTS onceq_dead_unnotified
  ON onceq_dead (died_at) WHERE notified_at IS NULL;
-- `onceq stats`: per-queue dead counts (LIMIT-capped) and the queue list.
CREATE INDEX IF NOT EXISTS onceq_dead_queue ON onceq_dead (queue);
