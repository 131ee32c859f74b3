# shellcheck shell=bash disable=SC2016,SC2317 # $1/$2 are the server's; inner functions run via oq_wait_until
# oq_storm.sh: connection storms for three onceq-worker processes (issue 21
# §4; docs/deployment.md, "Poolers and high availability"). Sourced after
# oq_harness.sh and oq_setup; not a test itself. The workers reach the
# database through WORKER_DB (the test database directly, or a pooler in
# front of it); the storm acts on the server through KILL_DB (a direct
# conninfo of the same database, as a superuser), so the same run can be
# pointed at a pooler.
#
#   oq_storm_terminate WORKER_DB KILL_DB N SECONDS
#       pg_terminate_backend on every other client backend of the database,
#       twice a second for SECONDS, while the workers drain N items.
#   oq_storm_exhaust WORKER_DB KILL_DB HOG_DB N SECONDS
#       idle sessions (test/chaos/storm_hog.py on HOG_DB: a role that is
#       not a superuser) take every free connection slot of the server, and
#       each slot that frees up, for SECONDS; once they hold them all,
#       every backend of the workers is terminated once (KILL_DB: a
#       superuser, through the reserved slots), so the workers must wait
#       for a slot. The workers must not be superusers either. Use a
#       private server (oq_pgprivate.sh) with a low max_connections.
#
# Both end with the verdict: all three workers alive, the ledger exact
# (0 duplicates, 0 lost, nothing left), no dead letters; they print the
# numbers as METRIC lines. Default worker timings (expiry 5 s, heartbeat
# 1 s, poll 1 s).

OQ_STORM_POLL_MS=1000

# oq_storm_prepare KILL_DB N: the ledger (no unique key: a second ack of an
# item would be a second row) and N items.
oq_storm_prepare() {
  local dsn=$1 n=$2 rc=0
  oq_psql_retry "$OQ_PSQL" "$dsn" "CREATE TABLE ledger (item_id uuid NOT NULL,
      n int NOT NULL, ts timestamptz NOT NULL DEFAULT clock_timestamp());
    INSERT INTO onceq_items (payload)
    SELECT jsonb_build_object('n', g) FROM generate_series(1, $n) g;
    GRANT ALL ON ledger TO PUBLIC" || rc=$?
  [ $rc -eq 0 ] || oq_fail "storm set-up failed: $OQ_PSQL_OUT"
}

# oq_storm_workers WORKER_DB: start workers S1..S3 (OQ_STORM_PIDS).
oq_storm_workers() {
  local i
  OQ_STORM_PIDS=()
  for i in 1 2 3; do
    oq_worker_start_on "S$i" "$1" --sql 'INSERT INTO ledger (item_id, n)
      SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.01)'
    OQ_STORM_PIDS+=("$OQ_LAST_PID")
  done
}

# oq_storm_q KILL_DB SQL: one value, retrying while the server is busy.
oq_storm_q() {
  local i
  for i in $(seq 1 100); do
    if oq_psql_retry "$OQ_PSQL" "$1" "$2"; then
      printf '%s\n' "$OQ_PSQL_OUT"
      return 0
    fi
    sleep 0.2
  done
  oq_fail "query failed 100 times: $2: $OQ_PSQL_OUT"
}

# oq_storm_verdict KILL_DB N: the workers alive, the ledger exact.
oq_storm_verdict() {
  local dsn=$1 n=$2 i=0 p
  oq_storm_left() { [ "$(oq_storm_q "$dsn" 'SELECT count(*) FROM onceq_items')" = 0 ]; }
  oq_wait_until 90 "every item done after the storm" oq_storm_left
  for p in "${OQ_STORM_PIDS[@]}"; do
    i=$((i + 1))
    oq_check "worker S$i alive" "$(oq_alive "$p" && echo yes || echo no)" yes
  done
  oq_check "items with two ledger rows (duplicates)" \
    "$(oq_storm_q "$dsn" 'SELECT count(*) FROM (SELECT item_id FROM ledger
                           GROUP BY 1 HAVING count(*) > 1) d')" 0
  oq_check "distinct items in the ledger (0 lost)" \
    "$(oq_storm_q "$dsn" 'SELECT count(DISTINCT n) FROM ledger')" "$n"
  oq_check "ledger rows" "$(oq_storm_q "$dsn" 'SELECT count(*) FROM ledger')" "$n"
  oq_check "dead items" "$(oq_storm_q "$dsn" 'SELECT count(*) FROM onceq_dead')" 0
  for i in 1 2 3; do
    oq_log "S$i: sessions registered again $(grep -c 'registered a new session' "$OQ_TMP/S$i.log" || true)"
  done
}

# oq_storm_first_ack_after KILL_DB MS: ms from MS to the first ledger row
# at or after it (empty: none).
oq_storm_first_ack_after() {
  oq_storm_q "$1" "SELECT (extract(epoch FROM min(ts)) * 1000)::bigint - $2
                   FROM ledger WHERE ts >= to_timestamp($2 / 1000.0)"
}

oq_storm_terminate() {
  local wdb=$1 kdb=$2 n=$3 secs=$4 kills=0 k t0 t_end resume
  oq_storm_prepare "$kdb" "$n"
  oq_storm_workers "$wdb"
  oq_storm_some() { [ "$(oq_storm_q "$kdb" 'SELECT count(*) FROM ledger')" -ge 100 ]; }
  oq_wait_until 30 "the first 100 items done" oq_storm_some
  t0=$(oq_now_ms)
  oq_log "storm: pg_terminate_backend twice a second for ${secs}s"
  for _ in $(seq 1 $((secs * 2))); do
    k=$("$OQ_PSQL" -X -q -At -d "$kdb" -c "SELECT count(pg_terminate_backend(pid))
          FROM pg_stat_activity WHERE datname = current_database()
           AND pid <> pg_backend_pid() AND backend_type = 'client backend'" 2>/dev/null) || k=0
    kills=$((kills + ${k:-0}))
    t_end=$(oq_now_ms) # the last kill
    sleep 0.5
  done
  local during left
  during=$(oq_storm_q "$kdb" "SELECT count(*) FROM ledger
                              WHERE ts >= to_timestamp($t0 / 1000.0)")
  left=$(oq_storm_q "$kdb" 'SELECT count(*) FROM onceq_items')
  oq_log "storm over: $kills backends terminated in $((t_end - t0)) ms; $during items done during it, $left left"
  oq_metric storm_terminate_backends_killed "$kills" connections
  oq_metric storm_terminate_items_during "$during" items "acked during the ${secs}s storm"
  [ "$kills" -gt 0 ] || oq_fail "the storm terminated nothing"
  [ "$during" -gt 0 ] || oq_fail "no item was done during the storm"
  # resuming: once the kills stop, the next ack comes within one poll
  # interval of the last one (items claimed when a kill cut the claim's or
  # the ack's reply wait for a sweep that the next kill may cut too, so
  # under the storm the last items can pause: printed, not asserted)
  if [ "$left" -gt 0 ]; then
    oq_storm_after() { test -n "$(oq_storm_first_ack_after "$kdb" "$t_end")"; }
    oq_wait_until 30 "an ack after the last kill" oq_storm_after
    resume=$(oq_storm_first_ack_after "$kdb" "$t_end")
    oq_metric storm_terminate_resume "$resume" ms "from the last kill to the next ack"
    # one poll interval, plus the reconnects the last kill forced (every
    # connection of every worker at once, on a machine the suite shares)
    oq_check_le "ms from the last kill to the next ack" "$resume" $((OQ_STORM_POLL_MS + 500))
  else
    oq_log "nothing left when the storm ended: no resume to time"
  fi
  oq_storm_left() { [ "$(oq_storm_q "$kdb" 'SELECT count(*) FROM onceq_items')" = 0 ]; }
  oq_wait_until 60 "every item done" oq_storm_left
  local gap
  gap=$(oq_storm_q "$kdb" "SELECT coalesce(max(d), 0) FROM (SELECT (extract(epoch
          FROM ts - lag(ts) OVER (ORDER BY ts)) * 1000)::bigint d
          FROM ledger WHERE ts >= to_timestamp($t0 / 1000.0)) g")
  oq_metric storm_terminate_longest_pause "$gap" ms "between two acks, storm start to the last ack"
  oq_storm_verdict "$kdb" "$n"
}

oq_storm_exhaust() {
  local wdb=$1 kdb=$2 hdb=$3 n=$4 secs=$5 held released resume k t_kill
  oq_storm_prepare "$kdb" "$n"
  oq_storm_workers "$wdb"
  oq_storm_some() { [ "$(oq_storm_q "$kdb" 'SELECT count(*) FROM ledger')" -ge 100 ]; }
  oq_wait_until 30 "the first 100 items done" oq_storm_some
  oq_start hog "$(oq_python)" "$(dirname "${BASH_SOURCE[0]}")/../chaos/storm_hog.py" \
    "$hdb" "$secs"
  local hog=$OQ_LAST_PID
  oq_storm_full() { grep -q '^full at' "$OQ_TMP/hog.log"; }
  oq_wait_until 15 "the hog holding every free slot" oq_storm_full
  oq_log "every free slot taken: $(grep '^full at' "$OQ_TMP/hog.log")"
  # the workers' own connections stay up through an exhaustion: end them
  # once (through a superuser's reserved slot), so that the workers must
  # wait for a slot; the hog takes each one that frees up
  k=$(oq_storm_q "$kdb" "SELECT count(pg_terminate_backend(pid))
        FROM pg_stat_activity WHERE datname = current_database()
         AND pid <> pg_backend_pid() AND backend_type = 'client backend'
         AND application_name LIKE 'onceq-worker%'")
  t_kill=$(oq_now_ms)
  oq_log "terminated the workers' $k backends"
  oq_wait_exit "$hog" $((secs + 20))
  held=$(sed -n 's/^holding \([0-9]*\) at the end/\1/p' "$OQ_TMP/hog.log")
  released=$(sed -n 's/^released at_ms=//p' "$OQ_TMP/hog.log")
  [ -n "$released" ] || oq_fail "the hog did not say when it released"
  oq_metric storm_exhaust_slots_held "$held" connections "for ${secs}s"
  # how much work went on meanwhile (a worker that won a freed slot before
  # the hog goes on with it): printed, not asserted
  oq_metric storm_exhaust_items_during "$(oq_storm_q "$kdb" "SELECT count(*)
    FROM ledger WHERE ts >= to_timestamp($t_kill / 1000.0)
                  AND ts < to_timestamp($released / 1000.0)")" items \
    "acked between the workers' backends' termination and the release"
  # a worker that won a freed slot before the hog goes on working, so the
  # items may all be done by the release: then there is no resume to time
  local left
  left=$(oq_storm_q "$kdb" "SELECT count(*) FROM onceq_items")
  if [ "$left" -gt 0 ]; then
    oq_storm_after() { test -n "$(oq_storm_first_ack_after "$kdb" "$released")"; }
    oq_wait_until 30 "an ack after the slots came back" oq_storm_after
    resume=$(oq_storm_first_ack_after "$kdb" "$released")
    oq_metric storm_exhaust_resume "$resume" ms "from the release of the slots to the next ack"
    oq_check_le "ms from the slots' release to the next ack" "$resume" "$OQ_STORM_POLL_MS"
  else
    oq_log "every item was done before the release: no resume to time"
  fi
  oq_storm_verdict "$kdb" "$n"
}
