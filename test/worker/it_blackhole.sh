#!/usr/bin/env bash
# it_blackhole.sh: a worker whose connections stop answering without being
# closed (a blackholed host: no RST, no FIN, its data acknowledged, so
# neither keepalives nor tcp_user_timeout end the connection) fences itself
# on its own clock, and stops its --exec children before anyone may take
# its session over (docs/design.md §4a: the state is computed when read,
# so a blocked heartbeat cannot hold the fence off).
#
# W1 reaches the database through oq_cutproxy; W2 directly. Each --exec
# attempt logs its start and end (test/harness/oq_harness.sh: the attempt log). Two
# phases, each with N fresh items that W1 alone has started:
#   1. only W1's heartbeat connection (application_name
#      onceq-worker-heartbeat, new ones too) is blackholed;
#   2. every connection of W1 is blackholed, new ones too.
# In each phase:
#  - W1 fences at most (expiry - fence margin) + FENCE_SLACK_MS after its
#    last heartbeat that landed (heartbeated_at, read from the database: a
#    bound on the worker's own last-ok instant). The fence instant is the
#    first of its visible effects: the "session is fenced" log line, or the
#    first of its children stopped (the line comes from the heartbeat
#    thread, which a blocked statement may hold up to its deadline; the
#    state itself is computed when read). The line must appear too;
#  - every attempt W1 ran ended (SIGTERM, "term") before the session's
#    reap instant (heartbeated_at + expiry), the earliest moment W2's
#    reaper may take it over: no slack there;
#  - W1 starts nothing between its fence and its next session;
#  - the items are completed (W2 runs them once W1's session is reaped),
#    nothing is dead, and no two attempts of one item overlap in time;
#  - once the blackhole is lifted W1 goes on under a NEW session.
# Timings are printed (METRIC lines). The fence margin is the library's
# default (OQ_FENCE_MARGIN_MS, 1000 ms; override with FENCE_MARGIN_MS),
# and --kill-grace is 500 ms, inside it.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup blackhole

N=4
HB_MS=500
EXPIRY_MS=4000
MARGIN_MS=${FENCE_MARGIN_MS:-1000}
GRACE_MS=500
ITEM_S=8            # longer than the fence delay: running when W1 fences
FENCE_SLACK_MS=700  # fence logged at most this late after expiry - margin
ATT=$OQ_TMP/attempts.log
oq_attempt_script "$OQ_TMP/item.sh" "$ITEM_S" "$ATT"
FLAGS=(--heartbeat-interval "${HB_MS}ms" --session-expiry "${EXPIRY_MS}ms"
  --poll-interval 200ms --kill-grace "${GRACE_MS}ms" --concurrency "$N")
oq_log "expiry $EXPIRY_MS ms, fence margin $MARGIN_MS ms, heartbeat $HB_MS ms," \
  "kill grace $GRACE_MS ms, items of $ITEM_S s; fence slack $FENCE_SLACK_MS ms"

oq_proxy_start px
oq_sql "CREATE TABLE phase_items (phase int, id uuid)" >/dev/null

oq_worker_start_on W1 "$OQ_PROXY_DSN" "${FLAGS[@]}" --exec "$OQ_TMP/item.sh" W1
w1=$OQ_LAST_PID
w1_registered() { [ -n "$(oq_session_of "$w1")" ]; }
oq_wait_until 15 "W1's session" w1_registered
w2=""

# phase NUM COMMAND: one blackhole phase (see the file comment).
phase() {
  local ph=$1 cmd=$2 sid ids t_bh hb hb0 t_fence t_rejoin r_ms
  oq_log "---- phase $ph: $cmd"
  sid=$(oq_session_of "$w1")
  [ "$(wc -l <<<"$sid")" = 1 ] || oq_fail "W1 has not exactly one session: $sid"
  oq_sql "WITH n AS (INSERT INTO onceq_items (payload)
                     SELECT jsonb_build_object('phase', $ph, 'n', g)
                     FROM generate_series(1, $N) g RETURNING id)
          INSERT INTO phase_items SELECT $ph, id FROM n" >/dev/null
  ids=$OQ_TMP/ids.$ph
  oq_sql "SELECT id FROM phase_items WHERE phase = $ph ORDER BY id" >"$ids"
  w1_running_all() {
    [ "$(oq_attempt_open "$ATT" W1 | grep -c -F -f "$ids" || true)" = "$N" ]
  }
  oq_wait_until 20 "W1 to run all $N items of phase $ph" w1_running_all

  t_bh=$(oq_proxy_cmd px "$cmd")
  hb0=$(oq_sql "SELECT (extract(epoch FROM heartbeated_at) * 1000)::int8
                FROM onceq_sessions WHERE id = '$sid'")
  oq_log "blackhole on at $t_bh; W1 session $sid, heartbeated_at $hb0"
  if [ -z "$w2" ]; then
    oq_worker_start W2 "${FLAGS[@]}" --exec "$OQ_TMP/item.sh" W2
    w2=$OQ_LAST_PID
  fi

  # until W1 fences: keep the last heartbeat that landed
  hb=$hb0
  first_stop() {
    awk -v a="$t_bh" 'FILENAME == ARGV[1] {want[$1] = 1; next}
         $1 == "end" && $2 == "W1" && ($3 in want) && $4 >= a &&
         (m == 0 || $4 < m) {m = $4} END {if (m) printf "%.0f\n", m}' "$ids" "$ATT"
  }
  fence_seen() {
    local v
    v=$(oq_sql "SELECT (extract(epoch FROM heartbeated_at) * 1000)::int8
                FROM onceq_sessions WHERE id = '$sid'")
    [ -z "$v" ] || hb=$v
    [ -n "$(oq_log_first_ms "$OQ_TMP/W1.log" "session=$sid .*session is fenced" "$t_bh")" ] ||
      [ -n "$(first_stop)" ]
  }
  oq_wait_until $(((EXPIRY_MS + 3000) / 1000)) "W1 to fence (phase $ph)" fence_seen
  fence_logged() {
    [ -n "$(oq_log_first_ms "$OQ_TMP/W1.log" "session=$sid .*session is fenced" "$t_bh")" ]
  }
  oq_wait_until $(((EXPIRY_MS + 3000) / 1000)) \
    "W1's 'session is fenced' line (phase $ph)" fence_logged
  t_log=$(oq_log_first_ms "$OQ_TMP/W1.log" "session=$sid .*session is fenced" "$t_bh")
  t_stop1=$(first_stop)
  t_fence=$t_log
  [ -z "$t_stop1" ] || [ "$t_stop1" -ge "$t_fence" ] || t_fence=$t_stop1
  grep -q "blackholed now [1-9]" "$OQ_TMP/px.log" ||
    oq_fail "the proxy never blackholed a connection"
  r_ms=$((hb + EXPIRY_MS))
  oq_metric "blackhole_${ph}_fence_after_last_heartbeat" $((t_fence - hb)) ms \
    "bound $((EXPIRY_MS - MARGIN_MS)) + $FENCE_SLACK_MS slack"
  oq_metric "blackhole_${ph}_fence_line_after_last_heartbeat" $((t_log - hb)) ms
  [ -z "$t_stop1" ] ||
    oq_metric "blackhole_${ph}_first_child_stopped_after_last_heartbeat" $((t_stop1 - hb)) ms
  oq_metric "blackhole_${ph}_fence_after_blackhole" $((t_fence - t_bh)) ms
  oq_check_le "phase $ph: fence delay after the last landed heartbeat (ms)" \
    $((t_fence - hb)) $((EXPIRY_MS - MARGIN_MS + FENCE_SLACK_MS))

  # W1's children end before the reap instant
  w1_phase_ended() {
    [ "$(oq_attempt_open "$ATT" W1 | grep -c -F -f "$ids" || true)" = 0 ]
  }
  oq_wait_until "$(oq_secs_until "$r_ms" 4)" \
    "W1's attempts of phase $ph to end" w1_phase_ended
  local last_end
  last_end=$(oq_attempt_max_end "$ATT" W1 "$ids")
  oq_metric "blackhole_${ph}_children_stopped_after_fence" $((last_end - t_fence)) ms
  oq_metric "blackhole_${ph}_children_stopped_before_reap_instant" \
    $((r_ms - last_end)) ms "reap instant = heartbeated_at + expiry"
  oq_check_le "phase $ph: W1's last attempt end <= reap instant (epoch ms)" \
    "$last_end" "$r_ms"
  oq_check "phase $ph: W1 attempts that ran to completion" \
    "$(awk '$1 == "end" && $2 == "W1" && $5 == "ok"' "$ATT" | grep -c -F -f "$ids" || true)" 0

  # the items get done (by W2, once W1's session is reaped)
  phase_done() {
    [ "$(oq_sql "SELECT count(*) FROM onceq_items i JOIN phase_items p
                 ON p.id = i.id WHERE p.phase = $ph")" = 0 ]
  }
  oq_wait_until "$(oq_secs_until "$r_ms" $((ITEM_S + 20)))" \
    "the items of phase $ph done" phase_done
  oq_metric "blackhole_${ph}_items_done_after_blackhole" $(($(oq_now_ms) - t_bh)) ms
  oq_check "phase $ph: W1's old session reaped" \
    "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid'")" 0
  t_rejoin=$(oq_log_first_ms "$OQ_TMP/W1.log" "registered a new session" "$t_fence")
  oq_check "phase $ph: W1 attempts started between its fence and its next session" \
    "$(awk -v a="$t_fence" -v b="${t_rejoin:-99999999999999}" \
      '$1 == "start" && $2 == "W1" && $4 > a && $4 < b' "$ATT" | wc -l | tr -d ' ')" 0
  oq_check "phase $ph: items with a completed attempt" \
    "$(awk '$1 == "end" && $5 == "ok" {print $3}' "$ATT" | sort -u |
      grep -c -F -f "$ids" || true)" "$N"
  oq_check_no_overlap "$ATT"

  oq_proxy_cmd px unblackhole >/dev/null
  w1_new_session() {
    local s
    s=$(oq_session_of "$w1")
    [ -n "$s" ] && [ "$s" != "$sid" ] && [ "$(wc -l <<<"$s")" = 1 ]
  }
  oq_wait_until 30 "W1 to go on under a new session after phase $ph" w1_new_session
  oq_check "W1 alive after phase $ph" "$(oq_alive "$w1" && echo yes || echo no)" yes
  oq_log "W1's new session: $(oq_session_of "$w1")"
  PHASES_DONE=$((PHASES_DONE + 1))
}

# bash abandons a whole top-level command on an expansion error without
# exiting: count the phases that ran to their end
PHASES_DONE=0

phase 1 "blackhole-app onceq-worker-heartbeat"
# phase 2: W1 alone takes the new items; W2 comes back once W1 is cut off
oq_stop "$w2" 20
oq_check "W2's exit code after SIGTERM" "$OQ_RC" 0
w2=""
phase 2 "blackhole-all"

oq_check "phases that ran to their end" "$PHASES_DONE" 2
oq_stop "$w2" 20
oq_check "W2's exit code after SIGTERM" "$OQ_RC" 0
oq_stop "$w1" 20
oq_check "W1's exit code after SIGTERM" "$OQ_RC" 0
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check_no_overlap "$ATT"
oq_log "attempts: W1 $(oq_attempt_count "$ATT" start W1), W2 $(oq_attempt_count "$ATT" start W2)"
oq_log "PASS"
