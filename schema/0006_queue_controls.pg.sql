-- onceq schema v6 (PostgreSQL): per-queue controls, set by operators (`onceq pause|resume`,
-- oq_queue_pause/oq_queue_resume in onceq/queues.h) and read by every
-- claim. Idempotent, like v1; it
-- depends on no other migration after v1.
--
-- One row per queue that has a control; a queue without a row has none
-- (the fast path: the claim's lookup of its row finds nothing). A row
-- with paused = false is the same as no row.
--  - paused: claims skip the queue (the claim statements' QUEUE_OPEN
--    predicate, lib/src/dialect.c); enqueue, acks, fails and the reap are
--    unaffected, so items in flight finish.
--  - max_running: at most this many items of the queue claimed at once
--    across the fleet (`onceq limit Q --concurrency N`); NULL: no limit.
--    Claimed items of a crashed worker count until its session is reaped.
--  - rate_limit, rate_interval: at most rate_limit starts (claims) per
--    rate_interval across the fleet (`onceq limit Q --rate N/INTERVAL`), a
--    token bucket of rate_limit tokens refilled at rate_limit per
--    rate_interval: rate_tokens as of rate_at. NULL: no rate limit.
--  - updated_at: when an operator last changed the row (database clock).
CREATE TABLE IF NOT EXISTS onceq_queues (
  queue      TEXT PRIMARY KEY,
  paused     BOOLEAN NOT NULL DEFAULT false,
  max_running INT CHECK (max_running >= 0),
  rate_limit INT CHECK (rate_limit > 0),
  rate_interval INTERVAL CHECK (rate_interval > interval '0'),
  rate_tokens DOUBLE PRECISION,
  rate_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
