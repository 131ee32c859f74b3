#!/usr/bin/env bash
# cli_grants.sh: least privilege (issue 13 §6). deploy/grants/postgres.sql
# makes three roles; this test runs the quickstart-style flow with each
# binary connected as a login role that is a member of one of them:
#   producer     onceq push (one, bulk), a psql INSERT, onceq wait, list,
#                show, stats; and it cannot delete or claim items
#   worker       onceq-worker --sql --history --partitioned --drain: every
#                item acknowledged (one ledger row each, written as the
#                worker role), a bad one dead-lettered, an expired session
#                reaped and its claim released; it reads the ids in
#                onceq_dead (reconciling an ack) but no other column; and
#                it cannot DROP, ALTER or TRUNCATE onceq's tables, create a
#                table, or read a table it was not granted (nor the
#                schedules and leases)
#   coordinator  onceq schedule add, onceq coordinator (leads: lease row;
#                retention deletes onceq_done rows), retry, cancel, reap,
#                parts set; and it cannot DROP or TRUNCATE either
# Nothing any role ran may log "permission denied". Environment as in
# test/harness/oq_harness.sh, plus ONCEQ_WORKER.
. "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"

oq_setup grants --url
[ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"
GRANTS_SQL=$ONCEQ_TEST_SRC/deploy/grants/postgres.sql
[ -n "${ONCEQ_TEST_SRC:-}" ] ||
  GRANTS_SQL=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/deploy/grants/postgres.sql
ADMIN_URL=$ONCEQ_DATABASE_URL
SUFFIX=$$
P_ROLE=oqg${SUFFIX}_producer
W_ROLE=oqg${SUFFIX}_worker
C_ROLE=oqg${SUFFIX}_coordinator

drop_roles() {
  psql "$OQ_ADMIN_DSN" -X -q -c "DROP ROLE IF EXISTS $P_ROLE" \
    -c "DROP ROLE IF EXISTS $W_ROLE" -c "DROP ROLE IF EXISTS $C_ROLE" \
    >/dev/null 2>&1 || true
}
# without errexit: the harness sets -e, and `(exit $rc)` would end the
# trap before oq_cleanup stops what the test started
trap 'rc=$?; set +e; drop_roles; (exit $rc); oq_cleanup' EXIT

# A hardened database takes EXECUTE on functions away from PUBLIC: the
# grants must still let producers and the coordinator use the id's
# default (onceq_item_id(), schema v10).
oq_q "REVOKE EXECUTE ON FUNCTION onceq_item_id() FROM PUBLIC" >/dev/null
# The grants, as the owner (the superuser that migrated), twice: idempotent.
for run in 1 2; do
  psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -f "$GRANTS_SQL" \
    >"$OQ_TMP/grants$run.log" 2>&1 ||
    oq_fail "grants run $run failed: $(cat "$OQ_TMP/grants$run.log")"
done
oq_log "ok: deploy/grants/postgres.sql applied twice"
# PostgreSQL 14 and older let PUBLIC create tables in schema public; the
# docs/deployment.md says to revoke that there (15 does it by default).
if [ "$(oq_q "SELECT current_setting('server_version_num')::int < 150000")" = t ]; then
  oq_q "REVOKE CREATE ON SCHEMA public FROM PUBLIC" >/dev/null
  oq_log "PostgreSQL < 15: revoked CREATE ON SCHEMA public FROM PUBLIC"
fi
oq_q "CREATE ROLE $P_ROLE LOGIN IN ROLE onceq_producer;
   CREATE ROLE $W_ROLE LOGIN IN ROLE onceq_worker;
   CREATE ROLE $C_ROLE LOGIN IN ROLE onceq_coordinator;
   CREATE TABLE grants_ledger (item uuid NOT NULL, n int NOT NULL);
   GRANT INSERT ON grants_ledger TO onceq_worker;
   CREATE TABLE grants_secret (s text);
   INSERT INTO grants_secret VALUES ('not for workers')" >/dev/null
P_URL="$ADMIN_URL user=$P_ROLE"
W_URL="$ADMIN_URL user=$W_ROLE"
C_URL="$ADMIN_URL user=$C_ROLE"

# adm SQL: q as the owner, whatever ONCEQ_DATABASE_URL the step exported
adm() { ONCEQ_DATABASE_URL=$ADMIN_URL oq_q "$1"; }

# as ROLE_URL SQL: psql as that role; prints stdout+stderr, returns its rc
as() {
  psql "$1" -X -q -v ON_ERROR_STOP=1 -At -c "$2" 2>&1
}

# refused WHAT URL SQL REGEX: the statement fails with an error matching
# REGEX (a privilege error, not some other one).
refused() {
  local out rc=0
  out=$(as "$2" "$3") || rc=$?
  [ $rc -ne 0 ] || oq_fail "$1: succeeded, want refused: $3"
  oq_match "$1 refused" "$out" "$4"
}

no_denied() {
  if grep -qi 'permission denied\|must be owner' "$2"; then
    oq_fail "$1 logged a privilege error: $(grep -i 'permission denied\|must be owner' "$2" | head -n 3)"
  fi
  oq_log "ok: $1 logged no privilege error"
}

# ---- producer --------------------------------------------------------------
export ONCEQ_DATABASE_URL=$P_URL
oq_run_cli "$OQ_TMP/push1.out" "$OQ_TMP/push1.err" push --queue g '{"n":1}'
oq_check "producer: onceq push exit" "$OQ_RC" 0
ID1=$(head -n 1 "$OQ_TMP/push1.out")
for i in $(seq 2 21); do printf '{"n":%d}\n' "$i"; done >"$OQ_TMP/bulk.jsonl"
OQ_RC=0
"$ONCEQ_CLI" push --queue g <"$OQ_TMP/bulk.jsonl" >"$OQ_TMP/push2.out" \
  2>"$OQ_TMP/push2.err" || OQ_RC=$?
oq_check "producer: onceq push (20 JSON lines) exit" "$OQ_RC" 0
oq_check "producer: ids printed" "$(wc -l <"$OQ_TMP/push2.out")" 20
as "$P_URL" "INSERT INTO onceq_items (queue, payload) VALUES ('g', '{\"n\":22}')" \
  >"$OQ_TMP/psql_insert.log" || oq_fail "producer psql INSERT: $(cat "$OQ_TMP/psql_insert.log")"
as "$P_URL" "INSERT INTO onceq_items (queue, payload, max_attempts)
             VALUES ('g', '{\"n\":\"not a number\"}', 1)" >/dev/null ||
  oq_fail "producer psql INSERT (bad item) failed"
oq_log "ok: producer enqueued with psql INSERTs"
oq_run_cli "$OQ_TMP/wait1.out" "$OQ_TMP/wait1.err" wait "$ID1" --timeout 300ms
oq_check "producer: onceq wait (nothing runs yet) exit (5: pending)" "$OQ_RC" 5
oq_check "producer: wait set keep_result" \
  "$(as "$ADMIN_URL" "SELECT keep_result FROM onceq_items WHERE id = '$ID1'")" t
for cmd in "list --json" "show $ID1" "stats --json" "sessions --json" \
  "parts --json"; do
  # shellcheck disable=SC2086 # cmd is a word list
  oq_run_cli "$OQ_TMP/read.out" "$OQ_TMP/read.err" $cmd
  oq_check "producer: onceq $cmd exit" "$OQ_RC" 0
  no_denied "producer: onceq $cmd" "$OQ_TMP/read.err"
done
refused "producer DELETE FROM onceq_items" "$P_URL" \
  "DELETE FROM onceq_items" 'permission denied'
refused "producer claiming (UPDATE claim)" "$P_URL" \
  "UPDATE onceq_items SET claim = NULL" 'permission denied'
refused "producer reading grants_secret" "$P_URL" \
  "SELECT * FROM grants_secret" 'permission denied'
cat "$OQ_TMP"/push*.err >"$OQ_TMP/producer.log"
no_denied producer "$OQ_TMP/producer.log"

# ---- worker ----------------------------------------------------------------
# A dead worker's session, expired, holding a claim: the worker role's
# reaper must delete it and release the item (the reap's transaction).
GHOST=$(adm "INSERT INTO onceq_sessions (expiry, hostname, pid, version, queues)
             VALUES (interval '5 seconds', 'ghost', 1, 'x', 'g') RETURNING id")
adm "UPDATE onceq_sessions SET heartbeated_at = now() - interval '1 hour'
     WHERE id = '$GHOST';
     UPDATE onceq_items SET claim = '$GHOST', claimed_at = now(),
       attempts = 1 WHERE id = '$ID1'" >/dev/null
export ONCEQ_DATABASE_URL=$W_URL
# the worker's reaper runs oq_reap, the statement `onceq reap` runs
oq_run_cli "$OQ_TMP/wreap.out" "$OQ_TMP/wreap.err" reap
oq_check "worker role: onceq reap exit" "$OQ_RC" 0
no_denied "worker role: onceq reap" "$OQ_TMP/wreap.err"
oq_check "the expired session, reaped by the worker role" \
  "$(adm "SELECT count(*) FROM onceq_sessions WHERE id = '$GHOST'")" 0
oq_check "its claim released by the reap" \
  "$(adm "SELECT count(*) FROM onceq_items WHERE id = '$ID1' AND claim IS NULL")" 1
OQ_RC=0
timeout 90 "$ONCEQ_WORKER" --queue g --concurrency 2 --history --partitioned \
  --session-expiry 5s --poll-interval 200ms --orphan-after 1s --drain \
  --sql "INSERT INTO grants_ledger (item, n) VALUES (\$2, (\$1->>'n')::int)" \
  >"$OQ_TMP/worker.log" 2>&1 || OQ_RC=$?
oq_check "worker (--sql --history --partitioned --drain) exit" "$OQ_RC" 0
no_denied worker "$OQ_TMP/worker.log"
oq_check "ledger rows (one per good item), written as the worker role" \
  "$(adm "SELECT count(*) || '/' || count(DISTINCT item) FROM grants_ledger")" \
  "22/22"
oq_check "items left" "$(adm "SELECT count(*) FROM onceq_items")" 0
oq_check "dead-lettered (the bad item)" \
  "$(adm "SELECT count(*) FROM onceq_dead")" 1
oq_check "history rows (--history)" "$(adm "SELECT count(*) FROM onceq_done")" 22
ONCEQ_DATABASE_URL=$P_URL oq_run_cli "$OQ_TMP/wait2.out" "$OQ_TMP/wait2.err" \
  wait "$ID1" --timeout 5s
oq_check "producer: onceq wait of the acknowledged item exit" "$OQ_RC" 0

refused "worker DROP TABLE onceq_items" "$W_URL" \
  "DROP TABLE onceq_items" 'must be owner'
refused "worker DROP TABLE onceq_sessions" "$W_URL" \
  "DROP TABLE onceq_sessions CASCADE" 'must be owner'
refused "worker ALTER TABLE onceq_items" "$W_URL" \
  "ALTER TABLE onceq_items ADD COLUMN evil int" 'must be owner'
refused "worker ALTER TABLE onceq_items DROP CONSTRAINT (the claim FK)" "$W_URL" \
  "ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS onceq_items_claim_fkey" \
  'must be owner'
# a worker locks a limited queue's control row (UPDATE of max_running, to
# itself) but may not pause, resume or change a limit
refused "worker pausing a queue" "$W_URL" \
  "UPDATE onceq_queues SET paused = true" 'permission denied'
refused "worker adding a queue control" "$W_URL" \
  "INSERT INTO onceq_queues (queue, paused) VALUES ('g', true)" 'permission denied'
refused "worker TRUNCATE onceq_items" "$W_URL" \
  "TRUNCATE onceq_items" 'permission denied'
refused "worker TRUNCATE onceq_dead" "$W_URL" \
  "TRUNCATE onceq_dead" 'permission denied'
refused "worker DROP TRIGGER" "$W_URL" \
  "DROP TRIGGER onceq_items_notify ON onceq_items" 'must be owner'
refused "worker CREATE TABLE" "$W_URL" \
  "CREATE TABLE public.evil (x int)" 'permission denied'
refused "worker reading grants_secret (not granted)" "$W_URL" \
  "SELECT * FROM grants_secret" 'permission denied'
refused "worker reading onceq_schedules (not granted)" "$W_URL" \
  "SELECT * FROM onceq_schedules" 'permission denied'
refused "worker taking the leader lease" "$W_URL" \
  "DELETE FROM onceq_leases" 'permission denied'
refused "worker reading onceq_dead beyond its ids" "$W_URL" \
  "SELECT * FROM onceq_dead" 'permission denied'
# the ids it may read: reconciling an ack looks the item up there (issue
# 20: without it an ambiguous commit that landed was reported as failed)
out=$(as "$W_URL" "SELECT count(id) FROM onceq_dead") ||
  oq_fail "worker reading onceq_dead's ids: $out"
oq_check "worker reads onceq_dead's ids" "$out" 1
refused "worker enqueueing" "$W_URL" \
  "INSERT INTO onceq_items (queue, payload) VALUES ('g', '{}')" \
  'permission denied'
oq_check "onceq_items still has its columns" \
  "$(adm "SELECT count(*) FROM information_schema.columns
        WHERE table_name = 'onceq_items' AND column_name = 'evil'")" 0

# ---- coordinator -----------------------------------------------------------
export ONCEQ_DATABASE_URL=$C_URL
oq_run_cli "$OQ_TMP/sched.out" "$OQ_TMP/sched.err" schedule add gsched \
  '@hourly' g '{"n":0}'
oq_check "coordinator: onceq schedule add exit" "$OQ_RC" 0
"$ONCEQ_CLI" coordinator --interval 250ms --keep-done 1s \
  >"$OQ_TMP/coordinator.log" 2>&1 &
CPID=$!
OQ_PIDS+=("$CPID")
leads=0
for _ in $(seq 1 60); do
  if [ "$(adm "SELECT count(*) FROM onceq_leases")" -ge 1 ] &&
    [ "$(adm "SELECT count(*) FROM onceq_done")" -eq 0 ]; then
    leads=1
    break
  fi
  sleep 0.25
done
oq_alive "$CPID" || oq_fail "the coordinator exited: $(tail -n 5 "$OQ_TMP/coordinator.log")"
oq_check "coordinator leads (lease row) and retention emptied onceq_done" \
  "$leads" 1
kill -TERM "$CPID"
wait "$CPID" || true
no_denied coordinator "$OQ_TMP/coordinator.log"
DEAD=$(adm "SELECT id FROM onceq_dead LIMIT 1")
oq_run_cli "$OQ_TMP/retry.out" "$OQ_TMP/retry.err" retry "$DEAD"
oq_check "coordinator: onceq retry exit" "$OQ_RC" 0
oq_run_cli "$OQ_TMP/cancel.out" "$OQ_TMP/cancel.err" cancel "$DEAD"
oq_check "coordinator: onceq cancel exit" "$OQ_RC" 0
oq_run_cli "$OQ_TMP/reap.out" "$OQ_TMP/reap.err" reap
oq_check "coordinator: onceq reap exit" "$OQ_RC" 0
oq_run_cli "$OQ_TMP/parts.out" "$OQ_TMP/parts.err" parts set 16
oq_check "coordinator: onceq parts set exit" "$OQ_RC" 0
cat "$OQ_TMP"/{sched,retry,cancel,reap,parts}.err >"$OQ_TMP/ops.log"
no_denied "coordinator operator commands" "$OQ_TMP/ops.log"
refused "coordinator DROP TABLE onceq_items" "$C_URL" \
  "DROP TABLE onceq_items" 'must be owner'
refused "coordinator TRUNCATE onceq_done" "$C_URL" \
  "TRUNCATE onceq_done" 'permission denied'
refused "coordinator reading grants_secret" "$C_URL" \
  "SELECT * FROM grants_secret" 'permission denied'
oq_log "PASS"
