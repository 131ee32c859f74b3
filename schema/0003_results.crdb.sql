-- onceq schema v3, CockroachDB VARIANT of 0003_results.pg.sql (see it for
-- what each object is for). Differs in having no NOTIFY trigger:
-- CockroachDB has no LISTEN/NOTIFY, so waiters poll with backoff
-- (lib/src/wait.c). Each statement runs on its own and is idempotent.
-- No statement may end a line with ';' except at its end.

ALTER TABLE onceq_items ADD COLUMN IF NOT EXISTS keep_result BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS onceq_results (
  item_id     UUID PRIMARY KEY,
  queue       TEXT NOT NULL,
  outcome     TEXT NOT NULL CHECK (outcome IN ('done', 'cancelled')),
  result      TEXT,
  truncated   BOOLEAN NOT NULL DEFAULT false,
  finished_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS onceq_results_finished_at ON onceq_results (finished_at);
