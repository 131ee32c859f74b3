#!/usr/bin/env bash
# it_fence_grace.sh: at a fence an --exec child keeps its --kill-grace
# (issue 20). The fence margin follows the grace (docs/worker.md "Session
# lifecycle and recovery"): with --kill-grace 1500ms, heartbeat 1s and
# expiry 6s the margin is 2000 ms, so a child that ignores SIGTERM gets
# SIGKILL about 1.5 s after it (before: a fixed 1 s margin, minus the
# 400 ms kill-before-expiry, left 0.6 s whatever --kill-grace said).
# The fence comes from a lock: a transaction holds the session row
# (FOR NO KEY UPDATE, which blocks the heartbeat's UPDATE but not the
# claims' FOR KEY SHARE lock of the session row) while the child runs.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup fence_grace
T=$OQ_TMP

# The child: the first run records when SIGTERM came, ignores it and
# stamps the time every 50 ms until the SIGKILL; a rerun (the item comes
# back once the session is lost) just succeeds.
cat >"$T/child.sh" <<CHILD
#!/bin/sh
cat >/dev/null
[ -e "$T/ran" ] && exit 0
: >"$T/ran"
trap 'date +%s%3N >"$T/term"; trap "" TERM' TERM
date +%s%3N >"$T/started"
while :; do
  date +%s%3N >"$T/last.tmp" && mv "$T/last.tmp" "$T/last"
  sleep 0.05
done
CHILD
chmod +x "$T/child.sh"

oq_sql "INSERT INTO onceq_items (queue, payload) VALUES ('fg', '{}')" >/dev/null
oq_worker_start w --queue fg --concurrency 1 --heartbeat-interval 1s \
  --session-expiry 6s --kill-grace 1500ms --poll-interval 200ms \
  --exec "$T/child.sh"
w=$OQ_LAST_PID
started() { [ -s "$T/started" ]; }
oq_wait_until 15 "the child to start" started
sid=$(oq_sql "SELECT id FROM onceq_sessions WHERE pid = $w")
oq_log "session $sid; locking its row for 9 s"
"$OQ_PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$OQ_DSN" -c "BEGIN" \
  -c "SELECT 1 FROM onceq_sessions WHERE id = '$sid' FOR NO KEY UPDATE" \
  -c "SELECT pg_sleep(9)" -c "COMMIT" >"$T/lock.log" 2>&1 &
OQ_PIDS+=("$!")
termed() { [ -s "$T/term" ]; }
oq_wait_until 15 "the fence's SIGTERM" termed
# the SIGKILL comes at the latest when the session expires (6 s after the
# last beat that landed, so at most 2 s after the fence)
sleep 3
term=$(cat "$T/term")
last=$(cat "$T/last")
gap=$((last - term))
oq_log "SIGTERM at $term, last stamp at $last: $gap ms of grace"
kill -0 "$w" 2>/dev/null || oq_fail "the worker died: $(tail -5 "$T/w.log")"
# (the stamps lag a loaded machine a little; the old margin gave ~600 ms)
[ "$gap" -ge 1000 ] ||
  oq_fail "the child got $gap ms between SIGTERM and SIGKILL at the fence, want about 1500 (--kill-grace)"
[ "$gap" -le 2200 ] ||
  oq_fail "the child got $gap ms between SIGTERM and SIGKILL, more than --kill-grace 1500ms allows"
oq_stop "$w" 20
oq_log "PASS"
