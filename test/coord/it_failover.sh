#!/usr/bin/env bash
# it_failover.sh: two coordinators, one leads (the lease row names its
# session); kill -9 the leader and the other takes over within expiry + one
# interval (1600 ms + 200 ms, plus scheduling slack), by reaping the dead
# leader's session; the Prometheus endpoint shows the leader gauge and
# per-queue depth and lag; SIGTERM gives the lease up at once (the session
# row, and with it the lease, is gone when the process exits; the follower
# takes over without reaping anything).
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup failover

EXPIRY_MS=1600
INTERVAL_MS=200
SLACK_MS=3000 # a reap pass, lease retries, and a busy or sanitizer-built run
FLAGS=(--interval ${INTERVAL_MS}ms --heartbeat-interval 200ms
       --session-expiry ${EXPIRY_MS}ms --keep-done off --keep-dead off)

# 3 ready items made ready 20 s ago in queue m, for the gauges
oq_sql "INSERT INTO onceq_items (queue, run_at)
        SELECT 'm', now() - interval '20 seconds' FROM generate_series(1, 3)"

# metrics_port NAME: the port a coordinator's log says it serves on
metrics_port() {
  sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/$1.log" | head -1
}
# http_get PORT PATH: the body of a GET on 127.0.0.1 (python's urllib,
# so no curl binary is needed)
http_get() {
  oq_py -c 'import sys, urllib.request
u = "http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2])
print(urllib.request.urlopen(u, timeout=5).read().decode(), end="")' \
    "$1" "$2"
}
scrape() { http_get "$1" /metrics; }
# scrape_has PORT REGEX: a line of the metrics text matches REGEX
scrape_has() {
  local t
  t=$(scrape "$1") || return 1
  grep -q -- "$2" <<<"$t"
}

oq_coordinator a "${FLAGS[@]}" --metrics-addr 127.0.0.1:0
A=$OQ_LAST_PID
oq_wait_until 10 "coordinator a leads" oq_leader_is "$A"
oq_coordinator b "${FLAGS[@]}" --metrics-addr 127.0.0.1:0
B=$OQ_LAST_PID
oq_wait_until 10 "coordinator b registered" \
  oq_sql_is "SELECT count(*) FROM onceq_sessions WHERE pid = $B" 1
sleep 1 # b runs ~5 passes: it must not take the lease from a live leader
oq_check "lease holder while both live" "$(oq_leader_pid)" "$A"
oq_check "lease rows" "$(oq_sql 'SELECT count(*) FROM onceq_leases')" 1

PA=$(metrics_port a)
PB=$(metrics_port b)
[ -n "$PA" ] && [ -n "$PB" ] || oq_fail "no metrics port in the logs"
oq_wait_until 10 "a's queue gauges" \
  scrape_has "$PA" 'onceq_queue_items{queue="m",state="ready"} 3'
ma=$(scrape "$PA")
mb=$(scrape "$PB")
oq_contains "a's metrics" "$ma" "onceq_coordinator_leader 1"
oq_contains "b's metrics" "$mb" "onceq_coordinator_leader 0"
oq_contains "a's depth gauge" "$ma" 'onceq_queue_items{queue="m",state="ready"} 3'
lag=$(printf '%s\n' "$ma" | sed -n 's/^onceq_queue_lag_seconds{queue="m"} \([0-9]*\).*/\1/p')
oq_check_le "a's lag gauge >= 19 s" 19 "${lag:-0}"
oq_check_le "a's lag gauge <= 60 s" "${lag:-999}" 60
oq_check "b exports no queue gauges (leader only)" \
  "$(printf '%s\n' "$mb" | grep -c '^onceq_queue_items' || true)" 0
oq_check "healthz" "$(http_get "$PB" /healthz)" ok

# ---- kill -9 the leader --------------------------------------------------
AID=$(oq_sql "SELECT id FROM onceq_sessions WHERE pid = $A")
kill -KILL "$A"
t0=$(oq_now_ms)
oq_wait_exit "$A" 5
oq_wait_until 10 "coordinator b takes over" oq_leader_is "$B"
took=$(($(oq_now_ms) - t0))
oq_metric coordinator_takeover_after_kill9_ms "$took" ms
oq_log "takeover ${took} ms after kill -9 (expiry ${EXPIRY_MS} + interval ${INTERVAL_MS})"
oq_check_le "takeover within expiry + interval (+${SLACK_MS} ms slack)" \
  "$took" $((EXPIRY_MS + INTERVAL_MS + SLACK_MS))
# and through reaping: b's reaper removed a's expired session (the lease
# went with it), rather than b taking a lease from a live session
oq_contains "b's log" "$(cat "$OQ_TMP/b.log")" \
  "session=$AID session reaped: heartbeat older than its expiry"
oq_check "a's session reaped" \
  "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $A")" 0
oq_wait_until 10 "b's leader gauge" \
  scrape_has "$PB" '^onceq_coordinator_leader 1'

# ---- SIGTERM the leader: the lease is given up at once --------------------
oq_coordinator c "${FLAGS[@]}"
C=$OQ_LAST_PID
oq_wait_until 10 "coordinator c registered" \
  oq_sql_is "SELECT count(*) FROM onceq_sessions WHERE pid = $C" 1
BID=$(oq_sql "SELECT id FROM onceq_sessions WHERE pid = $B")
kill -TERM "$B"
t0=$(oq_now_ms)
oq_wait_exit "$B" 5
oq_check "b's exit status after SIGTERM" "$OQ_RC" 0
oq_check "b's session deleted on exit" \
  "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $B")" 0
# b deleted its session before exiting, so the lease no longer names it
oq_check "lease rows naming b after its exit" \
  "$(oq_sql "SELECT count(*) FROM onceq_leases WHERE session_id = '$BID'")" 0
oq_wait_until 10 "coordinator c takes over" oq_leader_is "$C"
took=$(($(oq_now_ms) - t0))
oq_metric coordinator_takeover_after_sigterm_ms "$took" ms
oq_check_le "takeover after SIGTERM within the expiry" "$took" "$EXPIRY_MS"
oq_check "c reaped nothing (b gave the lease up itself)" \
  "$(grep -c "session=$BID session reaped" "$OQ_TMP/c.log" || true)" 0
oq_contains "b's log" "$(cat "$OQ_TMP/b.log")" "session ended; lease released"

kill -TERM "$C"
oq_wait_exit "$C" 5
oq_check "c's exit status" "$OQ_RC" 0
oq_check "no lease left" "$(oq_sql 'SELECT count(*) FROM onceq_leases')" 0
oq_check "no session left" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_log "PASS"
