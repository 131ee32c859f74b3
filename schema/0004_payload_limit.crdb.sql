-- onceq schema v4, CockroachDB VARIANT of 0004_payload_limit.pg.sql (see it
-- for the limit and why): at most 1 MiB (1048576 bytes) of JSON text per
-- payload, enforced as a CHECK constraint named onceq_items_payload_size
-- (SQLSTATE 23514 on a larger INSERT). CockroachDB has octet_length on
-- STRING and the JSONB -> STRING cast, both also PostgreSQL's (this text
-- runs on PostgreSQL in the CockroachDB-traits test pass).
--
-- NOT VALID: the rows already there are not validated, so the migration
-- cannot fail on a larger one (CockroachDB docs, "VALIDATE CONSTRAINT": a
-- constraint added to an existing table is checked against its rows only
-- when validated). Unlike PostgreSQL, CockroachDB evaluates a CHECK
-- constraint on UPDATE only when the statement writes a column the
-- constraint reads (its optimizer's mutation builder, addCheckConstraintCols,
-- in cockroachdb/cockroach pkg/sql/opt/optbuilder): claims, releases and
-- the reap's ON DELETE SET NULL never write payload, so they neither pay
-- for the check nor fail on an older, larger row.
-- Each statement runs on its own and is idempotent: the drop makes the
-- add safe to run again.
ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS onceq_items_payload_size;
ALTER TABLE onceq_items ADD CONSTRAINT onceq_items_payload_size CHECK (octet_length(payload::text) <= 1048576) NOT VALID;
