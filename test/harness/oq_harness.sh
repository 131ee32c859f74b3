# shellcheck shell=bash disable=SC2016,SC2034,SC2317 # OQ_*: read by the tests; inner functions run via oq_wait_until
# oq_harness.sh: the one shell harness of every shell test (test/*/*.sh that
# ctest runs); sourced first, not a test itself. docs/testing.md says how
# to run one test; this header says what a test script gets.
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
#   oq_setup NAME [--url]
#
# Terms:
#  - test database: a private database per test run, oq_<NAME>_<pid>, made
#    by oq_setup, migrated with `onceq migrate`, with
#    default_transaction_isolation = ONCEQ_TEST_ISOLATION so every
#    connection a daemon or the CLI makes runs under the pass's isolation;
#    dropped on exit unless a check failed (then kept for a post-mortem);
#  - child: a process the test started (oq_start, oq_worker_start,
#    oq_coordinator, oq_proxy_start, oq_pgbouncer_start, or `cmd & OQ_PIDS+=($!)`); the EXIT
#    trap stops every one of them by pid (SIGCONT, SIGTERM, SIGKILL after
#    5 s), never by name;
#  - scratch folder OQ_TMP: child logs (NAME.log), scripts, outputs; on a
#    failure the tail of every *.log and *.err in it is printed and the
#    folder is copied to $ONCEQ_TEST_BUILD/test-logs/.
#
# Environment (ctest sets the first four, see test/cmake/oq_script_test.cmake;
# ./test/run.sh the rest):
#   ONCEQ_TEST_NAME       the ctest name (for the skip message)
#   ONCEQ_CLI             the onceq binary (required)
#   ONCEQ_WORKER          onceq-worker (oq_worker_start needs it)
#   ONCEQ_CUTPROXY        the fault proxy oq_cutproxy (oq_proxy_start)
#   ONCEQ_TEST_DSN        admin conninfo; without it the test skips (77)
#   ONCEQ_TEST_ISOLATION  "read committed" (default) or "serializable"
#   ONCEQ_TEST_PGBIN, ONCEQ_TEST_PGDATA, ONCEQ_TEST_PGLOG,
#   ONCEQ_TEST_PGOSUSER   psql, and pg_ctl for oq_pg_stop/oq_pg_start
#   OQ_KEEP               set: keep the scratch folder and the database
#   ONCEQ_TEST_ROLE       "worker": the workers run as the least-privilege
#                         worker role (oq_role_setup); unset: as the admin
#
# Every wait is bounded in count and time; a failed check prints both
# sides, the tail of every child log, and exits 1.

set -euo pipefail

OQ_NAME=""       # the test's short name (oq_setup)
OQ_TMP=""        # scratch folder
OQ_DB=""         # the test database's name
OQ_DSN=""        # its conninfo
OQ_WORKER_DSN="" # what oq_worker_start connects with: OQ_DSN, or OQ_DSN as
                 # the least-privilege worker role (ONCEQ_TEST_ROLE=worker)
OQ_ADMIN_DSN=""  # the admin conninfo (ONCEQ_TEST_DSN)
OQ_ISOLATION=""  # the pass's isolation
OQ_PSQL=""       # the psql binary
OQ_PIDS=()       # every child we must stop
OQ_EXTRA_DBS=()  # more databases a test made; dropped like OQ_DB
OQ_KEEP_DB=0     # 1: a check failed, keep the database
OQ_RC=0          # exit status of the last oq_wait_exit/oq_stop/oq_run_cli
OQ_LAST_PID=""   # the child started last
OQ_PG_DOWN=0     # 1 while oq_pg_stop has the server down

# ---- logging and checks ----------------------------------------------------

# oq_log MSG...: "[name hh:mm:ss.mmm] MSG". The clock is bash's
# EPOCHREALTIME, no fork per line: on a loaded machine a `date` per check
# ate into the timing windows of the tests.
oq_log() {
  local t=${EPOCHREALTIME/,/.}
  printf '[%s %(%T)T.%s] %s\n' "$OQ_NAME" "${t%.*}" "${t:${#t}-6:3}" "$*"
}

# oq_now_ms: epoch milliseconds.
oq_now_ms() {
  local t=${EPOCHREALTIME/,/.}
  echo "${t%.*}${t:${#t}-6:3}"
}

# oq_metric NAME VALUE UNIT [NOTE]: one parseable line, like the C harness's
# oqt_metric: "METRIC name value unit (isolation: ...)".
oq_metric() {
  printf 'METRIC %s %s %s (isolation: %s)%s\n' "$1" "$2" "$3" \
    "${OQ_ISOLATION:-read committed}" "${4:+ $4}"
}

# oq_dump_logs: the tail of every child log and error file, for a failure.
oq_dump_logs() {
  local f
  [ -n "$OQ_TMP" ] && [ -d "$OQ_TMP" ] || return 0
  for f in "$OQ_TMP"/*.log "$OQ_TMP"/*.err; do
    [ -s "$f" ] || continue
    echo "----- ${f##*/} (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2 || true
  done
}

oq_fail() {
  echo "FAIL [$OQ_NAME]: $*" >&2
  OQ_KEEP_DB=1
  oq_dump_logs
  exit 1
}

# oq_check WHAT GOT WANT: equality, printing both sides.
oq_check() {
  [ "$2" = "$3" ] || oq_fail "$1: got '$2', want '$3'"
  oq_log "ok: $1 = $3"
}

# oq_check_le WHAT A B: integers, A <= B.
oq_check_le() {
  [ "$2" -le "$3" ] || oq_fail "$1: $2 <= $3 does not hold"
  oq_log "ok: $1: $2 <= $3"
}

# oq_contains WHAT HAYSTACK NEEDLE
oq_contains() {
  case "$2" in
  *"$3"*) oq_log "ok: $1 contains '$3'" ;;
  *) oq_fail "$1: '$2' should contain '$3'" ;;
  esac
}

# oq_match WHAT TEXT REGEX: TEXT matches the extended REGEX.
oq_match() {
  grep -Eq -- "$3" <<<"$2" || oq_fail "$1: '$2' does not match /$3/"
  oq_log "ok: $1 matches /$3/"
}

# oq_wait_until SECONDS WHAT CMD...: run CMD every 100 ms until it
# succeeds; fail after SECONDS.
oq_wait_until() {
  local secs=$1 what=$2 n=0
  shift 2
  local deadline=$(($(oq_now_ms) + secs * 1000))
  while [ $n -lt $((secs * 20 + 20)) ]; do
    if "$@"; then return 0; fi
    [ "$(oq_now_ms)" -lt "$deadline" ] || break
    sleep 0.1
    n=$((n + 1))
  done
  oq_fail "timed out after ${secs}s waiting for: $what"
}

# ---- SQL ---------------------------------------------------------------

# oq_psql_retry PSQL DSN [SQL]: run SQL (stdin when no SQL is given), tuples
# only and unaligned, retrying a restart error (SQLSTATE 40001/40P01, from
# PostgreSQL or CockroachDB) up to 10 times: under SERIALIZABLE even a
# test's own read can be chosen as a serialization victim while daemons
# run. Output and errors land in OQ_PSQL_OUT (not printed); returns psql's
# exit code. Server notices are off, so they never mix into a value a test
# compares.
oq_psql_retry() {
  local psql=$1 dsn=$2 input="" rc=0 _
  local opts=(-X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$dsn")
  if [ $# -lt 3 ]; then input=$(cat); fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    rc=0
    if [ $# -ge 3 ]; then
      OQ_PSQL_OUT=$(PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" \
        "$psql" "${opts[@]}" -c "$3" 2>&1) || rc=$?
    else
      OQ_PSQL_OUT=$(PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" \
        "$psql" "${opts[@]}" 2>&1 <<<"$input") || rc=$?
    fi
    [ $rc -ne 0 ] || break
    case "$OQ_PSQL_OUT" in
    *"ERROR:  40001"* | *"ERROR:  40P01"*) sleep 0.05 ;;
    *) break ;;
    esac
  done
  return $rc
}

# oq_sql [SQL]: run SQL (argument, or stdin) in the test database; prints
# unaligned tuples-only output; fails the test on error. A -c string is one
# transaction; a stdin script is retried whole, so keep it to reads and
# temp tables.
oq_sql() {
  local rc=0
  oq_psql_retry "$OQ_PSQL" "$OQ_DSN" "$@" || rc=$?
  [ $rc -eq 0 ] || oq_fail "SQL failed (exit $rc): ${1:-(stdin)}: $OQ_PSQL_OUT"
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

# oq_q SQL: like oq_sql, but on the database ONCEQ_DATABASE_URL names now
# (a test may point it at another role, as `onceq` sees it) and it never
# fails the test: psql's errors go to stderr and its status is returned.
oq_q() {
  local rc=0
  oq_psql_retry "$OQ_PSQL" "${ONCEQ_DATABASE_URL:-$OQ_DSN}" "$1" || rc=$?
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$OQ_PSQL_OUT" >&2
    return $rc
  fi
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

# oq_sql_is SQL WANT: does SQL print WANT now? (for oq_wait_until)
oq_sql_is() { [ "$(oq_sql "$1")" = "$2" ]; }

# oq_admin_sql SQL: run SQL on the admin database.
oq_admin_sql() {
  "$OQ_PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$OQ_ADMIN_DSN" \
    -c "SET client_min_messages = warning" -c "$1"
}

# oq_new_db NAME MIGRATE(0|1): create database NAME (dropped first if it
# exists) with the isolation of this pass; echo its conninfo.
oq_new_db() {
  local name=$1 migrate=$2 dsn out
  oq_admin_sql "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1
  oq_admin_sql "CREATE DATABASE $name" >/dev/null
  oq_admin_sql "ALTER DATABASE $name SET default_transaction_isolation = '$OQ_ISOLATION'" >/dev/null
  dsn="$OQ_ADMIN_DSN dbname=$name"
  if [ "$migrate" = 1 ]; then
    if ! out=$("$ONCEQ_CLI" --db "$dsn" migrate 2>&1); then
      echo "onceq migrate failed: $out" >&2
      return 1
    fi
  fi
  echo "$dsn"
}

# oq_snapshot: one line that changes when any onceq table changes.
oq_snapshot() {
  oq_sql "SELECT (SELECT count(*) || ':' || coalesce(md5(string_agg(
              id::text || queue || payload::text || attempts || run_at::text
              || coalesce(claim::text, ''), ',' ORDER BY id)), '')
            FROM onceq_items) || '|' ||
         (SELECT count(*) || ':' || coalesce(md5(string_agg(id::text, ','
              ORDER BY id)), '') FROM onceq_dead) || '|' ||
         (SELECT count(*) FROM onceq_done) || '|' ||
         (SELECT count(*) FROM onceq_sessions)"
}

# oq_ledger_exact N: table ledger has exactly N rows, N distinct item ids,
# and onceq_items is empty (the exactly-once check of the drain tests).
oq_ledger_exact() {
  local n=$1
  oq_check "ledger rows" "$(oq_sql 'SELECT count(*) FROM ledger')" "$n"
  oq_check "distinct ledger item ids" \
    "$(oq_sql 'SELECT count(DISTINCT item_id) FROM ledger')" "$n"
  oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
}

# oq_all_done: no item is left in onceq_items (for oq_wait_until).
oq_all_done() { [ "$(oq_sql 'SELECT count(*) FROM onceq_items')" = 0 ]; }

# oq_session_count_for_pid PID: how many onceq_sessions rows PID owns.
oq_session_count_for_pid() {
  oq_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $1"
}

# oq_session_of PID: the session ids PID owns now (one a line, oldest first).
oq_session_of() {
  oq_sql "SELECT id FROM onceq_sessions WHERE pid = $1 ORDER BY created_at"
}

# oq_leader_pid: the pid of the session holding the coordinator lease, or
# "" when nobody holds it.
oq_leader_pid() {
  oq_sql "SELECT s.pid FROM onceq_leases l JOIN onceq_sessions s
          ON s.id = l.session_id WHERE l.name = 'coordinator'"
}

oq_leader_is() { [ "$(oq_leader_pid)" = "$1" ]; }

# ---- JSON (python3's standard library) -----------------------------------

# oq_python: the path of a python3. Start a Python child with
# `oq_start NAME "$(oq_python)" ...`, so the recorded pid is python's own
# (a shell function in the background is a subshell whose python would
# outlive the SIGTERM at cleanup).
oq_python() {
  [ -n "${OQ_PY:-}" ] || OQ_PY=$(command -v python3 2>/dev/null || echo /usr/bin/python3)
  echo "$OQ_PY"
}

# oq_py ARGS...: run python3 in the foreground.
oq_py() {
  [ -n "${OQ_PY:-}" ] || oq_python >/dev/null
  "$OQ_PY" "$@"
}

# oq_json_ok WHAT FILE [lines]: FILE holds valid JSON (one document, or
# JSON lines with "lines").
oq_json_ok() {
  local what=$1 file=$2 mode=${3:-doc}
  oq_py - "$file" "$mode" <<'EOF' || oq_fail "$what: not valid JSON: $(head -c 400 "$file")"
import json, sys
text = open(sys.argv[1]).read()
if sys.argv[2] == "lines":
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines, "no JSON lines"
    for l in lines:
        json.loads(l)
else:
    json.loads(text)
EOF
  oq_log "ok: $what is valid JSON"
}

# oq_jget FILE EXPR: the Python expression EXPR on the JSON document in FILE
# (bound to d), printed.
oq_jget() {
  oq_py -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- processes -------------------------------------------------------------

# oq_alive PID: a live process (not a zombie).
oq_alive() {
  local st
  [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] || return 1
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# oq_start NAME CMD...: start CMD in the background, stdout+stderr to
# $OQ_TMP/NAME.log; sets OQ_LAST_PID.
oq_start() {
  local name=$1
  shift
  "$@" >"$OQ_TMP/$name.log" 2>&1 </dev/null &
  OQ_LAST_PID=$!
  OQ_PIDS+=("$OQ_LAST_PID")
  oq_log "started $name (pid $OQ_LAST_PID)"
}

# oq_worker_start NAME ARGS...: onceq-worker --db <test db> ARGS (as the
# worker role under ONCEQ_TEST_ROLE=worker: OQ_WORKER_DSN).
oq_worker_start() {
  local name=$1
  shift
  oq_worker_start_on "$name" "$OQ_WORKER_DSN" "$@"
}

# oq_worker_start_on NAME DSN ARGS...: onceq-worker --db DSN ARGS (a DSN
# through the fault proxy, or another role's).
oq_worker_start_on() {
  local name=$1 dsn=$2
  shift 2
  [ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"
  oq_start "$name" "$ONCEQ_WORKER" --db "$dsn" "$@"
}

# oq_coordinator NAME ARGS...: `onceq coordinator` on the test database.
oq_coordinator() {
  local name=$1
  shift
  oq_start "$name" "$ONCEQ_CLI" --db "$OQ_DSN" coordinator "$@"
}

# oq_run_cli OUT ERR ARGS...: run onceq ARGS, stdout to file OUT, stderr to
# file ERR; sets OQ_RC. Never fails by itself.
oq_run_cli() {
  local out=$1 err=$2
  shift 2
  OQ_RC=0
  "$ONCEQ_CLI" "$@" >"$out" 2>"$err" || OQ_RC=$?
}

# oq_forget PID...: drop PIDs from OQ_PIDS once they are known to be gone,
# so the EXIT trap never signals a reused pid.
oq_forget() {
  local keep=() p q drop
  for p in "${OQ_PIDS[@]}"; do
    drop=0
    for q in "$@"; do [ "$p" = "$q" ] && drop=1; done
    [ $drop = 1 ] || keep+=("$p")
  done
  OQ_PIDS=("${keep[@]}")
}

# oq_wait_exit PID SECONDS: wait for our child PID to exit, at most SECONDS;
# sets OQ_RC to its exit status (fails the test when it does not exit).
oq_wait_exit() {
  local pid=$1 secs=$2 n=0
  while oq_alive "$pid" && [ $n -lt $((secs * 20)) ]; do
    sleep 0.05
    n=$((n + 1))
  done
  if oq_alive "$pid"; then
    oq_fail "process $pid did not exit within ${secs}s"
  fi
  OQ_RC=0
  wait "$pid" 2>/dev/null || OQ_RC=$?
  oq_forget "$pid"
}

# oq_stop PID [SECONDS]: SIGTERM, wait up to SECONDS (10) for the exit;
# sets OQ_RC.
oq_stop() {
  local pid=$1 secs=${2:-10}
  kill -TERM "$pid" 2>/dev/null || true
  oq_wait_exit "$pid" "$secs"
}

# oq_stop_children PID...: SIGCONT and SIGTERM each live PID (a stopped
# child cannot act on SIGTERM), give each up to 5 s, then SIGKILL what is
# left, saying so on stderr.
oq_stop_children() {
  local pid n
  for pid in "$@"; do
    if oq_alive "$pid"; then
      kill -CONT "$pid" 2>/dev/null
      kill -TERM "$pid" 2>/dev/null
    fi
  done
  for pid in "$@"; do
    n=0
    while oq_alive "$pid" && [ $n -lt 100 ]; do
      sleep 0.05
      n=$((n + 1))
    done
    if oq_alive "$pid"; then
      echo "[$OQ_NAME] pid $pid ignored SIGTERM for 5 s; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  return 0
}

# oq_free_port: a TCP port on 127.0.0.1 that nothing listens on now.
oq_free_port() {
  oq_py - <<'EOF'
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

# oq_metric_value ADDR NAME: a sample's value from a daemon's /metrics
# (empty when unreachable or absent).
oq_metric_value() {
  oq_py - "$1" "$2" <<'EOF' 2>/dev/null || true
import sys, urllib.request
with urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=3) as r:
    for line in r.read().decode().splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == sys.argv[2]:
            print(f[1])
            break
EOF
}

# oq_log_ms LINE: the epoch ms of a daemon log line (its first field,
# 2026-01-02T03:04:05.678Z).
oq_log_ms() { date -d "${1%% *}" +%s%3N; }

# oq_log_first_ms FILE PATTERN [AFTER_MS]: epoch ms of the first line of
# FILE matching the grep -E PATTERN at or after AFTER_MS; empty if none.
oq_log_first_ms() {
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

# oq_secs_until MS EXTRA: whole seconds from now until epoch MS, plus
# EXTRA, at least 2 (a bound for oq_wait_until).
oq_secs_until() {
  local s=$((($1 - $(oq_now_ms)) / 1000 + $2))
  [ "$s" -ge 2 ] || s=2
  echo "$s"
}

# ---- the attempt log of the fault tests -----------------------------------
# One line per event, appended by the --exec item of oq_attempt_script:
#   start <label> <item id> <epoch ms>
#   end   <label> <item id> <epoch ms> ok|term
# <label> names the worker that ran it (its --exec argument); "term" is an
# attempt stopped by SIGTERM (the worker's fence or kill timeout).

# oq_attempt_script PATH SECONDS LOG: write the --exec item: it reads the
# payload, logs its start, sleeps SECONDS (SIGTERM ends it at once, logged
# "term"), logs its end. Called as PATH LABEL ID.
oq_attempt_script() {
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

# oq_attempt_overlaps LOG: every overlap of two attempts of one item (a
# start while another attempt of that item has not ended), and every
# attempt that never ended; nothing when all is well. Events of the same
# ms: ends sort before starts.
oq_attempt_overlaps() {
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

# oq_check_no_overlap LOG: fail on any overlap or unended attempt.
oq_check_no_overlap() {
  local bad
  bad=$(oq_attempt_overlaps "$1")
  [ -z "$bad" ] ||
    oq_fail "attempts of one item overlap in time (or never ended):"$'\n'"$bad"
  oq_log "ok: no two attempts of one item overlap ($(grep -c '^start ' "$1") attempts)"
}

# oq_attempt_count LOG EV [LABEL]: lines of event EV (start|end), of
# LABEL's attempts when given.
oq_attempt_count() {
  awk -v ev="$2" -v lab="${3:-}" '$1 == ev && (lab == "" || $2 == lab)' "$1" |
    wc -l | tr -d ' '
}

# oq_attempt_max_end LOG LABEL IDS: the latest end (epoch ms) of LABEL's
# attempts of the item ids listed in file IDS; 0 when none.
oq_attempt_max_end() {
  awk -v lab="$2" 'FILENAME == ARGV[1] {want[$1] = 1; next}
       $1 == "end" && $2 == lab && ($3 in want) && $4 > m {m = $4}
       END {printf "%.0f\n", m + 0}' "$3" "$1"
}

# oq_attempt_open LOG [LABEL]: item ids with a start and no end yet.
oq_attempt_open() {
  awk -v lab="${2:-}" 'lab == "" || $2 == lab {
         if ($1 == "start") open[$3]++; else if (open[$3] > 0) open[$3]-- }
       END { for (id in open) if (open[id] > 0) print id }' "$1" | sort
}

# ---- the fault proxy (test/tools/cutproxy_main.c) --------------------------
# Driven through its control FIFO; each command is acknowledged by a line
# "cutproxy: ok <command> at_ms=<epoch ms>" in its log.

# oq_upstream: "HOST PORT" of the test server as the test database sees
# its connection; skips (77) unless that is TCP.
oq_upstream() {
  local a
  a=$(oq_sql "SELECT coalesce(host(inet_server_addr()), '') || ' ' ||
                     coalesce(inet_server_port()::text, '')")
  case "$a" in
  " "* | *" ")
    echo "SKIP: the test server is not reached over TCP" >&2
    exit 77
    ;;
  esac
  echo "$a"
}

# oq_proxy_start NAME [ARGS...]: start oq_cutproxy in front of the test
# server with a control FIFO, output to $OQ_TMP/NAME.log; sets
# OQ_PROXY_PID, OQ_PROXY_PORT and OQ_PROXY_DSN (the test database through
# it).
oq_proxy_start() {
  local name=$1 up host port
  shift
  [ -x "${ONCEQ_CUTPROXY:-}" ] || oq_fail "ONCEQ_CUTPROXY is not executable"
  up=$(oq_upstream)
  host=${up% *}
  port=${up#* }
  oq_start "$name" "$ONCEQ_CUTPROXY" --listen 127.0.0.1:0 \
    --upstream "$host:$port" --control "$OQ_TMP/$name.fifo" "$@"
  OQ_PROXY_PID=$OQ_LAST_PID
  oq_proxy_listening() { grep -q 'cutproxy: listening on' "$OQ_TMP/$name.log"; }
  oq_wait_until 10 "proxy $name listening" oq_proxy_listening
  OQ_PROXY_PORT=$(sed -n 's/^cutproxy: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
    "$OQ_TMP/$name.log" | head -n1)
  OQ_PROXY_DSN="$OQ_WORKER_DSN host=127.0.0.1 hostaddr=127.0.0.1 port=$OQ_PROXY_PORT sslmode=disable gssencmode=disable"
  oq_log "proxy $name (pid $OQ_PROXY_PID) on 127.0.0.1:$OQ_PROXY_PORT -> $host:$port"
}

# oq_proxy_cmd NAME COMMAND: send COMMAND on the proxy's FIFO and wait for
# its acknowledgement; echoes the epoch ms at which it took effect.
oq_proxy_cmd() {
  local name=$1 cmd=$2 log n0
  log="$OQ_TMP/$name.log"
  n0=$(grep -cF -- "cutproxy: ok $cmd at_ms=" "$log" || true)
  # the proxy holds its FIFO open, so this open never blocks unless the
  # proxy is gone: bounded
  timeout 5 bash -c 'printf "%s\n" "$1" >"$2"' _ "$cmd" "$OQ_TMP/$name.fifo" ||
    oq_fail "cannot write '$cmd' to proxy $name's FIFO"
  oq_proxy_acked() {
    [ "$(grep -cF -- "cutproxy: ok $cmd at_ms=" "$log" || true)" -gt "$n0" ]
  }
  oq_wait_until 5 "proxy $name to take '$cmd'" oq_proxy_acked
  grep -F -- "cutproxy: ok $cmd at_ms=" "$log" | tail -n1 | sed 's/.*at_ms=//'
}

# ---- pgbouncer (the Debian package) -----------------------------------------
# A real transaction- or session-pooling pgbouncer in front of the test
# server, on 127.0.0.1 and a free port, with a small server pool so that
# more clients than server connections really share them. It runs in the
# foreground (its log in $OQ_TMP/NAME.log), stopped by pid like any child.

# oq_pgbouncer_start NAME MODE [POOL_SIZE]: start pgbouncer with
# pool_mode=MODE (transaction|session) and default_pool_size=POOL_SIZE (2);
# sets OQ_PGB_PID, OQ_PGB_PORT and OQ_PGB_DSN (the test database through
# it). Skips (77) when pgbouncer is not installed. Called again with the
# same NAME (after oq_pgbouncer_stop), it starts on the same port.
# Another server (a private one, oq_pgprivate.sh): set OQ_PGB_UPSTREAM
# ("HOST PORT"), OQ_PGB_USER (the role the clients log in as) and
# OQ_PGB_BASE (the conninfo OQ_PGB_DSN is made from, instead of OQ_DSN).
oq_pgbouncer_start() {
  local name=$1 mode=$2 pool=${3:-2} bin up host port user conf
  bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
  if [ ! -x "$bin" ]; then
    echo "SKIP: pgbouncer is not installed (Debian package pgbouncer)" >&2
    exit 77
  fi
  up=${OQ_PGB_UPSTREAM:-$(oq_upstream)}
  host=${up% *}
  port=${up#* }
  conf="$OQ_TMP/$name.ini"
  if [ ! -f "$conf" ]; then
    OQ_PGB_PORT=$(oq_free_port)
    user=${OQ_PGB_USER:-$(oq_sql "SELECT current_user")}
    # trust between the test and pgbouncer; pgbouncer logs in to the
    # server as the test's role (trust on 127.0.0.1, see test/run.sh)
    printf '"%s" ""\n' "$user" >"$OQ_TMP/$name.users"
    {
      echo "[databases]"
      echo "* = host=$host port=$port"
      echo "[pgbouncer]"
      echo "listen_addr = 127.0.0.1"
      echo "listen_port = $OQ_PGB_PORT"
      echo "unix_socket_dir ="
      echo "auth_type = trust"
      echo "auth_file = $OQ_TMP/$name.users"
      echo "pool_mode = $mode"
      echo "default_pool_size = $pool"
      echo "max_db_connections = $pool"
      echo "reserve_pool_size = 0"
      echo "max_client_conn = 200"
      echo "server_login_retry = 1"
      echo "log_connections = 0"
      echo "log_disconnections = 0"
    } >"$conf"
    chmod 644 "$conf" "$OQ_TMP/$name.users"
  fi
  # pgbouncer refuses to run as root: run it as the server's OS user
  if [ "$(id -u)" = 0 ]; then
    oq_start "$name" "$bin" -u "${ONCEQ_TEST_PGOSUSER:-postgres}" "$conf"
  else
    oq_start "$name" "$bin" "$conf"
  fi
  OQ_PGB_PID=$OQ_LAST_PID
  OQ_PGB_DSN="${OQ_PGB_BASE:-$OQ_DSN} host=127.0.0.1 hostaddr=127.0.0.1 port=$OQ_PGB_PORT sslmode=disable gssencmode=disable"
  oq_pgb_up() { "$OQ_PSQL" -X -q -At -d "$OQ_PGB_DSN" -c 'SELECT 1' >/dev/null 2>&1; }
  oq_wait_until 15 "pgbouncer $name accepting connections" oq_pgb_up
  oq_log "pgbouncer $name (pid $OQ_PGB_PID, pool_mode=$mode, default_pool_size=$pool) on 127.0.0.1:$OQ_PGB_PORT -> $host:$port"
}

# oq_pgbouncer_stop [PID]: stop pgbouncer (OQ_PGB_PID) at once (SIGTERM:
# every client and server connection drops) and wait for it.
oq_pgbouncer_stop() {
  local pid=${1:-$OQ_PGB_PID}
  kill -TERM "$pid" 2>/dev/null || true
  oq_wait_exit "$pid" 10
}

# ---- the test server ---------------------------------------------------------
# The EXIT trap starts it again if a test left it down.

# oq_need_pgctl: skip (77) unless the harness server can be restarted.
oq_need_pgctl() {
  if [ -z "${ONCEQ_TEST_PGDATA:-}" ] || [ -z "${ONCEQ_TEST_PGBIN:-}" ]; then
    echo "SKIP: ONCEQ_TEST_PGDATA/ONCEQ_TEST_PGBIN unset (external database?)" >&2
    exit 77
  fi
}

# oq_pg_ctl ARGS...: pg_ctl on the test server, as its OS user.
oq_pg_ctl() {
  local args=("$ONCEQ_TEST_PGBIN/pg_ctl" -D "$ONCEQ_TEST_PGDATA" "$@")
  if [ -n "${ONCEQ_TEST_PGOSUSER:-}" ]; then
    (cd / && runuser -u "$ONCEQ_TEST_PGOSUSER" -- "${args[@]}")
  else
    (cd / && "${args[@]}")
  fi
}

# oq_pg_stop: stop the server at once (-m immediate: no shutdown
# checkpoint; clients see their connections drop as in a crash).
oq_pg_stop() {
  local out
  OQ_PG_DOWN=1
  out=$(oq_pg_ctl -m immediate -w -t 60 stop 2>&1) ||
    oq_fail "pg_ctl stop failed: $out"
}

# oq_pg_start: start it again, its log to ONCEQ_TEST_PGLOG (else the
# postmaster would hold the test's stdout, and ctest would wait for it).
oq_pg_start() {
  local out args=(-w -t 60)
  [ -n "${ONCEQ_TEST_PGLOG:-}" ] && args+=(-l "$ONCEQ_TEST_PGLOG")
  out=$(oq_pg_ctl "${args[@]}" start 2>&1) || oq_fail "pg_ctl start failed: $out"
  OQ_PG_DOWN=0
}

# ---- set-up and clean-up ------------------------------------------------------

# oq_cleanup: the EXIT trap: start the server if we left it down, stop
# every child by pid, keep or drop the database, keep or remove OQ_TMP.
oq_cleanup() {
  local rc=$? db
  trap '' INT TERM
  set +e
  if [ "$OQ_PG_DOWN" = 1 ]; then
    OQ_PG_DOWN=0
    echo "[$OQ_NAME] starting the test server again (left down)" >&2
    local args=(-w -t 60)
    [ -n "${ONCEQ_TEST_PGLOG:-}" ] && args+=(-l "$ONCEQ_TEST_PGLOG")
    oq_pg_ctl "${args[@]}" start >/dev/null 2>&1
  fi
  oq_stop_children "${OQ_PIDS[@]}"
  if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $OQ_KEEP_DB -eq 0 ]; then
    oq_dump_logs
    OQ_KEEP_DB=1
  fi
  [ -n "${OQ_KEEP:-}" ] && OQ_KEEP_DB=1
  if [ -n "$OQ_DB" ]; then
    if [ $OQ_KEEP_DB -eq 0 ]; then
      for db in "$OQ_DB" "${OQ_EXTRA_DBS[@]}"; do
        oq_admin_sql "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
      done
    else
      echo "[$OQ_NAME] kept database $OQ_DB for a post-mortem" >&2
    fi
  fi
  if [ -n "$OQ_TMP" ]; then
    if [ $OQ_KEEP_DB -eq 1 ] && [ -n "${ONCEQ_TEST_BUILD:-}" ]; then
      mkdir -p "$ONCEQ_TEST_BUILD/test-logs" 2>/dev/null &&
        cp -r "$OQ_TMP" "$ONCEQ_TEST_BUILD/test-logs/${OQ_DB:-$OQ_NAME}" 2>/dev/null
    fi
    if [ -n "${OQ_KEEP:-}" ]; then
      echo "[$OQ_NAME] kept $OQ_TMP (OQ_KEEP)" >&2
    else
      rm -rf "$OQ_TMP"
    fi
  fi
  exit "$rc"
}

# oq_skip_no_dsn: exit 77 with the why and the way, on stderr. ctest hides
# a skipped test's output, so its CTestCustom pre-test step says the same
# once per run (test/cmake/oq_script_test.cmake).
oq_skip_no_dsn() {
  local t=${ONCEQ_TEST_NAME:-NAME}
  echo "SKIP: ONCEQ_TEST_DSN is not set, and this test needs the database." >&2
  echo "  Run it with its throwaway server: ./test/run.sh --one $t" >&2
  echo "  (docs/testing.md, \"Running one test\")" >&2
  exit 77
}

# oq_setup NAME [--url]: skip without a database; check the binaries; make
# the scratch folder and the migrated test database; install the EXIT
# trap. --url: also export ONCEQ_DATABASE_URL (the test database), so the
# test runs `onceq` and workers as an operator does, without --db.
oq_setup() {
  OQ_NAME=$1
  local url=${2:-}
  OQ_ADMIN_DSN=${ONCEQ_TEST_DSN:-}
  [ -n "$OQ_ADMIN_DSN" ] || oq_skip_no_dsn
  OQ_ISOLATION=${ONCEQ_TEST_ISOLATION:-read committed}
  case "$OQ_ISOLATION" in
  "read committed" | serializable | "repeatable read") ;;
  *)
    echo "bad ONCEQ_TEST_ISOLATION '$OQ_ISOLATION'" >&2
    exit 1
    ;;
  esac
  [ -x "${ONCEQ_CLI:-}" ] || { echo "ONCEQ_CLI is not executable" >&2; exit 1; }
  if [ -n "${ONCEQ_TEST_PGBIN:-}" ] && [ -x "$ONCEQ_TEST_PGBIN/psql" ]; then
    OQ_PSQL=$ONCEQ_TEST_PGBIN/psql
  else
    OQ_PSQL=$(command -v psql) || { echo "psql is missing" >&2; exit 1; }
  fi
  # only our database: libpq defaults from the caller must not leak in
  unset ONCEQ_DATABASE_URL DATABASE_URL PGPASSWORD PGDATABASE PGSERVICE PGOPTIONS
  OQ_TMP=$(mktemp -d "/tmp/onceq-$OQ_NAME.XXXXXX")
  chmod 755 "$OQ_TMP" # --exec items may run as another user
  trap oq_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  OQ_DB="oq_${OQ_NAME}_$$"
  OQ_DSN=$(oq_new_db "$OQ_DB" 1) || oq_fail "cannot create database $OQ_DB"
  OQ_WORKER_DSN=$OQ_DSN
  [ -z "${ONCEQ_TEST_ROLE:-}" ] || oq_role_setup
  if [ "$url" = --url ]; then
    export ONCEQ_DATABASE_URL=$OQ_DSN
  fi
  oq_log "database $OQ_DB, isolation $OQ_ISOLATION, scratch $OQ_TMP${ONCEQ_TEST_ROLE:+, workers as role onceq_test_worker}"
}

# oq_role_setup: ONCEQ_TEST_ROLE=worker (the C harness's oqt_worker_dsn does
# the same): apply deploy/grants/postgres.sql to the test database, make
# the login role onceq_test_worker (a member of onceq_worker; it also gets
# every right on the tables the test creates afterwards, its ledgers, as an
# operator grants a --sql handler's tables) and point OQ_WORKER_DSN at it,
# so the workers run with exactly the grants the deploy file ships. Roles
# are cluster-wide and the scripts idempotent: a race with a test doing the
# same at once is run again.
oq_role_setup() {
  [ "$ONCEQ_TEST_ROLE" = worker ] ||
    oq_fail "ONCEQ_TEST_ROLE=$ONCEQ_TEST_ROLE: the one role this switch knows is 'worker'"
  local grants i rc
  # the test server's admin may; a --dsn server's admin need not
  if [ "$(oq_sql "SELECT count(*) FROM pg_roles WHERE rolname = current_user
                  AND (rolsuper OR rolcreaterole)")" != 1 ]; then
    echo "SKIP: ONCEQ_TEST_ROLE needs an admin that may create roles (CREATEROLE)" >&2
    exit 77
  fi
  grants=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/deploy/grants/postgres.sql
  for i in 1 2 3 4 5 6 7 8 9 10; do
    rc=0
    oq_psql_retry "$OQ_PSQL" "$OQ_DSN" <"$grants" || rc=$?
    [ $rc -eq 0 ] && oq_psql_retry "$OQ_PSQL" "$OQ_DSN" "DO \$\$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'onceq_test_worker')
        THEN CREATE ROLE onceq_test_worker LOGIN; END IF; END \$\$;
      GRANT onceq_worker TO onceq_test_worker;
      ALTER DEFAULT PRIVILEGES IN SCHEMA public
        GRANT ALL ON TABLES TO onceq_test_worker;
      ALTER DEFAULT PRIVILEGES IN SCHEMA public
        GRANT ALL ON SEQUENCES TO onceq_test_worker" || rc=$?
    [ $rc -ne 0 ] || break
    sleep "0.0$i"
  done
  [ $rc -eq 0 ] || oq_fail "ONCEQ_TEST_ROLE: the grants failed: $OQ_PSQL_OUT"
  OQ_WORKER_DSN="$OQ_DSN user=onceq_test_worker"
}
