-- deploy/grants/postgres.sql: least-privilege roles for onceq on PostgreSQL.
--
-- Run it as the owner of the onceq tables (the role that ran `onceq
-- migrate`), in the onceq database, after every `onceq migrate` that adds
-- tables:  psql "$OWNER_URL" -v ON_ERROR_STOP=1 -f deploy/grants/postgres.sql
-- It is idempotent. It makes three group roles (NOLOGIN) and grants them
-- rights on the onceq_* tables only; make login roles members of them:
--   CREATE ROLE app_worker LOGIN PASSWORD '...' IN ROLE onceq_worker;
--
--   onceq_producer     enqueue (INSERT, `onceq push`), `onceq wait` (which
--                      sets keep_result on a live item), read status
--                      (`onceq list|show|stats|sessions|parts`)
--   onceq_worker       `onceq-worker`: its session (register, heartbeat,
--                      delete), claim, ack, fail, release, dead-letter,
--                      history (--history), kept results, reaping expired
--                      sessions, partition ownership, reading the ids in
--                      onceq_dead (reconciling an ack). Grant the tables a
--                      --sql handler writes separately.
--   onceq_coordinator  `onceq coordinator` and the operator commands
--                      (cancel, retry, reap, schedule, parts set): all rows
--                      of every onceq table, the leader lease, schedules,
--                      retention.
-- None of them may DROP, ALTER or TRUNCATE a table (only the owner can),
-- nor read a table it was not granted. Schema changes stay with the owner
-- (`onceq migrate`). On PostgreSQL 14 and older, PUBLIC may create tables
-- in schema public: REVOKE CREATE ON SCHEMA public FROM PUBLIC.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onceq_producer') THEN
    CREATE ROLE onceq_producer NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onceq_worker') THEN
    CREATE ROLE onceq_worker NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onceq_coordinator') THEN
    CREATE ROLE onceq_coordinator NOLOGIN;
  END IF;
END
$$;

-- producer
GRANT SELECT ON onceq_items, onceq_dead, onceq_done, onceq_results,
  onceq_sessions, onceq_session_parts, onceq_settings, onceq_schedules,
  onceq_leases, onceq_migrations, onceq_queues TO onceq_producer;
GRANT INSERT ON onceq_items TO onceq_producer;
GRANT UPDATE (keep_result) ON onceq_items TO onceq_producer;
-- enqueue_seq's default (schema v5) calls nextval: producers and the
-- coordinator (onceq requeue, schedules) insert items.
GRANT USAGE ON SEQUENCE onceq_items_enqueue_seq TO onceq_producer,
  onceq_coordinator;
-- and the id's default (schema v10) calls onceq_item_id(): PUBLIC may run
-- a new function unless a database revoked that, so say it here too.
GRANT EXECUTE ON FUNCTION onceq_item_id() TO onceq_producer, onceq_coordinator;

-- worker
GRANT SELECT, INSERT, UPDATE, DELETE ON onceq_sessions TO onceq_worker;
GRANT SELECT, UPDATE, DELETE ON onceq_items TO onceq_worker;
-- onceq_dead: insert (dead-lettering), and read only the ids: an ack whose
-- outcome is unknown (ambiguous commit, a lost claim) is reconciled by
-- looking the item up there (gone and dead: lost, not acknowledged). Dead
-- payloads and errors stay unreadable.
GRANT SELECT (id), INSERT ON onceq_dead TO onceq_worker;
GRANT SELECT, INSERT, UPDATE ON onceq_done TO onceq_worker;
GRANT SELECT, INSERT, UPDATE ON onceq_results TO onceq_worker;
GRANT SELECT, INSERT, DELETE ON onceq_session_parts TO onceq_worker;
GRANT SELECT ON onceq_settings, onceq_migrations TO onceq_worker;
-- onceq_queues: every claim reads its queues' controls (pause, limits); a
-- limited queue's claim locks its row with an UPDATE that refills its rate
-- limit's token bucket (rate_tokens, rate_at) and then takes tokens
-- (docs/design.md). Only operators (the coordinator role) change the
-- controls themselves (paused, max_running, rate_limit, rate_interval).
GRANT SELECT, UPDATE (rate_tokens, rate_at) ON onceq_queues TO onceq_worker;

-- coordinator (and operator commands)
GRANT SELECT, INSERT, UPDATE, DELETE ON onceq_items, onceq_dead, onceq_done,
  onceq_results, onceq_sessions, onceq_session_parts, onceq_settings,
  onceq_schedules, onceq_leases, onceq_queues TO onceq_coordinator;
GRANT SELECT ON onceq_migrations TO onceq_coordinator;
