-- onceq schema v8 (CockroachDB): the claim's session lock replaces the
-- `claim` foreign key; see 0008_claim_session_lock.pg.sql for the why.
-- The claims lock the session row FOR SHARE (CockroachDB v23.2+). Under
-- SERIALIZABLE, CockroachDB's default, correctness does not rest on that
-- lock: a claim reads the session row and a reap writes it, so one of two
-- conflicting transactions is ordered after the other or restarted
-- (CockroachDB docs, "SELECT ... FOR UPDATE": shared locks are best-effort
-- under SERIALIZABLE, which "does not rely on locking for correctness");
-- under READ COMMITTED the shared lock is durable and makes the reap wait.
-- The constraint's name differs by the version that created it.
ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS onceq_items_claim_fkey;
ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS fk_claim_ref_onceq_sessions;
