# shellcheck shell=bash disable=SC2034,SC2016,SC2154,SC2317 # FL_* are read by the tests; inner functions run via it_wait_until
# it_fault_lib.sh: what the worker fault tests (it_outage.sh,
# it_blackhole.sh, it_lost_claim_reply.sh) share beside it_lib.sh: the
# fault proxy (oq_cutproxy, driven through its control FIFO), an --exec
# item that logs each attempt's start and end, the checks on that attempt
# log, log-line timestamps, and stopping/starting the test server.
# Sourced after it_lib.sh; not a test itself.
#
# Terms:
#  - attempt log: one line per event, appended by the item script:
#      start <label> <item id> <epoch ms>
#      end   <label> <item id> <epoch ms> ok|term
#    <label> names the worker that ran it (its --exec argument); "term" is
#    an attempt stopped by SIGTERM (the worker's fence or kill timeout).
#  - the proxy's control FIFO: see test/tools/cutproxy_main.c; each command
#    is acknowledged by a line "cutproxy: ok <command> at_ms=<epoch ms>".
#
# Environment: ONCEQ_CUTPROXY (the oq_cutproxy binary, from
# it_worker.cmake); ONCEQ_TEST_PGDATA, ONCEQ_TEST_PGBIN, ONCEQ_TEST_PGLOG,
# ONCEQ_TEST_PGOSUSER for fl_pg_ctl (see test/run.sh).

FL_PG_DOWN=0 # 1 while fl_pg_stop has the server down

# fl_log_ms LINE: the epoch ms of a worker log line (its first field,
# 2026-01-02T03:04:05.678Z).
fl_log_ms() {
  date -d "${1%% *}" +%s%3N
}

# fl_log_first_ms FILE PATTERN [AFTER_MS]: epoch ms of the first line of
# FILE matching the grep -E PATTERN at or after AFTER_MS; empty if none.
fl_log_first_ms() {
  local file=$1 pat=$2 after=${3:-0} ms
  [ -f "$file" ] || return 0
  while IFS= read -r ms; do
    if [ "$ms" -ge "$after" ]; then
      echo "$ms"
      return 0
    fi
  done < <(grep -E -- "$pat" "$file" | awk '{print $1}' |
    date -f - +%s%3N 2>/dev/null)
  return 0
}

# fl_item_script PATH SECONDS LOG: write the --exec item: it reads the
# payload, logs its start, sleeps SECONDS (interruptible: SIGTERM ends it
# at once, logged "term"), logs its end. Called as PATH LABEL ID.
fl_item_script() {
  local path=$1 secs=$2 log=$3
  cat >"$path" <<EOF
#!/bin/sh
# one attempt of an item: \$1 = the worker's label, \$2 = the item id
cat >/dev/null
echo "start \$1 \$2 \$(date +%s%3N)" >>"$log"
trap 'echo "end \$1 \$2 \$(date +%s%3N) term" >>"$log"; exit 143' TERM
sleep $secs &
wait \$!
echo "end \$1 \$2 \$(date +%s%3N) ok" >>"$log"
EOF
  chmod +x "$path"
  : >>"$log"
}

# fl_overlaps LOG: print every overlap of two attempts of one item (a
# start while another attempt of that item has not ended), and every
# attempt that never ended; prints nothing when all is well. Events of
# the same ms: ends sort before starts.
fl_overlaps() {
  awk '{t = ($1 == "end") ? 0 : 1; print $4, t, $0}' "$1" | sort -n -k1,1 -k2,2 |
    awk '{ ev = $3; lab = $4; id = $5; ms = $6
           if (ev == "start") {
             if (open[id] > 0)
               printf "overlap: %s started by %s at %s while %s (started %s) ran\n",
                      id, lab, ms, who[id], since[id]
             open[id]++; who[id] = lab; since[id] = ms
           } else if (open[id] > 0) open[id]--
         }
         END { for (id in open) if (open[id] > 0)
                 printf "never ended: %s (started by %s at %s)\n", id, who[id], since[id] }'
}

# fl_check_no_overlap LOG: fail on any overlap or unended attempt.
fl_check_no_overlap() {
  local bad
  bad=$(fl_overlaps "$1")
  if [ -n "$bad" ]; then
    it_fail "attempts of one item overlap in time (or never ended):"$'\n'"$bad"
  fi
  it_log "ok: no two attempts of one item overlap ($(grep -c '^start ' "$1") attempts)"
}

# fl_count LOG EV [LABEL]: attempt-log lines of event EV (start|end)
# (by LABEL when given).
fl_count() {
  awk -v ev="$2" -v lab="${3:-}" '$1 == ev && (lab == "" || $2 == lab)' "$1" |
    wc -l | tr -d ' '
}

# fl_max_end LOG LABEL IDS: the latest end (epoch ms) of LABEL's attempts
# of the item ids listed in file IDS; 0 when none.
fl_max_end() {
  awk -v lab="$2" 'FILENAME == ARGV[1] {want[$1] = 1; next}
       $1 == "end" && $2 == lab && ($3 in want) && $4 > m {m = $4}
       END {printf "%.0f\n", m + 0}' "$3" "$1"
}

# fl_secs_until MS EXTRA: whole seconds from now until epoch MS, plus
# EXTRA, at least 2 (a bound for it_wait_until).
fl_secs_until() {
  local s=$(( ($1 - $(it_now_ms)) / 1000 + $2 ))
  [ "$s" -ge 2 ] || s=2
  echo "$s"
}

# fl_open_attempts LOG [LABEL]: item ids with a start and no end yet.
fl_open_attempts() {
  awk -v lab="${2:-}" 'lab == "" || $2 == lab {
         if ($1 == "start") open[$3]++; else if (open[$3] > 0) open[$3]-- }
       END { for (id in open) if (open[id] > 0) print id }' "$1" | sort
}

# ---- the fault proxy -----------------------------------------------------

# fl_upstream: "HOST PORT" of the test server as the test database sees
# its connection; skips (77) unless that is TCP.
fl_upstream() {
  local a
  a=$(it_sql "SELECT coalesce(host(inet_server_addr()), '') || ' ' ||
                     coalesce(inet_server_port()::text, '')")
  case "$a" in
  " "* | *" ") echo "SKIP: the test server is not reached over TCP" >&2
    exit 77 ;;
  esac
  echo "$a"
}

# fl_proxy_start NAME [ARGS...]: start oq_cutproxy in front of the test
# server with a control FIFO, output to $IT_TMP/NAME.log; sets FL_PROXY_PID
# and FL_PROXY_PORT, and FL_PROXY_DSN (the test database through it).
fl_proxy_start() {
  local name=$1 up host port
  shift
  [ -x "${ONCEQ_CUTPROXY:-}" ] || it_fail "ONCEQ_CUTPROXY is not executable"
  up=$(fl_upstream)
  host=${up% *}
  port=${up#* }
  "$ONCEQ_CUTPROXY" --listen 127.0.0.1:0 --upstream "$host:$port" \
    --control "$IT_TMP/$name.fifo" "$@" >"$IT_TMP/$name.log" 2>&1 </dev/null &
  FL_PROXY_PID=$!
  IT_PIDS+=("$FL_PROXY_PID")
  fl_proxy_listening() { grep -q 'cutproxy: listening on' "$IT_TMP/$name.log"; }
  it_wait_until 10 "proxy $name listening" fl_proxy_listening
  FL_PROXY_PORT=$(sed -n 's/^cutproxy: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
    "$IT_TMP/$name.log" | head -n1)
  FL_PROXY_DSN="$IT_DSN host=127.0.0.1 hostaddr=127.0.0.1 port=$FL_PROXY_PORT sslmode=disable gssencmode=disable"
  it_log "proxy $name (pid $FL_PROXY_PID) on 127.0.0.1:$FL_PROXY_PORT -> $host:$port"
}

# fl_proxy_cmd NAME COMMAND: send COMMAND on the proxy's FIFO and wait for
# its acknowledgement; echoes the epoch ms at which it took effect.
fl_proxy_cmd() {
  local name=$1 cmd=$2 log n0
  log="$IT_TMP/$name.log"
  n0=$(grep -cF -- "cutproxy: ok $cmd at_ms=" "$log" || true)
  # the proxy holds its FIFO open, so this open never blocks unless the
  # proxy is gone: bounded
  timeout 5 bash -c 'printf "%s\n" "$1" >"$2"' _ "$cmd" "$IT_TMP/$name.fifo" ||
    it_fail "cannot write '$cmd' to proxy $name's FIFO"
  fl_proxy_acked() {
    [ "$(grep -cF -- "cutproxy: ok $cmd at_ms=" "$log" || true)" -gt "$n0" ]
  }
  it_wait_until 5 "proxy $name to take '$cmd'" fl_proxy_acked
  grep -F -- "cutproxy: ok $cmd at_ms=" "$log" | tail -n1 | sed 's/.*at_ms=//'
}

# fl_worker_start NAME DSN ARGS...: like it_worker_start, on DSN.
fl_worker_start() {
  local name=$1 dsn=$2
  shift 2
  "$ONCEQ_WORKER" --db "$dsn" "$@" >"$IT_TMP/$name.log" 2>&1 </dev/null &
  IT_LAST_PID=$!
  IT_PIDS+=("$IT_LAST_PID")
  it_log "started worker $name (pid $IT_LAST_PID)"
}

# fl_session_of PID: the session id a worker's pid owns now (one line per
# row; empty when none).
fl_session_of() {
  it_sql "SELECT id FROM onceq_sessions WHERE pid = $1 ORDER BY created_at"
}

# fl_free_port: a TCP port on 127.0.0.1 that nothing listens on now.
fl_free_port() {
  python3 - <<'EOF'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
EOF
}

# fl_metric_value ADDR NAME: a sample's value from a worker's /metrics
# (empty when unreachable or absent).
fl_metric_value() {
  python3 - "$1" "$2" <<'EOF' 2>/dev/null || true
import sys, urllib.request
with urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=3) as r:
    for line in r.read().decode().splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == sys.argv[2]:
            print(f[1])
            break
EOF
}

# ---- the test server ------------------------------------------------------

fl_need_pgctl() {
  if [ -z "${ONCEQ_TEST_PGDATA:-}" ] || [ -z "${ONCEQ_TEST_PGBIN:-}" ]; then
    echo "SKIP: ONCEQ_TEST_PGDATA/ONCEQ_TEST_PGBIN unset (external database?)" >&2
    exit 77
  fi
}

# fl_pg_ctl ARGS...: pg_ctl on the test server, as its OS user.
fl_pg_ctl() {
  local args=("$ONCEQ_TEST_PGBIN/pg_ctl" -D "$ONCEQ_TEST_PGDATA" "$@")
  if [ -n "${ONCEQ_TEST_PGOSUSER:-}" ]; then
    (cd / && runuser -u "$ONCEQ_TEST_PGOSUSER" -- "${args[@]}")
  else
    (cd / && "${args[@]}")
  fi
}

# fl_pg_stop: stop the server at once (-m immediate: no shutdown
# checkpoint, clients see their connections drop as in a crash).
fl_pg_stop() {
  local out
  FL_PG_DOWN=1
  out=$(fl_pg_ctl -m immediate -w -t 60 stop 2>&1) ||
    it_fail "pg_ctl stop failed: $out"
}

# fl_pg_start: start it again (its log to ONCEQ_TEST_PGLOG, so the
# postmaster does not hold the test's stdout).
fl_pg_start() {
  local out args=(-w -t 60)
  [ -n "${ONCEQ_TEST_PGLOG:-}" ] && args+=(-l "$ONCEQ_TEST_PGLOG")
  out=$(fl_pg_ctl "${args[@]}" start 2>&1) || it_fail "pg_ctl start failed: $out"
  FL_PG_DOWN=0
}

# fl_pg_up_again: the EXIT trap's part: start the server if this test left
# it down (errors ignored: the trap goes on to it_cleanup).
fl_pg_up_again() {
  local args=(-w -t 60)
  [ "$FL_PG_DOWN" = 1 ] || return 0
  FL_PG_DOWN=0
  [ -n "${ONCEQ_TEST_PGLOG:-}" ] && args+=(-l "$ONCEQ_TEST_PGLOG")
  echo "[$IT_NAME] starting the test server again (left down)" >&2
  fl_pg_ctl "${args[@]}" start >/dev/null 2>&1 || true
}

# fl_install_pg_trap: on any exit, start the server again if this test
# left it down, then run it_cleanup (which needs it, and reads the exit
# status from $?). Call after it_setup. errexit goes off first: under it,
# the `(exit $fl_rc)` that hands the status on would end the trap before
# it_cleanup stopped the workers.
fl_install_pg_trap() {
  trap 'fl_rc=$?; set +e; fl_pg_up_again; (exit $fl_rc); it_cleanup' EXIT
}
