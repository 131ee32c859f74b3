# coord_lib.sh: shared plumbing for the coordinator/stats/schedule
# integration tests (test/coord/it_*.sh), sourced by each; not a test.
#
# Terms:
#  - test database: a private database per test run, named co_<test>_<pid>,
#    with default_transaction_isolation = ONCEQ_TEST_ISOLATION, migrated
#    with `onceq migrate`;
#  - child: a process the test started (a coordinator, a webhook server);
#    its pid is kept in CO_PIDS and the EXIT trap always stops it, by pid.
#
# Environment (ctest via coord.cmake, and test/run.sh):
#   ONCEQ_CLI            the onceq binary
#   ONCEQ_TEST_DSN       admin conninfo; the test skips (77) without it
#   ONCEQ_TEST_ISOLATION "read committed" (default) or "serializable"
#   ONCEQ_TEST_PGBIN     where psql lives (else PATH)
#   CO_KEEP_TMP          set: keep the scratch folder (logs) for debugging
#
# Every wait is bounded in count and time; a failed check prints what was
# seen and the tail of every child's log, and exits 1.

# shellcheck source=../harness/psql_retry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/psql_retry.sh"
# shellcheck source=../harness/children.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/children.sh"

set -euo pipefail

CO_PIDS=()      # children to stop on exit
CO_TMP=""       # scratch folder: logs, server scripts, outputs
CO_DB=""        # test database name
CO_DSN=""       # its conninfo
CO_ADMIN_DSN="" # admin conninfo
CO_KEEP_DB=0    # 1: keep the database (a check failed)
CO_NAME=""

co_log() { printf '[%s %s] %s\n' "$CO_NAME" "$(date +%T.%3N)" "$*"; }

co_now_ms() { date +%s%3N; }

co_metric() {
  printf 'METRIC %s %s %s (isolation: %s)\n' "$1" "$2" "$3" \
    "${CO_ISOLATION:-read committed}"
}

co_psql_bin() {
  if [ -n "${ONCEQ_TEST_PGBIN:-}" ] && [ -x "$ONCEQ_TEST_PGBIN/psql" ]; then
    echo "$ONCEQ_TEST_PGBIN/psql"
  else
    command -v psql
  fi
}

co_dump_logs() {
  local f
  [ -n "$CO_TMP" ] && [ -d "$CO_TMP" ] || return 0
  for f in "$CO_TMP"/*.log; do
    [ -f "$f" ] || continue
    echo "----- ${f##*/} (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2 || true
  done
}

co_fail() {
  echo "FAIL [$CO_NAME]: $*" >&2
  CO_KEEP_DB=1
  co_dump_logs
  exit 1
}

# co_sql SQL: run SQL in the test database (unaligned, tuples only). Under
# SERIALIZABLE the test's own statements can lose a serialization conflict
# (40001) against the coordinator; those are run again, up to 10 times.
co_sql() {
  local rc=0
  oq_psql_retry "$CO_PSQL" "$CO_DSN" "$1" || rc=$?
  [ $rc -eq 0 ] || co_fail "SQL failed (exit $rc): $1: $OQ_PSQL_OUT"
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

co_admin_sql() {
  "$CO_PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$CO_ADMIN_DSN" -c "$1"
}

# co_check WHAT GOT WANT: equality, both sides printed.
co_check() {
  [ "$2" = "$3" ] || co_fail "$1: got '$2', want '$3'"
  co_log "ok: $1 = $3"
}

# co_check_le WHAT A B: integers, A <= B.
co_check_le() {
  [ "$2" -le "$3" ] || co_fail "$1: $2 <= $3 does not hold"
  co_log "ok: $1: $2 <= $3"
}

co_contains() {
  case "$2" in
  *"$3"*) co_log "ok: $1 contains '$3'" ;;
  *) co_fail "$1: '$2' should contain '$3'" ;;
  esac
}

co_alive() { oq_child_alive "$@"; }

# co_wait_until SECONDS WHAT CMD...: run CMD every 100 ms until it
# succeeds; fail after SECONDS.
co_wait_until() {
  local secs=$1 what=$2 n=0
  shift 2
  local deadline=$(($(co_now_ms) + secs * 1000))
  while [ $n -lt $((secs * 20 + 20)) ]; do
    if "$@"; then return 0; fi
    [ "$(co_now_ms)" -lt "$deadline" ] || break
    sleep 0.1
    n=$((n + 1))
  done
  co_fail "timed out after ${secs}s waiting for: $what"
}

# co_start NAME CMD...: start CMD in the background, output to
# $CO_TMP/NAME.log; sets CO_LAST_PID.
co_start() {
  local name=$1
  shift
  "$@" >"$CO_TMP/$name.log" 2>&1 </dev/null &
  CO_LAST_PID=$!
  CO_PIDS+=("$CO_LAST_PID")
  co_log "started $name (pid $CO_LAST_PID)"
}

# co_coordinator NAME ARGS...: a coordinator on the test database.
co_coordinator() {
  local name=$1
  shift
  co_start "$name" "$ONCEQ_CLI" --db "$CO_DSN" coordinator "$@"
}

# co_wait_exit PID SECONDS: wait for our child to exit; CO_RC = its status.
co_wait_exit() {
  local pid=$1 secs=$2 n=0
  while co_alive "$pid" && [ $n -lt $((secs * 20)) ]; do
    sleep 0.05
    n=$((n + 1))
  done
  co_alive "$pid" && co_fail "process $pid did not exit within ${secs}s"
  CO_RC=0
  wait "$pid" 2>/dev/null || CO_RC=$?
}

# co_leader_pid: the pid of the session holding the coordinator lease, or
# "" when nobody holds it.
co_leader_pid() {
  co_sql "SELECT s.pid FROM onceq_leases l JOIN onceq_sessions s
          ON s.id = l.session_id WHERE l.name = 'coordinator'"
}

co_leader_is() { [ "$(co_leader_pid)" = "$1" ]; }

# co_sql_is SQL WANT: does SQL print WANT now? (for co_wait_until, which
# must re-run the query each time)
co_sql_is() { [ "$(co_sql "$1")" = "$2" ]; }

co_cleanup() {
  local rc=$?
  trap '' INT TERM
  set +e
  oq_stop_children "$CO_NAME" "${CO_PIDS[@]}"
  if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $CO_KEEP_DB -eq 0 ]; then
    co_dump_logs
    CO_KEEP_DB=1
  fi
  if [ -n "$CO_DB" ]; then
    if [ $CO_KEEP_DB -eq 0 ]; then
      co_admin_sql "DROP DATABASE IF EXISTS $CO_DB WITH (FORCE)" >/dev/null 2>&1
    else
      echo "[$CO_NAME] kept database $CO_DB for a post-mortem" >&2
    fi
  fi
  if [ -n "$CO_TMP" ]; then
    if [ $CO_KEEP_DB -eq 1 ] && [ -n "${ONCEQ_TEST_BUILD:-}" ]; then
      mkdir -p "$ONCEQ_TEST_BUILD/test-logs" 2>/dev/null &&
        cp -r "$CO_TMP" "$ONCEQ_TEST_BUILD/test-logs/${CO_DB:-$CO_NAME}" 2>/dev/null
    fi
    if [ -n "${CO_KEEP_TMP:-}" ]; then
      echo "[$CO_NAME] kept $CO_TMP (CO_KEEP_TMP)" >&2
    else
      rm -rf "$CO_TMP"
    fi
  fi
  exit "$rc"
}

# co_setup NAME: skip without a database; scratch folder, migrated test
# database, EXIT trap.
co_setup() {
  CO_NAME=$1
  CO_ADMIN_DSN=${ONCEQ_TEST_DSN:-}
  if [ -z "$CO_ADMIN_DSN" ]; then
    echo "SKIP: ONCEQ_TEST_DSN is not set; run ./test/run.sh" >&2
    exit 77
  fi
  CO_ISOLATION=${ONCEQ_TEST_ISOLATION:-read committed}
  case "$CO_ISOLATION" in
  "read committed" | serializable | "repeatable read") ;;
  *) echo "bad ONCEQ_TEST_ISOLATION '$CO_ISOLATION'" >&2; exit 1 ;;
  esac
  [ -x "${ONCEQ_CLI:-}" ] || { echo "ONCEQ_CLI not executable" >&2; exit 1; }
  CO_PSQL=$(co_psql_bin) || { echo "no psql" >&2; exit 1; }
  unset ONCEQ_DATABASE_URL DATABASE_URL PGPASSWORD PGDATABASE PGOPTIONS
  CO_TMP=$(mktemp -d "/tmp/onceq-$CO_NAME.XXXXXX")
  trap co_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  CO_DB="co_${CO_NAME}_$$"
  co_admin_sql "DROP DATABASE IF EXISTS $CO_DB WITH (FORCE)" >/dev/null 2>&1
  co_admin_sql "CREATE DATABASE $CO_DB" >/dev/null
  co_admin_sql "ALTER DATABASE $CO_DB SET default_transaction_isolation = '$CO_ISOLATION'" >/dev/null
  CO_DSN="$CO_ADMIN_DSN dbname=$CO_DB"
  local out
  out=$("$ONCEQ_CLI" --db "$CO_DSN" migrate 2>&1) || co_fail "onceq migrate: $out"
  co_log "database $CO_DB, isolation $CO_ISOLATION, scratch $CO_TMP"
}

# co_python: the path of a python3 (the harness may shim one that imports
# psycopg; the standard library is all these tests need). Start a Python
# child with `co_start NAME "$(co_python)" ...`, so that the recorded pid is
# python's own (a shell function in the background is a subshell whose
# python would outlive the SIGTERM at cleanup).
co_python() { command -v python3 2>/dev/null || echo /usr/bin/python3; }

# co_py ARGS...: run python3 in the foreground.
co_py() { "$(co_python)" "$@"; }
