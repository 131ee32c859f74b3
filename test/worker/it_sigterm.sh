#!/usr/bin/env bash
# it_sigterm.sh: SIGTERM drains, a second SIGTERM stops now.
#  1. SIGTERM while an --exec task runs: the task completes and is
#     acknowledged, the session row is deleted, exit code 0.
#  2. SIGTERM twice while a task that ignores SIGTERM sleeps 30 s: the
#     child's process group is killed within kill-grace + 3 s, the worker
#     exits within 5 s, its session row is gone and the item is unclaimed
#     and still queued; another worker runs it later (attempt 2).
source "$(dirname "${BASH_SOURCE[0]}")/it_lib.sh"
it_setup sigterm

# pgrp_members PGID: how many live processes are in process group PGID.
pgrp_members() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v pg="$1" '{ sub(/^.*\) /, ""); if ($3 == pg && $1 != "Z") n++ }
                    END { print n + 0 }'
}

# ---- 1. first SIGTERM: the running task completes and is acked
cat >"$IT_TMP/slow2.sh" <<EOF
#!/bin/sh
cat >/dev/null
echo "\$1" >>"$IT_TMP/started1"
sleep 2
echo "\$1" >>"$IT_TMP/done1"
EOF
chmod +x "$IT_TMP/slow2.sh"
id1=$(it_sql "INSERT INTO onceq_items (queue, payload) VALUES ('q1', '{}')
              RETURNING id")
it_worker_start drain1 --queue q1 --shutdown-timeout 10s --exec "$IT_TMP/slow2.sh"
w=$IT_LAST_PID
started1() { [ -s "$IT_TMP/started1" ]; }
it_wait_until 15 "the task to start" started1
it_check "sessions of the worker while it runs" "$(it_session_count_for_pid "$w")" 1
t0=$(it_now_ms)
kill -TERM "$w"
it_wait_exit "$w" 15
took=$(($(it_now_ms) - t0))
it_log "worker exited ${took} ms after SIGTERM"
it_check "exit code after one SIGTERM" "$IT_RC" 0
it_check "the task's effect" "$(cat "$IT_TMP/done1" 2>/dev/null)" "$id1"
it_check "item acked (gone)" "$(it_sql "SELECT count(*) FROM onceq_items WHERE id = '$id1'")" 0
it_check "dead items" "$(it_sql 'SELECT count(*) FROM onceq_dead')" 0
it_check "session rows of the worker" "$(it_session_count_for_pid "$w")" 0
it_check "session rows" "$(it_sql 'SELECT count(*) FROM onceq_sessions')" 0
it_check "task runs" "$(wc -l <"$IT_TMP/started1")" 1

# ---- 2. second SIGTERM: stop now; the child group is killed
cat >"$IT_TMP/stubborn.sh" <<EOF
#!/bin/sh
# ignores SIGTERM (so only the SIGKILL after the kill grace ends it) and
# leaves a grandchild in its process group
trap '' TERM
cat >/dev/null
echo \$\$ >"$IT_TMP/leader.pid.tmp" && mv "$IT_TMP/leader.pid.tmp" "$IT_TMP/leader.pid"
sleep 30 &
echo \$! >"$IT_TMP/grandchild.pid"
wait
echo "\$1" >>"$IT_TMP/done2"
EOF
chmod +x "$IT_TMP/stubborn.sh"
id2=$(it_sql "INSERT INTO onceq_items (queue, payload) VALUES ('q2', '{}')
              RETURNING id")
it_worker_start stop2 --queue q2 --shutdown-timeout 10s --kill-grace 1s \
  --exec "$IT_TMP/stubborn.sh"
w=$IT_LAST_PID
leader_up() { [ -s "$IT_TMP/leader.pid" ] && [ -s "$IT_TMP/grandchild.pid" ]; }
it_wait_until 15 "the stubborn task to start" leader_up
leader=$(cat "$IT_TMP/leader.pid")
grandchild=$(cat "$IT_TMP/grandchild.pid")
it_log "task leader pid $leader, grandchild pid $grandchild"
# if the worker fails to stop them, the EXIT trap does (they ignore SIGTERM:
# SIGKILL after 5 s)
IT_PIDS+=("$leader" "$grandchild")
it_check "live processes in the task's group" "$(pgrp_members "$leader")" 2
kill -TERM "$w"
sleep 0.3
it_check "worker still running after the first SIGTERM (draining)" \
  "$(it_alive "$w" && echo yes || echo no)" yes
it_check "task still running after the first SIGTERM" \
  "$(it_alive "$leader" && echo yes || echo no)" yes
t0=$(it_now_ms)
kill -TERM "$w"
n=0
while [ "$(pgrp_members "$leader")" != 0 ] && [ $n -lt 300 ]; do
  sleep 0.02
  n=$((n + 1))
done
group_gone_ms=$(($(it_now_ms) - t0))
it_log "task group gone ${group_gone_ms} ms after the second SIGTERM"
it_check "live processes in the task's group" "$(pgrp_members "$leader")" 0
it_forget "$leader" "$grandchild"
# SIGKILL comes after the 1 s grace; the rest is slack for a loaded or
# sanitizer-built run (what matters: well before --shutdown-timeout 30 s)
it_check_le "ms until the group was gone (kill grace 1s + 3s)" "$group_gone_ms" 4000
it_wait_exit "$w" 5
exit_ms=$(($(it_now_ms) - t0))
it_log "worker exited ${exit_ms} ms after the second SIGTERM, exit code $IT_RC"
it_check_le "ms until the worker exited" "$exit_ms" 5000
case "$IT_RC" in
0 | 1) it_log "ok: exit code $IT_RC after a second SIGTERM" ;;
*) it_fail "exit code after a second SIGTERM: $IT_RC (want 0 or 1, not a crash)" ;;
esac
it_check "session rows of the worker" "$(it_session_count_for_pid "$w")" 0
it_check "session rows" "$(it_sql 'SELECT count(*) FROM onceq_sessions')" 0
it_check "the item, unclaimed and still queued" \
  "$(it_sql "SELECT count(*) FROM onceq_items WHERE id = '$id2' AND claim IS NULL")" 1
it_check "its attempts so far" "$(it_sql "SELECT attempts FROM onceq_items WHERE id = '$id2'")" 1
it_check "its run_at is not in the future" \
  "$(it_sql "SELECT run_at <= now() + interval '1 second' FROM onceq_items WHERE id = '$id2'")" t
it_check "the stubborn task's effect" "$([ -e "$IT_TMP/done2" ] && echo present || echo absent)" absent

# ---- it runs again later
cat >"$IT_TMP/quick.sh" <<EOF
#!/bin/sh
cat >/dev/null
echo "\$1 \$ONCEQ_ATTEMPT" >>"$IT_TMP/rerun"
EOF
chmod +x "$IT_TMP/quick.sh"
it_worker_start rerun --queue q2 --drain --exec "$IT_TMP/quick.sh"
it_wait_exit "$IT_LAST_PID" 20
it_check "rerun worker's exit code" "$IT_RC" 0
it_check "the rerun (id, attempt)" "$(cat "$IT_TMP/rerun" 2>/dev/null)" "$id2 2"
it_check "items left" "$(it_sql 'SELECT count(*) FROM onceq_items')" 0
it_log "PASS"
