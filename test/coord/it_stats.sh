#!/usr/bin/env bash
# it_stats.sh: `onceq stats` against a known state.
#   alpha: 9 ready (7 at priority 0 made ready 30 s ago, 2 at priority 5),
#          5 scheduled (4 at priority 0, 1 at priority 9), 12 acked in the
#          last minute and 5 earlier (onceq_done history);
#   beta:  3 running, claimed by one worker session; 6 dead;
#   gamma: 2 dead;
#   then big: 100005 ready: counts stop at 100000 and say so.
# Checks: the exact numbers in --json (valid JSON) and in the table, the lag
# (~30 s), history rates and the scaling hints; --watch redraws in place
# under a pseudo-terminal (script), prints blocks off a terminal, one JSON
# object per line with --json, and exits 0 on SIGINT.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup stats

oq_sql "INSERT INTO onceq_sessions (id, expiry, hostname, pid, queues)
        VALUES ('00000000-0000-4000-8000-000000000001', interval '1 hour',
                'it-host', 4242, 'alpha,beta')"
oq_sql "INSERT INTO onceq_items (queue, run_at, priority)
          SELECT 'alpha', now() - interval '30 seconds', 0
          FROM generate_series(1, 7);
        INSERT INTO onceq_items (queue, run_at, priority)
          SELECT 'alpha', now() - interval '5 seconds', 5
          FROM generate_series(1, 2);
        INSERT INTO onceq_items (queue, run_at, priority)
          SELECT 'alpha', now() + interval '1 hour', 0
          FROM generate_series(1, 4);
        INSERT INTO onceq_items (queue, run_at, priority)
          VALUES ('alpha', now() + interval '2 hours', 9);
        INSERT INTO onceq_items (queue, claim, claimed_at, attempts)
          SELECT 'beta', '00000000-0000-4000-8000-000000000001', now(), 1
          FROM generate_series(1, 3);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at)
          SELECT gen_random_uuid(), q, '{}', 0, 3, 3, now()
          FROM (SELECT 'beta' AS q FROM generate_series(1, 6)
                UNION ALL SELECT 'gamma' FROM generate_series(1, 2)) d;
        INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'alpha', 1, now() - interval '20 seconds',
                 now() - interval '10 seconds'
          FROM generate_series(1, 12);
        INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'alpha', 1, now() - interval '3 minutes',
                 now() - interval '2 minutes'
          FROM generate_series(1, 5)"

# stats_json: run `onceq --json stats` (two samples 1 s apart) and print
# one "key=value" line per fact the checks below look at.
stats_json() {
  "$ONCEQ_CLI" --db "$OQ_DSN" --json stats >"$OQ_TMP/stats.json" \
    2>"$OQ_TMP/stats.log" ||
    oq_fail "onceq stats --json failed: $(cat "$OQ_TMP/stats.log")"
  oq_py - "$OQ_TMP/stats.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))          # must be valid JSON
q = {x["queue"]: x for x in doc["queues"]}
def cnt(name):
    x = q[name]
    return "%s:%d/%d/%d/%d" % (name, x["ready"], x["scheduled"],
                               x["running"], x["dead"])
out = [cnt(n) for n in sorted(q)]
out.append("queues=" + ",".join(sorted(q)))
if "big" in q:
    out.append("big_capped=%s" % q["big"]["ready_capped"])
out.append("alpha_capped=%s" % q["alpha"]["ready_capped"])
t = doc["total"]
out.append("total:%d/%d/%d/%d:%s" % (t["ready"], t["scheduled"], t["running"],
                                     t["dead"], t["ready_capped"]))
out.append("lag_ok=%s" % (28 <= q["alpha"]["lag_s"] <= 60))
out.append("beta_lag=%s" % q["beta"]["lag_s"])
out.append("history=%s" % doc["history"])
out.append("alpha_done=%s" % q["alpha"]["done_per_min"])
out.append("alpha_in=%s" % q["alpha"]["in_per_min"])
out.append("beta_dead_per_min=%s" % q["beta"]["dead_per_min"])
s = doc["sessions"]
out.append("sessions=%d" % len(s))
out.append("session0=%s/%s/%d/%d" % (s[0]["role"], s[0]["hostname"],
                                     s[0]["pid"], s[0]["claims"]))
sc = doc["scaling"]
out.append("workers=%d needed=%s" % (sc["workers"], sc["workers_needed"]))
out.append("reason=" + sc["reason"])
for h in doc["scaling_per_queue"]:
    out.append("hint_%s=%d/%s/%s" % (h["queue"], h["workers"],
                                     h["workers_needed"], h["reason"]))
print("\n".join(out))
EOF
}
line() { printf '%s\n' "$check" | grep "^$1" || true; }

# ---- --json: exact numbers ----------------------------------------------
check=$(stats_json) ||
  oq_fail "stats JSON did not parse: $(head -c 600 "$OQ_TMP/stats.json")"
oq_log "stats --json:"$'\n'"$check"
oq_check "alpha ready/sched/running/dead" "$(line alpha:)" "alpha:9/5/0/0"
oq_check "beta ready/sched/running/dead" "$(line beta:)" "beta:0/0/3/6"
oq_check "gamma ready/sched/running/dead" "$(line gamma:)" "gamma:0/0/0/2"
oq_check "queue list" "$(line queues=)" "queues=alpha,beta,gamma"
oq_check "alpha ready_capped" "$(line alpha_capped=)" "alpha_capped=False"
oq_check "totals" "$(line total:)" "total:9/5/3/8:False"
oq_check "alpha lag ~30 s" "$(line lag_ok=)" "lag_ok=True"
oq_check "beta lag (nothing ready)" "$(line beta_lag=)" "beta_lag=None"
oq_check "history seen" "$(line history=)" "history=True"
oq_check "alpha done/min (12 in the last 60 s)" "$(line alpha_done=)" \
  "alpha_done=12.0"
# arrivals: items created in the last 60 s wherever they are now:
# 9 ready (both priorities became runnable within 60 s) + 12 acked
oq_check "alpha in/min" "$(line alpha_in=)" "alpha_in=21.0"
oq_check "beta dead/min" "$(line beta_dead_per_min=)" "beta_dead_per_min=6"
oq_check "sessions" "$(line sessions=)" "sessions=1"
oq_check "the worker session" "$(line session0=)" \
  "session0=worker/it-host/4242/3"
# all queues: arrivals 21 (alpha) + 9 (beta: 3 running + 6 dead, all new)
# + 2 (gamma: dead) = 32/min; completions 12/min by 1 worker:
# 32 / 12 = 2.7 -> 3 workers
oq_check "scaling" "$(line workers=)" "workers=1 needed=3"
oq_contains "scaling reason" "$(line reason=)" \
  "all queues: arrivals 32.0/min / (12.0/min done by 1 worker(s) = 12.0/min each) = 2.7 -> 3 worker(s) needed, 1 running"
# per queue, with the workers that serve it (the session lists alpha,beta)
oq_check "alpha hint" "$(line hint_alpha=)" \
  "hint_alpha=1/2/alpha: arrivals 21.0/min / (12.0/min done by 1 worker(s) = 12.0/min each) = 1.8 -> 2 worker(s) needed, 1 running"
oq_contains "beta hint" "$(line hint_beta=)" \
  "hint_beta=1/None/beta: 1 worker(s) completed nothing in the window"
oq_contains "gamma hint" "$(line hint_gamma=)" \
  "hint_gamma=0/1/gamma: no worker serves it"

# watch_frames OUT PATTERN MIN pty|pipe CMD...: run CMD (stdout to OUT,
# stderr to OUT.log) until OUT holds MIN lines matching PATTERN (at most
# 30 s), then interrupt it once; sets WATCH_RC to its exit status. Waiting
# for frames, not a fixed time, keeps the check the same on a slow machine.
#   pty:  CMD runs on a pseudo-terminal (script -e returns its status) and
#         gets a real Ctrl-C: the byte 0x03 typed into the terminal;
#   pipe: CMD's stdout is a file; CMD alone gets one SIGINT (timeout, its
#         parent, leaves SIGINT at its default for it, where a background
#         job of this shell would start with SIGINT ignored).
watch_frames() {
  local out=$1 pat=$2 min=$3 mode=$4 n=0 deadline pid fd
  shift 4
  : >"$out"
  if [ "$mode" = pty ]; then
    rm -f "$out.in"
    mkfifo "$out.in"
    # read-write: the open never blocks, and typing into it never raises
    # SIGPIPE here, even if script has already exited
    exec {fd}<>"$out.in"
    timeout 40 script -qefc "exec $*" /dev/null <"$out.in" >"$out" \
      2>"$out.log" &
    pid=$!
  else
    timeout --preserve-status -s INT 40 "$@" >"$out" 2>"$out.log" </dev/null &
    pid=$!
  fi
  deadline=$(($(oq_now_ms) + 30000))
  while [ "$(oq_now_ms)" -lt "$deadline" ] && oq_alive "$pid"; do
    n=$(grep -c -a -- "$pat" "$out" || true)
    [ "$n" -ge "$min" ] && break
    sleep 0.1
  done
  if [ "$mode" = pty ]; then
    printf '\003' >&"$fd"
  else
    local child c
    child=$(ps -o pid= --ppid "$pid" || true)
    for c in $child; do kill -INT "$c" 2>/dev/null || true; done
  fi
  WATCH_RC=0
  wait "$pid" || WATCH_RC=$?
  [ "$mode" = pty ] && exec {fd}>&-
  return 0
}

# ---- --watch on a pseudo-terminal: redraws in place ---------------------
# (Before the 100005-item queue is added: each frame stays quick on a busy
# box.)
watch_frames "$OQ_TMP/watch_tty.out" $'\033\[2J' 3 pty \
  "'$ONCEQ_CLI' --db '$OQ_DSN' stats --watch 200ms"
oq_check "stats --watch on a terminal: exit status after Ctrl-C" "$WATCH_RC" 0
clears=$( (grep -o $'\033\[2J' "$OQ_TMP/watch_tty.out" || true) | wc -l |
  tr -d ' ')
oq_log "clear-screen sequences: $clears"
oq_check_le "clear-screen redraws (>= 2)" 2 "$clears"
oq_contains "watch frame" "$(cat -v "$OQ_TMP/watch_tty.out")" "alpha"

# ---- --watch off a terminal: successive blocks, no escapes --------------
watch_frames "$OQ_TMP/watch.out" '^QUEUE' 3 pipe \
  "$ONCEQ_CLI" --db "$OQ_DSN" stats --watch 200ms
oq_check "stats --watch (pipe) exit status on SIGINT" "$WATCH_RC" 0
blocks=$(grep -c '^QUEUE' "$OQ_TMP/watch.out" || true)
oq_check_le "blocks printed (>= 2)" 2 "$blocks"
oq_check "escape sequences off a terminal" \
  "$(grep -c $'\033' "$OQ_TMP/watch.out" || true)" 0

# ---- --watch --json: one valid object per line ---------------------------
watch_frames "$OQ_TMP/watch.json" '"queues"' 3 pipe \
  "$ONCEQ_CLI" --db "$OQ_DSN" --json stats --watch 200ms
oq_check "stats --watch --json exit status" "$WATCH_RC" 0
n=$(oq_py -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    d = json.loads(l)
    assert {x["queue"]: x for x in d["queues"]}["alpha"]["ready"] == 9
    n += 1
print(n)' "$OQ_TMP/watch.json") ||
  oq_fail "watch JSON lines invalid: $(head -c 300 "$OQ_TMP/watch.json")"
oq_check_le "JSON lines (>= 2)" 2 "$n"

# ---- capped counts: 100005 ready in one queue ----------------------------
oq_sql "INSERT INTO onceq_items (queue) SELECT 'big' FROM generate_series(1, 100005)"
check=$(stats_json) ||
  oq_fail "stats JSON did not parse: $(head -c 600 "$OQ_TMP/stats.json")"
oq_check "big (capped)" "$(line big:)" "big:100000/0/0/0"
oq_check "big ready_capped" "$(line big_capped=)" "big_capped=True"
oq_check "alpha still exact" "$(line alpha:)" "alpha:9/5/0/0"
oq_check "totals with a capped queue" "$(line total:)" "total:100009/5/3/8:True"

# ---- the table ----------------------------------------------------------
"$ONCEQ_CLI" --db "$OQ_DSN" stats --sample 0s >"$OQ_TMP/stats.txt" 2>&1 ||
  oq_fail "onceq stats failed: $(cat "$OQ_TMP/stats.txt")"
cat "$OQ_TMP/stats.txt"
row() { awk -v q="$1" '$1 == q { print $2, $3, $4, $5 }' "$OQ_TMP/stats.txt"; }
oq_check "table alpha" "$(row alpha)" "9 5 0 0"
oq_check "table beta" "$(row beta)" "0 0 3 6"
oq_check "table big" "$(row big)" "100000+ 0 0 0"
oq_check "table TOTAL" "$(row TOTAL)" "100009+ 5 3 8"
oq_check "table lines wider than 80" \
  "$(awk 'length > 80' "$OQ_TMP/stats.txt" | wc -l | tr -d ' ')" 0
oq_contains "table session row" "$(cat "$OQ_TMP/stats.txt")" "it-host"
oq_contains "table scaling line" "$(cat "$OQ_TMP/stats.txt")" "scaling: "

oq_log "PASS"
