#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in --sql statements is for the server
# cli_pgbouncer.sh: the onceq CLI and the coordinator through pgbouncer (the
# Debian package) in transaction mode, 2 server connections: migrate (a
# fresh database: the migration lock is a transaction lock there), push
# (one, bulk), list, show, stats, sessions, parts, cancel, retry, reap,
# schedule, push --wait (polling, with one line saying so) and wait with
# --listen-db on a direct connection (no such line), and a coordinator that takes the
# lease, reaps an expired session and fires a schedule.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup pgbouncer_cli

oq_pgbouncer_start pgb transaction 2
P=$OQ_PGB_DSN
cli() { "$ONCEQ_CLI" --db "$P" "$@"; }
ok() {
  local what=$1
  shift
  oq_run_cli "$OQ_TMP/out" "$OQ_TMP/err" --db "$P" "$@"
  [ "$OQ_RC" = 0 ] || oq_fail "$what: exit $OQ_RC: $(cat "$OQ_TMP/err")"
  oq_log "ok: $what"
}

# ---- migrate: a fresh database through the pooler, and an up-to-date one
fresh="oq_pgbouncer_fresh_$$"
OQ_EXTRA_DBS+=("$fresh")
oq_new_db "$fresh" 0 >/dev/null
fresh_p="$P dbname=$fresh"
out=$("$ONCEQ_CLI" --db "$fresh_p" migrate 2>&1) || oq_fail "migrate (fresh): $out"
oq_contains "migrate a fresh database" "$out" "migrated schema from version 0"
ok "migrate --status (up to date)" migrate --status

# ---- push, list, show, stats, sessions, parts
id=$(cli push --queue one '{"n": 1}') || oq_fail "push failed"
oq_match "pushed id" "$id" '^[0-9a-f-]{36}$'
printf '{"n": %d}\n' 1 2 3 4 5 | cli push --queue bulk >"$OQ_TMP/bulk" 2>/dev/null ||
  oq_fail "bulk push failed"
oq_check "bulk ids" "$(wc -l <"$OQ_TMP/bulk")" 5
ok "list" list --queue bulk
oq_check "listed items" "$(grep -c '^[0-9a-f]\{8\}-' "$OQ_TMP/out" || true)" 5
ok "show" --json show "$id"
oq_contains "show's payload" "$(cat "$OQ_TMP/out")" '"n": 1'
ok "stats" stats
ok "sessions" sessions
ok "parts" parts

# ---- cancel; retry a dead item (its --sql divides by zero, through the pooler)
ok "cancel" cancel "$id"
oq_check "cancelled item gone" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id = '$id'")" 0
dead=$(cli push --queue poison --max-attempts 1 '{}')
oq_worker_start poison --db "$P" --drain --queue poison --sql 'SELECT 1 / 0'
oq_wait_exit "$OQ_LAST_PID" 30
oq_check "dead items" "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE id = '$dead'")" 1
ok "retry" retry "$dead"
oq_check "retried item is live" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id = '$dead'")" 1
ok "cancel the retried item" cancel "$dead"

# ---- wait: polls through the pooler (and says so once), wakes with --listen-db
# (keep_result from the start: an item acked before `wait` asks to keep its
# outcome would be unknown to it)
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL)" >/dev/null
oq_worker_start w --db "$P" --queue w --poll-interval 300ms \
  --sql 'INSERT INTO ledger VALUES ($2)'
W=$OQ_LAST_PID
oq_run_cli "$OQ_TMP/out" "$OQ_TMP/err" --db "$P" push --queue w --wait \
  --timeout 20s '{}'
oq_check "push --wait exit (polling)" "$OQ_RC" 0
oq_check "push --wait's polling line" \
  "$(grep -c 'connection pooler.*--listen-db' "$OQ_TMP/err" || true)" 1
w2=$(oq_sql "INSERT INTO onceq_items (queue, payload, keep_result)
             VALUES ('w', '{}', true) RETURNING id" | head -n1)
oq_run_cli "$OQ_TMP/out" "$OQ_TMP/err" --db "$P" --listen-db "$OQ_DSN" \
  wait "$w2" --timeout 20s
oq_check "wait exit (--listen-db)" "$OQ_RC" 0
oq_check "polling lines with --listen-db" \
  "$(grep -c 'connection pooler' "$OQ_TMP/err" || true)" 0
oq_stop "$W"
oq_check "worker exit" "$OQ_RC" 0
oq_check "ledger" "$(oq_sql 'SELECT count(DISTINCT item_id) || '"'/'"' || count(*) FROM ledger')" "2/2"

# ---- reap: an expired session's claim is released
sid=$(oq_sql "INSERT INTO onceq_sessions (expiry, heartbeated_at)
              VALUES ('1s', now() - interval '1 hour') RETURNING id" | head -n1)
held=$(cli push --queue held '{}')
oq_sql "UPDATE onceq_items SET claim = '$sid', claimed_at = now() WHERE id = '$held'" >/dev/null
ok "reap" reap
oq_check "released by reap" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id = '$held' AND claim IS NULL")" 1

# ---- the coordinator: lease, reap, schedule
ok "schedule add" schedule add tick '* * * * *' ticks '{"t": 1}'
ok "schedule list" schedule list
oq_contains "schedule listed" "$(cat "$OQ_TMP/out")" tick
oq_sql "UPDATE onceq_schedules SET next_run_at = now() - interval '90 seconds'" >/dev/null
sid=$(oq_sql "INSERT INTO onceq_sessions (expiry, heartbeated_at)
              VALUES ('1s', now() - interval '1 hour') RETURNING id" | head -n1)
oq_sql "UPDATE onceq_items SET claim = '$sid', claimed_at = now() WHERE id = '$held'" >/dev/null
oq_start coord "$ONCEQ_CLI" --db "$P" coordinator --interval 200ms \
  --heartbeat-interval 200ms --session-expiry 2s
C=$OQ_LAST_PID
oq_wait_until 15 "the coordinator leads" oq_leader_is "$C"
oq_wait_until 15 "the coordinator reaps the expired session" \
  oq_sql_is "SELECT count(*) FROM onceq_sessions WHERE id = '$sid'" 0
oq_wait_until 15 "the schedule fires" \
  oq_sql_is "SELECT count(*) > 0 FROM onceq_items WHERE queue = 'ticks'" t
oq_stop "$C"
oq_check "coordinator exit" "$OQ_RC" 0
