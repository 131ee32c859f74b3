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
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_need_pgctl
oq_setup outage

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
ATT=$OQ_TMP/attempts.log
oq_attempt_script "$OQ_TMP/item.sh" "$ITEM_S" "$ATT"
oq_log "expiry $EXPIRY_MS ms, heartbeat $HB_MS ms, poll $POLL_MS ms, items of" \
  "$ITEM_S s, outages of $DOWN_MS ms; done within $BOUND_MS ms of the" \
  "restart (expiry + poll + item + $SLACK_MS ms slack)"

oq_sql "CREATE TABLE round_items (round int, id uuid)" >/dev/null
MPORT=$(oq_free_port)
oq_worker_start W --concurrency "$CONC" --heartbeat-interval "${HB_MS}ms" \
  --session-expiry "${EXPIRY_MS}ms" --poll-interval "${POLL_MS}ms" \
  --kill-grace "${GRACE_MS}ms" --metrics-addr "127.0.0.1:$MPORT" \
  --exec "$OQ_TMP/item.sh" W
w=$OQ_LAST_PID
w_registered() { [ -n "$(oq_session_of "$w")" ]; }
oq_wait_until 15 "the worker's session" w_registered

# stranded_now: ids claimed for over 1.5 s by a live session of the worker
# with no attempt started after the claim that is running or ended less
# than 1 s ago; one per line.
stranded_now() {
  local now
  now=$(oq_now_ms)
  oq_sql "SELECT i.id, (extract(epoch FROM i.claimed_at) * 1000)::int8
          FROM onceq_items i JOIN onceq_sessions s ON s.id = i.claim
          WHERE s.pid = $w AND s.heartbeated_at + s.expiry >= now()
            AND i.claimed_at < now() - interval '1500 ms'" >"$OQ_TMP/claimed"
  awk -v now="$now" 'FILENAME == ARGV[1] { if ($0 != "") { split($0, f, "|"); at[f[1]] = f[2] }; next }
       ($3 in at) {
         if ($1 == "start" && $4 >= at[$3] - 100) { open[$3]++; st[$3] = 1 }
         else if ($1 == "end" && open[$3] > 0) { open[$3]--; last[$3] = $4 }
       }
       END { for (id in at)
               if (!(id in st) || (open[id] == 0 && now - last[id] > 1000))
                 print id }' "$OQ_TMP/claimed" "$ATT" | sort
}

SUSPECT_FILE=$OQ_TMP/suspects # "id first-seen-ms" of ids seen stranded
: >"$SUSPECT_FILE"
# check_stranding: sample once; fail on an id stranded twice >= 1 s apart.
check_stranding() {
  local now id first
  now=$(oq_now_ms)
  while IFS= read -r id; do
    [ -n "$id" ] || continue
    first=$(awk -v id="$id" '$1 == id {print $2}' "$SUSPECT_FILE")
    if [ -z "$first" ]; then
      echo "$id $now" >>"$SUSPECT_FILE"
    elif [ $((now - first)) -ge 1000 ]; then
      oq_fail "row $id has been claimed by the worker's live session for" \
        "$((now - first)) ms without the worker running it (stranded);" \
        "claimed: $(tr '\n' ' ' <"$OQ_TMP/claimed")"
    fi
  done < <(stranded_now)
  # forget suspects that are no longer stranded
  stranded_now >"$OQ_TMP/still"
  awk 'FILENAME == ARGV[1] {s[$1] = 1; next} ($1 in s)' "$OQ_TMP/still" "$SUSPECT_FILE" \
    >"$SUSPECT_FILE.new"
  mv "$SUSPECT_FILE.new" "$SUSPECT_FILE"
}

# bash abandons a whole top-level command (this loop) on an expansion error
# without exiting: count the rounds that ran to their end
ROUNDS_DONE=0
for round in $(seq 1 "$ROUNDS"); do
  oq_log "---- round $round"
  sid=$(oq_session_of "$w")
  [ "$(wc -l <<<"$sid")" = 1 ] || oq_fail "the worker has not exactly one session: $sid"
  oq_sql "WITH n AS (INSERT INTO onceq_items (payload)
                     SELECT jsonb_build_object('round', $round, 'n', g)
                     FROM generate_series(1, $CONC) g RETURNING id)
          INSERT INTO round_items SELECT $round, id FROM n" >/dev/null
  ids=$OQ_TMP/ids.$round
  oq_sql "SELECT id FROM round_items WHERE round = $round ORDER BY id" >"$ids"
  running_all() {
    [ "$(oq_attempt_open "$ATT" W | grep -c -F -f "$ids" || true)" = "$CONC" ]
  }
  oq_wait_until 20 "round $round: all $CONC items running" running_all

  t_down=$(oq_now_ms)
  oq_pg_stop
  oq_log "server stopped ($(($(oq_now_ms) - t_down)) ms)"
  n=0
  while [ $(($(oq_now_ms) - t_down)) -lt "$DOWN_MS" ] && [ $n -lt 200 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  oq_pg_start
  t_up=$(oq_now_ms)
  oq_log "server back after $((t_up - t_down)) ms down"
  oq_check "round $round: worker alive after the outage" \
    "$(oq_alive "$w" && echo yes || echo no)" yes

  round_done() {
    check_stranding
    [ "$(oq_sql "SELECT count(*) FROM onceq_items i JOIN round_items r
                 ON r.id = i.id WHERE r.round = $round")" = 0 ]
  }
  oq_wait_until $((BOUND_MS / 1000 + 20)) "round $round: every item done" round_done
  t_done=$(oq_now_ms)
  oq_metric "outage_${round}_items_done_after_restart" $((t_done - t_up)) ms \
    "bound $BOUND_MS"
  oq_check_le "round $round: items done after the restart (ms)" \
    $((t_done - t_up)) "$BOUND_MS"

  # the attempts that were running at the outage stopped before the
  # session could be reaped
  last_end=$(oq_attempt_max_end "$ATT" W "$ids")
  stopped_max=$(awk 'FILENAME == ARGV[1] {want[$1] = 1; next}
      $1 == "end" && ($3 in want) && $5 == "term" && $4 > m {m = $4}
      END {printf "%.0f\n", m + 0}' "$ids" "$ATT")
  [ "$stopped_max" -gt 0 ] ||
    oq_fail "round $round: no attempt was stopped during the outage"
  oq_metric "outage_${round}_children_stopped_after_stop" $((stopped_max - t_down)) ms \
    "reap instant <= $EXPIRY_MS"
  oq_check_le "round $round: stopped attempts ended by the reap instant (ms after the stop)" \
    $((stopped_max - t_down)) "$EXPIRY_MS"
  oq_log "round $round: last attempt end $((last_end - t_up)) ms after the restart"

  # a new session, the old one gone
  new_sid=$(oq_session_of "$w")
  oq_log "round $round: session before $sid, after $new_sid"
  [ -n "$new_sid" ] || oq_fail "round $round: the worker has no session after the outage"
  if [ "$new_sid" = "$sid" ]; then
    oq_fail "round $round: the session expired during the outage came back (revived, not new)"
  fi
  old_gone() { [ "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid'")" = 0 ]; }
  oq_wait_until 10 "round $round: the old session row gone" old_gone
  t_new=$(oq_log_first_ms "$OQ_TMP/W.log" "registered a new session" "$t_down")
  [ -z "$t_new" ] ||
    oq_metric "outage_${round}_new_session_after_restart" $((t_new - t_up)) ms
  oq_check_no_overlap "$ATT"
  ROUNDS_DONE=$((ROUNDS_DONE + 1))
done
oq_check "rounds that ran to their end" "$ROUNDS_DONE" "$ROUNDS"

rec=$(oq_metric_value "127.0.0.1:$MPORT" onceq_worker_reconciled_total)
oq_log "onceq_worker_reconciled_total: ${rec:-(not served)}"
oq_stop "$w" 20
oq_check "worker exit code after SIGTERM" "$OQ_RC" 0
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "items completed at least once" \
  "$(awk '$1 == "end" && $5 == "ok" {print $3}' "$ATT" | sort -u | wc -l | tr -d ' ')" \
  $((ROUNDS * CONC))
oq_log "items completed more than once (an ack lost to the outage):" \
  "$(awk '$1 == "end" && $5 == "ok" {print $3}' "$ATT" | sort | uniq -d | wc -l | tr -d ' ')"
oq_log "attempts: $(oq_attempt_count "$ATT" start), stopped: $(awk '$1 == "end" && $5 == "term"' "$ATT" | wc -l | tr -d ' ')"
oq_log "reconciliation sweeps that released claims, by trigger:"
grep -E 'reconcile: released' "$OQ_TMP/W.log" |
  sed -n 's/.*trigger: \([^;)]*\).*/\1/p' | sort | uniq -c || true
oq_log "sessions registered again: $(grep -c 'registered a new session' "$OQ_TMP/W.log" || true)"
oq_log "PASS"
