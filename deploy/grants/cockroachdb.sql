-- deploy/grants/cockroachdb.sql: least-privilege roles for onceq on
-- CockroachDB; the same roles and rights as deploy/grants/postgres.sql
-- (read that file's header), with two differences CockroachDB imposes:
--  - CREATE ROLE IF NOT EXISTS instead of a DO block;
--  - no column privileges, so onceq_producer gets UPDATE on all of
--    onceq_items (PostgreSQL: only keep_result, for `onceq wait`). A
--    producer that never runs `onceq wait` does not need it: drop that
--    line. Likewise onceq_worker reads all of onceq_dead (PostgreSQL: only
--    its id column, which reconciling an ack looks up).
-- Run it as the owner of the onceq tables:
--   cockroach sql --url "$OWNER_URL" --file deploy/grants/cockroachdb.sql
-- If CockroachDB checks the deleting role's rights on the tables a
-- cascade reaches (PostgreSQL runs foreign-key actions as the table owner),
-- a reaping worker also needs DELETE on onceq_leases (ON DELETE CASCADE
-- from onceq_sessions).
-- Untested in CI (no CockroachDB binary runs there); the PostgreSQL file is
-- checked by test/cli/cli_grants.sh.
CREATE ROLE IF NOT EXISTS onceq_producer;
CREATE ROLE IF NOT EXISTS onceq_worker;
CREATE ROLE IF NOT EXISTS onceq_coordinator;

-- producer
GRANT SELECT ON onceq_items, onceq_dead, onceq_done, onceq_results,
  onceq_sessions, onceq_session_parts, onceq_settings, onceq_schedules,
  onceq_leases, onceq_migrations, onceq_queues TO onceq_producer;
GRANT INSERT ON onceq_items TO onceq_producer;
GRANT UPDATE ON onceq_items TO onceq_producer;
-- enqueue_seq's default (schema v5) calls nextval: producers and the
-- coordinator (onceq requeue, schedules) insert items.
GRANT USAGE ON SEQUENCE onceq_items_enqueue_seq TO onceq_producer,
  onceq_coordinator;

-- worker
GRANT SELECT, INSERT, UPDATE, DELETE ON onceq_sessions TO onceq_worker;
GRANT SELECT, UPDATE, DELETE ON onceq_items TO onceq_worker;
-- onceq_dead: insert (dead-lettering), and read (reconciling an ack whose
-- outcome is unknown looks the item up there; PostgreSQL grants only the
-- id column)
GRANT SELECT, INSERT ON onceq_dead TO onceq_worker;
GRANT SELECT, INSERT, UPDATE ON onceq_done TO onceq_worker;
GRANT SELECT, INSERT, UPDATE ON onceq_results TO onceq_worker;
GRANT SELECT, INSERT, DELETE ON onceq_session_parts TO onceq_worker;
GRANT SELECT ON onceq_settings, onceq_migrations TO onceq_worker;
-- onceq_queues: every claim reads its queues' controls (pause, limits); a
-- limited queue's claim locks its row with an UPDATE that refills its rate
-- limit's token bucket (rate_tokens, rate_at) and then takes tokens
-- (docs/design.md). Only operators (the coordinator role) change the
-- controls themselves (paused, max_running, rate_limit, rate_interval).
-- (CockroachDB has no column-level privileges: UPDATE on the table.)
GRANT SELECT, UPDATE ON onceq_queues TO onceq_worker;

-- coordinator (and operator commands)
GRANT SELECT, INSERT, UPDATE, DELETE ON onceq_items, onceq_dead, onceq_done,
  onceq_results, onceq_sessions, onceq_session_parts, onceq_settings,
  onceq_schedules, onceq_leases, onceq_queues TO onceq_coordinator;
GRANT SELECT ON onceq_migrations TO onceq_coordinator;
