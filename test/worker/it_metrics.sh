#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_metrics.sh: --metrics-addr serves /healthz (200 while the session is
# live) and Prometheus /metrics, whose onceq_worker_acked_total and
# onceq_worker_claimed_total match the items a long-running (not --drain)
# worker processed: N items through --exec (group-commit acker) and M
# through --sql (ack transaction); onceq_worker_tx_restarts_total counts
# ack transactions re-run after a 40001. The port is picked here and bind-tested
# first (127.0.0.1:0 cannot be discovered from outside).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup metrics

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
N=25
M=15

# http_get URL: print "<status>\n<body>"; status 000 when unreachable.
http_get() {
  "$PY" - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(r.status); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); sys.stdout.write(e.read().decode(errors="replace"))
except Exception as e:
    print("000"); print(e)
EOF
}

# http_status URL: just the status (the whole body is read first).
http_status() {
  local r
  r=$(http_get "$1")
  echo "${r%%$'\n'*}"
}

# start_with_metrics NAME ARGS...: start a worker on a fresh port (up to 5
# ports, in case one is taken meanwhile); sets MPORT and MPID.
start_with_metrics() {
  local name=$1 try
  shift
  for try in 1 2 3 4 5; do
    MPORT=$(oq_free_port)
    [ -n "$MPORT" ] || oq_fail "no free port found"
    oq_worker_start "$name" --metrics-addr "127.0.0.1:$MPORT" "$@"
    MPID=$OQ_LAST_PID
    healthy() { [ "$(http_status "http://127.0.0.1:$MPORT/healthz")" = 200 ]; }
    local n=0
    while [ $n -lt 50 ]; do
      if healthy; then return 0; fi
      oq_alive "$MPID" || break
      sleep 0.1
      n=$((n + 1))
    done
    if oq_alive "$MPID"; then
      oq_fail "$name: /healthz on port $MPORT not 200 within 5 s"
    fi
    oq_wait_exit "$MPID" 5
    if grep -qi "in use" "$OQ_TMP/$name.log"; then
      oq_log "port $MPORT was taken meanwhile (try $try); another"
      continue
    fi
    oq_fail "$name exited ($OQ_RC) before serving metrics: $(cat "$OQ_TMP/$name.log")"
  done
  oq_fail "$name: no port worked"
}

# metric TEXT NAME: the value of an unlabelled sample.
metric() { awk -v n="$2" '$1 == n {print $2}' <<<"$1"; }

# The counters are bumped on the executor/acker thread after the commit
# returns, so the rows can be gone a moment before the count moves: poll.
metric_is() {
  local body
  body=$(http_get "http://127.0.0.1:$MPORT/metrics")
  [ "$(metric "$(tail -n +2 <<<"$body")" "$1")" = "$2" ]
}
wait_metric() { oq_wait_until 30 "$1 to reach $2" metric_is "$1" "$2"; }

check_worker() {
  local label=$1 count=$2 body status hz
  hz=$(http_get "http://127.0.0.1:$MPORT/healthz")
  oq_check "$label: /healthz status" "$(head -n 1 <<<"$hz")" 200
  body=$(http_get "http://127.0.0.1:$MPORT/metrics")
  status=$(head -n 1 <<<"$body")
  oq_check "$label: /metrics status" "$status" 200
  body=$(tail -n +2 <<<"$body")
  grep '^onceq_worker_\(acked\|claimed\|failed\|dead\|claims_lost\)_total' <<<"$body" |
    sed "s/^/[$label] /"
  oq_contains "$label: /metrics" "$body" "# TYPE onceq_worker_acked_total counter"
  oq_check "$label: onceq_worker_acked_total" \
    "$(metric "$body" onceq_worker_acked_total)" "$count"
  oq_check "$label: onceq_worker_claimed_total" \
    "$(metric "$body" onceq_worker_claimed_total)" "$count"
  oq_check "$label: onceq_worker_failed_total" \
    "$(metric "$body" onceq_worker_failed_total)" 0
  oq_check "$label: unknown path status" \
    "$(http_status "http://127.0.0.1:$MPORT/nope")" 404
}

# ---- --exec: acks go through the group-commit acker
start_with_metrics exec --queue qe --concurrency 4 \
  --exec /bin/sh -c 'cat >/dev/null' onceq-item
oq_log "exec worker: pid $MPID, metrics on 127.0.0.1:$MPORT"
oq_sql "INSERT INTO onceq_items (queue, payload)
        SELECT 'qe', jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null
qe_done() { [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qe'")" = 0 ]; }
oq_wait_until 30 "the exec worker to ack $N items" qe_done
wait_metric onceq_worker_acked_total "$N"
check_worker exec "$N"
oq_stop "$MPID" 10
oq_check "exec worker's exit code after SIGTERM" "$OQ_RC" 0

# ---- --sql: acks in the handler's transaction
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL)" >/dev/null
start_with_metrics sql --queue qs --concurrency 4 \
  --sql 'INSERT INTO ledger (item_id) VALUES ($2)'
oq_log "sql worker: pid $MPID, metrics on 127.0.0.1:$MPORT"
oq_sql "INSERT INTO onceq_items (queue, payload)
        SELECT 'qs', jsonb_build_object('n', g) FROM generate_series(1, $M) g" >/dev/null
qs_done() { [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qs'")" = 0 ]; }
oq_wait_until 30 "the sql worker to ack $M items" qs_done
wait_metric onceq_worker_acked_total "$M"
check_worker sql "$M"
oq_check "ledger rows" "$(oq_sql 'SELECT count(*) FROM ledger')" "$M"
oq_stop "$MPID" 10
oq_check "sql worker's exit code after SIGTERM" "$OQ_RC" 0
gone=$(http_status "http://127.0.0.1:$MPORT/healthz")
oq_check "/healthz after the worker exited" "$gone" 000

# ---- onceq_worker_tx_restarts_total counts ack transactions re-run after
# a serialization failure: the handler raises 40001 on its first 3 runs
oq_sql "CREATE SEQUENCE forced;
        CREATE FUNCTION restart_then_insert(item uuid) RETURNS void
        LANGUAGE plpgsql AS \$\$
        BEGIN
          IF nextval('forced') <= 3 THEN
            RAISE EXCEPTION 'forced restart' USING ERRCODE = 'serialization_failure';
          END IF;
          INSERT INTO ledger (item_id) VALUES (item);
        END \$\$" >/dev/null
start_with_metrics restarts --queue qr --concurrency 1 \
  --sql 'SELECT restart_then_insert($2)'
oq_sql "INSERT INTO onceq_items (queue, payload)
        SELECT 'qr', jsonb_build_object('n', g) FROM generate_series(1, 4) g" >/dev/null
qr_done() { [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qr'")" = 0 ]; }
oq_wait_until 30 "the worker to ack 4 items through 3 restarts" qr_done
wait_metric onceq_worker_acked_total 4
body=$(http_get "http://127.0.0.1:$MPORT/metrics")
body=$(tail -n +2 <<<"$body")
grep '^onceq_worker_\(acked\|failed\|tx_restarts\)_total' <<<"$body" | sed 's/^/[restarts] /'
oq_check "restarts: onceq_worker_acked_total" "$(metric "$body" onceq_worker_acked_total)" 4
oq_check "restarts: onceq_worker_failed_total" "$(metric "$body" onceq_worker_failed_total)" 0
# Every handler run is an ack or a restarted ack transaction. Under
# SERIALIZABLE an ack can also lose a real conflict with the concurrent
# claim, so the counter is at least the 3 forced restarts, and the handler
# ran exactly 4 + counter times.
# (The counter moves after the job returns, so poll for it to catch up.)
runs=$(oq_sql "SELECT last_value FROM forced")
oq_wait_until 30 "tx_restarts_total to reach $((runs - 4)) (handler runs $runs - 4 acks)" \
  metric_is onceq_worker_tx_restarts_total "$((runs - 4))"
oq_check_le "restarts: onceq_worker_tx_restarts_total (at least the 3 forced)" \
  3 "$((runs - 4))"
oq_stop "$MPID" 10
oq_check "restarts worker's exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
