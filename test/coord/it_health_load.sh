#!/usr/bin/env bash
# it_health_load.sh: /healthz and /metrics stay answerable while the
# status page is loaded (issue 20, finding 6). The coordinator serves its
# page with a bearer token (ONCEQ_STATUS_TOKEN, as the Kubernetes manifest
# ships it); probes carry no token.
#  1. 64 idle sockets from another client (127.0.0.2) and two loops of
#     `GET /`: 20 probes of /healthz and of /metrics, each 200 within 1 s;
#  2. page builds stuck behind a lock on onceq_dead (held 4 s by another
#     session) while a loop asks for `/`: the probes still answer within
#     1 s, and the page answers again once the lock is gone;
#  3. the worker's --metrics-addr server (the same common/src/promhttp.c):
#     64 idle sockets from 127.0.0.2, 20 probes each within 1 s;
#  4. SIGTERM while one page is being built (stuck on the lock) and two
#     more wait: the coordinator waits for the build, stops cleanly (exit
#     0; libmicrohttpd aborts if a connection is left suspended) and was
#     alive all along. The waiting clients' connections are closed.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup health_load

TOKEN=health-load-token
ONCEQ_STATUS_TOKEN=$TOKEN oq_coordinator coord --metrics-addr 127.0.0.1:0 \
  --interval 200ms
cpid=$OQ_LAST_PID
oq_wait_until 15 "the coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/coord.log"
port=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/coord.log" | head -1)
oq_wait_until 15 "the coordinator is healthy" \
  curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"
oq_check "the page wants the token" \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")" 401

# 1. idle sockets and a page loop
out=$(timeout 90 "$(oq_python)" "$(dirname "$0")/health_load.py" "$port" \
  "$TOKEN" idle 2>&1) || oq_fail "probes failed under idle sockets and page load:
$out"
oq_log "$out"
oq_match "at least one page served" "$out" "'ok': [1-9]"

# 2. page builds stuck on a lock
lock_pid=""
psql -X -q "$OQ_DSN" -c "BEGIN; LOCK TABLE onceq_dead IN ACCESS EXCLUSIVE MODE;
  SELECT pg_sleep(4); COMMIT" >/dev/null 2>&1 &
lock_pid=$!
sleep 0.3
out=$(timeout 90 "$(oq_python)" "$(dirname "$0")/health_load.py" "$port" \
  "$TOKEN" slow 2>&1) || oq_fail "probes failed while page builds were stuck:
$out"
oq_log "$out"
wait "$lock_pid" || true
oq_wait_until 15 "the page answers again" \
  curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/"

# 3. the worker's metrics server
wport=$(oq_free_port)
[ -n "$wport" ] || oq_fail "no free port found"
oq_worker_start w1 --queue health_load --metrics-addr "127.0.0.1:$wport" \
  --exec cat
oq_wait_until 15 "the worker is healthy" \
  curl -sf -o /dev/null "http://127.0.0.1:$wport/healthz"
out=$(timeout 90 "$(oq_python)" "$(dirname "$0")/health_load.py" "$wport" \
  "" bare 2>&1) || oq_fail "worker probes failed under idle sockets:
$out"
oq_log "$out"

# 4. stop with pages in flight
oq_alive "$cpid" || oq_fail "the coordinator died during the load"
psql -X -q "$OQ_DSN" -c "BEGIN; LOCK TABLE onceq_dead IN ACCESS EXCLUSIVE MODE;
  SELECT pg_sleep(3); COMMIT" >/dev/null 2>&1 &
lock_pid=$!
sleep 0.3
curls=()
for i in 1 2 3; do
  curl -s -o /dev/null -m 15 -w '%{http_code}\n' \
    -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$port/" \
    >>"$OQ_TMP/inflight.txt" &
  curls+=($!)
done
sleep 0.5
oq_stop "$cpid" 15
oq_check "the coordinator's exit status with pages in flight" "$OQ_RC" 0
wait "$lock_pid" || true
for p in "${curls[@]}"; do wait "$p" || true; done
oq_log "page requests in flight at stop: $(tr '\n' ' ' <"$OQ_TMP/inflight.txt")"
oq_log "ok"
