#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_pg_restart.sh: the PostgreSQL server restarts (pg_ctl -m fast) while
# two --sql workers drain 4000 items. The workers ride it out: both still
# run after the restart, every item lands exactly once in the ledger and
# nothing is left. Restarts the shared test server, so ctest runs it with
# RUN_SERIAL; skips (77) without ONCEQ_TEST_PGDATA (an external --dsn).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
if [ -z "${ONCEQ_TEST_PGDATA:-}" ] || [ -z "${ONCEQ_TEST_PGBIN:-}" ]; then
  echo "SKIP: ONCEQ_TEST_PGDATA/ONCEQ_TEST_PGBIN unset (external database?)" >&2
  exit 77
fi
oq_setup pgrestart

N=4000
# a little work per item, so that the restart lands midway (8 executors
# run items back to back in batches: at most ~800 items/s)
SQL='INSERT INTO ledger (item_id, n)
     SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.01)'

pg_ctl_restart() {
  local args=("$ONCEQ_TEST_PGBIN/pg_ctl" -D "$ONCEQ_TEST_PGDATA" -m fast -w
    -t 60 restart)
  [ -n "${ONCEQ_TEST_PGLOG:-}" ] && args+=(-l "$ONCEQ_TEST_PGLOG")
  if [ -n "${ONCEQ_TEST_PGOSUSER:-}" ]; then
    (cd / && runuser -u "$ONCEQ_TEST_PGOSUSER" -- "${args[@]}")
  else
    (cd / && "${args[@]}")
  fi
}

oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

oq_worker_start A --concurrency 4 --heartbeat-interval 500ms \
  --session-expiry 5s --poll-interval 200ms --sql "$SQL"
wa=$OQ_LAST_PID
oq_worker_start B --concurrency 4 --heartbeat-interval 500ms \
  --session-expiry 5s --poll-interval 200ms --sql "$SQL"
wb=$OQ_LAST_PID
t0=$(oq_now_ms)
midway() { [ "$(oq_sql 'SELECT count(*) FROM ledger')" -ge 300 ]; }
oq_wait_until 60 "300 items done" midway
before=$(oq_sql 'SELECT count(*) FROM ledger')
oq_log "restarting PostgreSQL ($(($(oq_now_ms) - t0)) ms in, ledger at $before)"
tr=$(oq_now_ms)
out=$(pg_ctl_restart 2>&1) || oq_fail "pg_ctl restart failed: $out"
tr_end=$(oq_now_ms)
oq_log "restart took $((tr_end - tr)) ms: $(tr '\n' ' ' <<<"$out")"
after=$(oq_sql 'SELECT count(*) FROM ledger')
oq_log "ledger right after the restart: $after"
[ "$after" -lt "$N" ] || oq_fail "the restart did not land midway (ledger $after)"
oq_check "A running after the restart" "$(oq_alive "$wa" && echo yes || echo no)" yes
oq_check "B running after the restart" "$(oq_alive "$wb" && echo yes || echo no)" yes

oq_wait_until 90 "every item done after the restart" oq_all_done
oq_log "all $N done $(($(oq_now_ms) - tr)) ms after the restart began"
oq_check "A still running" "$(oq_alive "$wa" && echo yes || echo no)" yes
oq_check "B still running" "$(oq_alive "$wb" && echo yes || echo no)" yes
oq_check "A's session rows" "$(oq_session_count_for_pid "$wa")" 1
oq_check "B's session rows" "$(oq_session_count_for_pid "$wb")" 1
oq_stop "$wa" 15
oq_check "A's exit code after SIGTERM" "$OQ_RC" 0
oq_stop "$wb" 15
oq_check "B's exit code after SIGTERM" "$OQ_RC" 0
oq_ledger_exact "$N"
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
# how long each claim loop stayed away after the server was back (printed,
# not asserted: the restart itself only has to be survived)
for w in A B; do
  ts=$( (grep -m1 'database reachable again' "$OQ_TMP/$w.log" || true) |
    awk '{print $1}')
  if [ -n "$ts" ]; then
    back=$(date -d "$ts" +%s%3N)
    oq_metric "pg_restart_claim_loop_back_$w" $((back - tr_end)) ms \
      "after pg_ctl restart returned"
  elif grep -q 'database unavailable' "$OQ_TMP/$w.log"; then
    oq_metric "pg_restart_claim_loop_back_$w" ">$(($(oq_now_ms) - tr_end))" ms \
      "after pg_ctl restart returned; not back when stopped"
  fi
  oq_log "$w: ack rejected $(grep -c 'ack rejected' "$OQ_TMP/$w.log" || true)," \
    "sessions registered again $(grep -c 'registered a new session' "$OQ_TMP/$w.log" || true)"
done
oq_log "PASS"
