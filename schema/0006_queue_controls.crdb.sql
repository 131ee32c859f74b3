-- onceq schema v6,
-- CockroachDB VARIANT of 0006_queue_controls.pg.sql (see it for the
-- columns and why): per-queue controls read by every claim.
CREATE TABLE IF NOT EXISTS onceq_queues (
  queue      STRING PRIMARY KEY,
  paused     BOOL NOT NULL DEFAULT false,
  max_running INT4 CHECK (max_running >= 0),
  rate_limit INT4 CHECK (rate_limit > 0),
  rate_interval INTERVAL CHECK (rate_interval > interval '0'),
  rate_tokens FLOAT8,
  rate_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
