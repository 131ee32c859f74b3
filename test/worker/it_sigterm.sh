#!/usr/bin/env bash
# it_sigterm.sh: SIGTERM drains, a second SIGTERM stops now.
#  1. SIGTERM while an --exec task runs: the task completes and is
#     acknowledged, the session row is deleted, exit code 0.
#  2. SIGTERM twice while a task that ignores SIGTERM sleeps 30 s: the
#     child's process group is killed within kill-grace + 3 s, the worker
#     exits within 5 s, its session row is gone and the item is unclaimed
#     and still queued; another worker runs it later (attempt 2).
#  3. SIGTERM aimed at a thread that is not the main one (tgkill: the
#     kernel may hand a process's signal to any thread that does not block
#     it): the worker still drains and exits 0. Under TSan this failed
#     with exit 66 while the counter was a volatile sig_atomic_t (a data
#     race between the handler's thread and the loop's).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup sigterm

# pgrp_members PGID: how many live processes are in process group PGID.
pgrp_members() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v pg="$1" '{ sub(/^.*\) /, ""); if ($3 == pg && $1 != "Z") n++ }
                    END { print n + 0 }'
}

# ---- 1. first SIGTERM: the running task completes and is acked
cat >"$OQ_TMP/slow2.sh" <<EOF
#!/bin/sh
cat >/dev/null
echo "\$1" >>"$OQ_TMP/started1"
sleep 2
echo "\$1" >>"$OQ_TMP/done1"
EOF
chmod +x "$OQ_TMP/slow2.sh"
id1=$(oq_sql "INSERT INTO onceq_items (queue, payload) VALUES ('q1', '{}')
              RETURNING id")
oq_worker_start drain1 --queue q1 --shutdown-timeout 10s --exec "$OQ_TMP/slow2.sh"
w=$OQ_LAST_PID
started1() { [ -s "$OQ_TMP/started1" ]; }
oq_wait_until 15 "the task to start" started1
oq_check "sessions of the worker while it runs" "$(oq_session_count_for_pid "$w")" 1
t0=$(oq_now_ms)
kill -TERM "$w"
oq_wait_exit "$w" 15
took=$(($(oq_now_ms) - t0))
oq_log "worker exited ${took} ms after SIGTERM"
oq_check "exit code after one SIGTERM" "$OQ_RC" 0
oq_check "the task's effect" "$(cat "$OQ_TMP/done1" 2>/dev/null)" "$id1"
oq_check "item acked (gone)" "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id = '$id1'")" 0
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "session rows of the worker" "$(oq_session_count_for_pid "$w")" 0
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_check "task runs" "$(wc -l <"$OQ_TMP/started1")" 1

# ---- 2. second SIGTERM: stop now; the child group is killed
cat >"$OQ_TMP/stubborn.sh" <<EOF
#!/bin/sh
# ignores SIGTERM (so only the SIGKILL after the kill grace ends it) and
# leaves a grandchild in its process group
trap '' TERM
cat >/dev/null
echo \$\$ >"$OQ_TMP/leader.pid.tmp" && mv "$OQ_TMP/leader.pid.tmp" "$OQ_TMP/leader.pid"
sleep 30 &
echo \$! >"$OQ_TMP/grandchild.pid"
wait
echo "\$1" >>"$OQ_TMP/done2"
EOF
chmod +x "$OQ_TMP/stubborn.sh"
id2=$(oq_sql "INSERT INTO onceq_items (queue, payload) VALUES ('q2', '{}')
              RETURNING id")
oq_worker_start stop2 --queue q2 --shutdown-timeout 10s --kill-grace 1s \
  --exec "$OQ_TMP/stubborn.sh"
w=$OQ_LAST_PID
leader_up() { [ -s "$OQ_TMP/leader.pid" ] && [ -s "$OQ_TMP/grandchild.pid" ]; }
oq_wait_until 15 "the stubborn task to start" leader_up
leader=$(cat "$OQ_TMP/leader.pid")
grandchild=$(cat "$OQ_TMP/grandchild.pid")
oq_log "task leader pid $leader, grandchild pid $grandchild"
# if the worker fails to stop them, the EXIT trap does (they ignore SIGTERM:
# SIGKILL after 5 s)
OQ_PIDS+=("$leader" "$grandchild")
oq_check "live processes in the task's group" "$(pgrp_members "$leader")" 2
kill -TERM "$w"
sleep 0.3
oq_check "worker still running after the first SIGTERM (draining)" \
  "$(oq_alive "$w" && echo yes || echo no)" yes
oq_check "task still running after the first SIGTERM" \
  "$(oq_alive "$leader" && echo yes || echo no)" yes
t0=$(oq_now_ms)
kill -TERM "$w"
n=0
while [ "$(pgrp_members "$leader")" != 0 ] && [ $n -lt 300 ]; do
  sleep 0.02
  n=$((n + 1))
done
group_gone_ms=$(($(oq_now_ms) - t0))
oq_log "task group gone ${group_gone_ms} ms after the second SIGTERM"
oq_check "live processes in the task's group" "$(pgrp_members "$leader")" 0
oq_forget "$leader" "$grandchild"
# SIGKILL comes after the 1 s grace; the rest is slack for a loaded or
# sanitizer-built run (what matters: well before --shutdown-timeout 30 s)
oq_check_le "ms until the group was gone (kill grace 1s + 3s)" "$group_gone_ms" 4000
oq_wait_exit "$w" 5
exit_ms=$(($(oq_now_ms) - t0))
oq_log "worker exited ${exit_ms} ms after the second SIGTERM, exit code $OQ_RC"
oq_check_le "ms until the worker exited" "$exit_ms" 5000
case "$OQ_RC" in
0 | 1) oq_log "ok: exit code $OQ_RC after a second SIGTERM" ;;
*) oq_fail "exit code after a second SIGTERM: $OQ_RC (want 0 or 1, not a crash)" ;;
esac
oq_check "session rows of the worker" "$(oq_session_count_for_pid "$w")" 0
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_check "the item, unclaimed and still queued" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id = '$id2' AND claim IS NULL")" 1
oq_check "its attempts so far" "$(oq_sql "SELECT attempts FROM onceq_items WHERE id = '$id2'")" 1
oq_check "its run_at is not in the future" \
  "$(oq_sql "SELECT run_at <= now() + interval '1 second' FROM onceq_items WHERE id = '$id2'")" t
oq_check "the stubborn task's effect" "$([ -e "$OQ_TMP/done2" ] && echo present || echo absent)" absent

# ---- it runs again later
cat >"$OQ_TMP/quick.sh" <<EOF
#!/bin/sh
cat >/dev/null
echo "\$1 \$ONCEQ_ATTEMPT" >>"$OQ_TMP/rerun"
EOF
chmod +x "$OQ_TMP/quick.sh"
oq_worker_start rerun --queue q2 --drain --exec "$OQ_TMP/quick.sh"
oq_wait_exit "$OQ_LAST_PID" 20
oq_check "rerun worker's exit code" "$OQ_RC" 0
oq_check "the rerun (id, attempt)" "$(cat "$OQ_TMP/rerun" 2>/dev/null)" "$id2 2"
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0

# ---- 3. a signal that lands on another thread
# other_tid PID: a thread of PID, not the main one, that does not block
# SIGTERM (sanitizer runtimes have threads that block everything).
other_tid() {
  local t blk
  for t in /proc/"$1"/task/*; do
    t=${t##*/}
    [ "$t" = "$1" ] && continue
    blk=$(awk '/^SigBlk:/ { print $2 }' "/proc/$1/task/$t/status" 2>/dev/null) || continue
    [ -n "$blk" ] && [ $((0x$blk & 0x4000)) -eq 0 ] && echo "$t"
  done | tail -n 1
}
oq_worker_start elsewhere --queue q3 --concurrency 4 --sql 'SELECT 1'
w=$OQ_LAST_PID
has_threads() { grep -q "started:" "$OQ_TMP/elsewhere.log" && [ -n "$(other_tid "$w")" ]; }
oq_wait_until 20 "the worker to start its threads" has_threads
tid=$(other_tid "$w")
oq_log "SIGTERM to thread $tid of worker $w (threads: $(ls /proc/"$w"/task | tr '\n' ' '))"
oq_py -c 'import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.tgkill(int(sys.argv[1]), int(sys.argv[2]), 15) == 0 else 1)' "$w" "$tid" ||
  oq_fail "tgkill($w, $tid, SIGTERM) failed"
oq_wait_exit "$w" 15
oq_check "exit code after SIGTERM to a non-main thread" "$OQ_RC" 0
oq_contains "its log" "$(cat "$OQ_TMP/elsewhere.log")" "signal: draining"
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_log "PASS"
