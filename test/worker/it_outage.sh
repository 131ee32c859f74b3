#!/usr/bin/env bash
# it_outage.sh: PostgreSQL stopped (pg_ctl -m immediate) for longer than the
# session expiry while --exec items longer than the fence delay run, three
# times, with one worker kept alive throughout (issue 9: before, the
# heartbeat revived the expired session and its claims stayed stranded on a
# live session until the worker exited).
#
# Each round: CONC fresh items, all running in the worker (CONC executors);
# the server goes down for DOWN_MS (> expiry) and comes back. Checks:
#  - the attempts running at the outage were stopped (SIGTERM, "term") no
#    later than the session's reap instant (last heartbeat <= the stop,
#    + expiry): no slack;
#  - after the server is back, every item of the round is done within
#    expiry + poll interval + item duration + SLACK_MS of pg_ctl start
#    returning (SLACK_MS covers the reconnect backoff and the server's
#    crash recovery; printed with the measured time);
#  - while waiting, no row is claimed by a live session of the worker that
#    the worker does not hold: every row claimed (for over 1.5 s) by a
#    session of its pid that has not expired must have an attempt started
#    after its claim that is running or ended less than 1 s ago (the
#    attempt log); a row seen stranded twice, 1 s apart, fails the test;
#  - the worker goes on under a NEW session (not the old one revived), and
#    the old row is gone;
#  - the worker is alive; no two attempts of one item overlap in time.
# At the end: every item done, none dead, each completed at least once.
# Printed: the timings (METRIC lines), the worker's reconciliation sweeps
# by trigger and onceq_worker_reconciled_total.
#
# Stops the shared test server, so ctest runs it with RUN_SERIAL; skips
# (77) without ONCEQ_TEST_PGDATA/ONCEQ_TEST_PGBIN (an external --dsn).
source "$(dirname "${BASH_SOURCE[0]}")/it_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/it_fault_lib.sh"
fl_need_pgctl
it_setup outage
fl_install_pg_trap

ROUNDS=3
CONC=4
HB_MS=500
EXPIRY_MS=4000
POLL_MS=500
GRACE_MS=500
ITEM_S=4                       # longer than the fence delay (expiry - 1 s)
DOWN_MS=$((EXPIRY_MS + 2000))  # longer than the expiry
SLACK_MS=3000
BOUND_MS=$((EXPIRY_MS + POLL_MS + ITEM_S * 1000 + SLACK_MS))
ATT=$IT_TMP/attempts.log
fl_item_script "$IT_TMP/item.sh" "$ITEM_S" "$ATT"
it_log "expiry $EXPIRY_MS ms, heartbeat $HB_MS ms, poll $POLL_MS ms, items of" \
  "$ITEM_S s, outages of $DOWN_MS ms; done within $BOUND_MS ms of the" \
  "restart (expiry + poll + item + $SLACK_MS ms slack)"

it_sql "CREATE TABLE round_items (round int, id uuid)" >/dev/null
MPORT=$(fl_free_port)
it_worker_start W --concurrency "$CONC" --heartbeat-interval "${HB_MS}ms" \
  --session-expiry "${EXPIRY_MS}ms" --poll-interval "${POLL_MS}ms" \
  --kill-grace "${GRACE_MS}ms" --metrics-addr "127.0.0.1:$MPORT" \
  --exec "$IT_TMP/item.sh" W
w=$IT_LAST_PID
w_registered() { [ -n "$(fl_session_of "$w")" ]; }
it_wait_until 15 "the worker's session" w_registered

# stranded_now: ids claimed for over 1.5 s by a live session of the worker
# with no attempt started after the claim that is running or ended less
# than 1 s ago; one per line.
stranded_now() {
  local now
  now=$(it_now_ms)
  it_sql "SELECT i.id, (extract(epoch FROM i.claimed_at) * 1000)::int8
          FROM onceq_items i JOIN onceq_sessions s ON s.id = i.claim
          WHERE s.pid = $w AND s.heartbeated_at + s.expiry >= now()
            AND i.claimed_at < now() - interval '1500 ms'" >"$IT_TMP/claimed"
  awk -v now="$now" 'FILENAME == ARGV[1] { if ($0 != "") { split($0, f, "|"); at[f[1]] = f[2] }; next }
       ($3 in at) {
         if ($1 == "start" && $4 >= at[$3] - 100) { open[$3]++; st[$3] = 1 }
         else if ($1 == "end" && open[$3] > 0) { open[$3]--; last[$3] = $4 }
       }
       END { for (id in at)
               if (!(id in st) || (open[id] == 0 && now - last[id] > 1000))
                 print id }' "$IT_TMP/claimed" "$ATT" | sort
}

SUSPECT_FILE=$IT_TMP/suspects # "id first-seen-ms" of ids seen stranded
: >"$SUSPECT_FILE"
# check_stranding: sample once; fail on an id stranded twice >= 1 s apart.
check_stranding() {
  local now id first
  now=$(it_now_ms)
  while IFS= read -r id; do
    [ -n "$id" ] || continue
    first=$(awk -v id="$id" '$1 == id {print $2}' "$SUSPECT_FILE")
    if [ -z "$first" ]; then
      echo "$id $now" >>"$SUSPECT_FILE"
    elif [ $((now - first)) -ge 1000 ]; then
      it_fail "row $id has been claimed by the worker's live session for" \
        "$((now - first)) ms without the worker running it (stranded);" \
        "claimed: $(tr '\n' ' ' <"$IT_TMP/claimed")"
    fi
  done < <(stranded_now)
  # forget suspects that are no longer stranded
  stranded_now >"$IT_TMP/still"
  awk 'FILENAME == ARGV[1] {s[$1] = 1; next} ($1 in s)' "$IT_TMP/still" "$SUSPECT_FILE" \
    >"$SUSPECT_FILE.new"
  mv "$SUSPECT_FILE.new" "$SUSPECT_FILE"
}

# bash abandons a whole top-level command (this loop) on an expansion error
# without exiting: count the rounds that ran to their end
ROUNDS_DONE=0
for round in $(seq 1 "$ROUNDS"); do
  it_log "---- round $round"
  sid=$(fl_session_of "$w")
  [ "$(wc -l <<<"$sid")" = 1 ] || it_fail "the worker has not exactly one session: $sid"
  it_sql "WITH n AS (INSERT INTO onceq_items (payload)
                     SELECT jsonb_build_object('round', $round, 'n', g)
                     FROM generate_series(1, $CONC) g RETURNING id)
          INSERT INTO round_items SELECT $round, id FROM n" >/dev/null
  ids=$IT_TMP/ids.$round
  it_sql "SELECT id FROM round_items WHERE round = $round ORDER BY id" >"$ids"
  running_all() {
    [ "$(fl_open_attempts "$ATT" W | grep -c -F -f "$ids" || true)" = "$CONC" ]
  }
  it_wait_until 20 "round $round: all $CONC items running" running_all

  t_down=$(it_now_ms)
  fl_pg_stop
  it_log "server stopped ($(($(it_now_ms) - t_down)) ms)"
  n=0
  while [ $(($(it_now_ms) - t_down)) -lt "$DOWN_MS" ] && [ $n -lt 200 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  fl_pg_start
  t_up=$(it_now_ms)
  it_log "server back after $((t_up - t_down)) ms down"
  it_check "round $round: worker alive after the outage" \
    "$(it_alive "$w" && echo yes || echo no)" yes

  round_done() {
    check_stranding
    [ "$(it_sql "SELECT count(*) FROM onceq_items i JOIN round_items r
                 ON r.id = i.id WHERE r.round = $round")" = 0 ]
  }
  it_wait_until $((BOUND_MS / 1000 + 20)) "round $round: every item done" round_done
  t_done=$(it_now_ms)
  it_metric "outage_${round}_items_done_after_restart" $((t_done - t_up)) ms \
    "bound $BOUND_MS"
  it_check_le "round $round: items done after the restart (ms)" \
    $((t_done - t_up)) "$BOUND_MS"

  # the attempts that were running at the outage stopped before the
  # session could be reaped
  last_end=$(fl_max_end "$ATT" W "$ids")
  stopped_max=$(awk 'FILENAME == ARGV[1] {want[$1] = 1; next}
      $1 == "end" && ($3 in want) && $5 == "term" && $4 > m {m = $4}
      END {printf "%.0f\n", m + 0}' "$ids" "$ATT")
  [ "$stopped_max" -gt 0 ] ||
    it_fail "round $round: no attempt was stopped during the outage"
  it_metric "outage_${round}_children_stopped_after_stop" $((stopped_max - t_down)) ms \
    "reap instant <= $EXPIRY_MS"
  it_check_le "round $round: stopped attempts ended by the reap instant (ms after the stop)" \
    $((stopped_max - t_down)) "$EXPIRY_MS"
  it_log "round $round: last attempt end $((last_end - t_up)) ms after the restart"

  # a new session, the old one gone
  new_sid=$(fl_session_of "$w")
  it_log "round $round: session before $sid, after $new_sid"
  [ -n "$new_sid" ] || it_fail "round $round: the worker has no session after the outage"
  if [ "$new_sid" = "$sid" ]; then
    it_fail "round $round: the session expired during the outage came back (revived, not new)"
  fi
  old_gone() { [ "$(it_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid'")" = 0 ]; }
  it_wait_until 10 "round $round: the old session row gone" old_gone
  t_new=$(fl_log_first_ms "$IT_TMP/W.log" "registered a new session" "$t_down")
  [ -z "$t_new" ] ||
    it_metric "outage_${round}_new_session_after_restart" $((t_new - t_up)) ms
  fl_check_no_overlap "$ATT"
  ROUNDS_DONE=$((ROUNDS_DONE + 1))
done
it_check "rounds that ran to their end" "$ROUNDS_DONE" "$ROUNDS"

rec=$(fl_metric_value "127.0.0.1:$MPORT" onceq_worker_reconciled_total)
it_log "onceq_worker_reconciled_total: ${rec:-(not served)}"
it_stop "$w" 20
it_check "worker exit code after SIGTERM" "$IT_RC" 0
it_check "items left" "$(it_sql 'SELECT count(*) FROM onceq_items')" 0
it_check "dead items" "$(it_sql 'SELECT count(*) FROM onceq_dead')" 0
it_check "items completed at least once" \
  "$(awk '$1 == "end" && $5 == "ok" {print $3}' "$ATT" | sort -u | wc -l | tr -d ' ')" \
  $((ROUNDS * CONC))
it_log "items completed more than once (an ack lost to the outage):" \
  "$(awk '$1 == "end" && $5 == "ok" {print $3}' "$ATT" | sort | uniq -d | wc -l | tr -d ' ')"
it_log "attempts: $(fl_count "$ATT" start), stopped: $(awk '$1 == "end" && $5 == "term"' "$ATT" | wc -l | tr -d ' ')"
it_log "reconciliation sweeps that released claims, by trigger:"
grep -E 'reconcile: released' "$IT_TMP/W.log" |
  sed -n 's/.*trigger: \([^;)]*\).*/\1/p' | sort | uniq -c || true
it_log "sessions registered again: $(grep -c 'registered a new session' "$IT_TMP/W.log" || true)"
it_log "PASS"
