# shellcheck shell=bash disable=SC2034 # IT_RC, IT_LAST_PID: read by the tests
# it_lib.sh: shared plumbing for the onceq-worker integration tests
# (test/worker/it_*.sh), sourced by each of them; not a test itself.
#
# Terms:
#  - test database: a private database per test run, named it_<test>_<pid>,
#    migrated with `onceq migrate` and with default_transaction_isolation set
#    to ONCEQ_TEST_ISOLATION, so every worker connection runs under it;
#  - worker: an onceq-worker child started by it_worker_start; its pid is
#    kept in IT_PIDS and it is always stopped by the EXIT trap.
#
# Environment (from ctest, see it_worker.cmake, and from test/run.sh):
#   ONCEQ_WORKER   the onceq-worker binary
#   ONCEQ_CLI      the onceq binary (for `onceq migrate`)
#   ONCEQ_TEST_DSN admin conninfo; the test skips (exit 77) without it
#   ONCEQ_TEST_ISOLATION "read committed" (default) or "serializable"
#   IT_KEEP_TMP    set: keep the scratch folder (worker logs) for debugging
#
# Every wait is bounded in count and time; a failed check prints what was
# seen, the tail of every worker log, and exits 1.

# shellcheck source=../harness/psql_retry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/psql_retry.sh"
# shellcheck source=../harness/children.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/children.sh"

set -euo pipefail

IT_PIDS=()       # every process we started and must stop
IT_TMP=""        # scratch folder (logs, scripts, effect files)
IT_DB=""         # the test database's name
IT_DSN=""        # its conninfo
IT_ADMIN_DSN=""  # the admin conninfo
IT_KEEP_DB=0     # 1: leave the database for a post-mortem (on failure)
IT_NAME=""
IT_RC=0          # exit status of the last process it_wait_exit/it_stop saw
IT_LAST_PID=""   # the worker it_worker_start started last

it_log() { printf '[%s %s] %s\n' "$IT_NAME" "$(date +%T.%3N)" "$*"; }

it_now_ms() { date +%s%3N; }

# it_metric NAME VALUE UNIT [NOTE]: one parseable line, like the C harness's
# oqt_metric: "METRIC name value unit (isolation: ...)".
it_metric() {
  printf 'METRIC %s %s %s (isolation: %s)%s\n' "$1" "$2" "$3" \
    "${IT_ISOLATION:-read committed}" "${4:+ $4}"
}

# it_psql_bin: psql from ONCEQ_TEST_PGBIN when there, else from PATH.
it_psql_bin() {
  if [ -n "${ONCEQ_TEST_PGBIN:-}" ] && [ -x "$ONCEQ_TEST_PGBIN/psql" ]; then
    echo "$ONCEQ_TEST_PGBIN/psql"
  else
    command -v psql
  fi
}

# it_sql [SQL]: run SQL (argument, or stdin) in the test database; prints
# unaligned tuples-only output. Fails the test on error. Under SERIALIZABLE
# even the test's own reads can be chosen as the victim of a serialization
# failure (SQLSTATE 40001) while workers run; those are run again (up to 10
# times; psql's single -c string is one transaction, and a stdin script is
# only ever reads and temp tables here).
it_sql() {
  local rc=0
  oq_psql_retry "$IT_PSQL" "$IT_DSN" "$@" || rc=$?
  if [ $rc -ne 0 ]; then
    it_fail "SQL failed (exit $rc): ${1:-(stdin)}: $OQ_PSQL_OUT"
  fi
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

# it_admin_sql SQL: run SQL on the admin database.
it_admin_sql() {
  "$IT_PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$IT_ADMIN_DSN" -c "$1"
}

# it_alive PID: is PID a live (not zombie) process?
it_alive() { oq_child_alive "$@"; }

# it_dump_logs: the tail of every worker log, for a failure report.
it_dump_logs() {
  local f
  [ -n "$IT_TMP" ] && [ -d "$IT_TMP" ] || return 0
  for f in "$IT_TMP"/*.log; do
    [ -f "$f" ] || continue
    echo "----- ${f##*/} (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2 || true
  done
}

it_fail() {
  echo "FAIL [$IT_NAME]: $*" >&2
  IT_KEEP_DB=1
  it_dump_logs
  exit 1
}

# it_check DESCRIPTION GOT WANT: equality, printing both sides.
it_check() {
  if [ "$2" != "$3" ]; then
    it_fail "$1: got '$2', want '$3'"
  fi
  it_log "ok: $1 = $3"
}

# it_check_le DESCRIPTION A B: A <= B (integers).
it_check_le() {
  if ! [ "$2" -le "$3" ]; then
    it_fail "$1: $2 <= $3 does not hold"
  fi
  it_log "ok: $1: $2 <= $3"
}

# it_contains DESCRIPTION HAYSTACK NEEDLE
it_contains() {
  case "$2" in
  *"$3"*) it_log "ok: $1 contains '$3'" ;;
  *) it_fail "$1: '$2' should contain '$3'" ;;
  esac
}

# it_wait_until SECONDS DESCRIPTION CMD...: poll CMD every 100 ms until it
# succeeds; fail after SECONDS.
it_wait_until() {
  local secs=$1 what=$2
  shift 2
  local deadline=$(($(it_now_ms) + secs * 1000)) n=0
  while [ $n -lt $((secs * 20 + 20)) ]; do
    if "$@"; then return 0; fi
    [ "$(it_now_ms)" -lt "$deadline" ] || break
    sleep 0.1
    n=$((n + 1))
  done
  it_fail "timed out after ${secs}s waiting for: $what"
}

# it_worker_start NAME ARGS...: start onceq-worker --db <test db> ARGS in
# the background, stdout+stderr to $IT_TMP/NAME.log; sets IT_LAST_PID.
it_worker_start() {
  local name=$1
  shift
  "$ONCEQ_WORKER" --db "$IT_DSN" "$@" >"$IT_TMP/$name.log" 2>&1 </dev/null &
  IT_LAST_PID=$!
  IT_PIDS+=("$IT_LAST_PID")
  it_log "started worker $name (pid $IT_LAST_PID)"
}

# it_forget PID...: drop PIDs from IT_PIDS once they are known to be gone,
# so the EXIT trap never signals a reused pid.
it_forget() {
  local keep=() p q drop
  for p in "${IT_PIDS[@]}"; do
    drop=0
    for q in "$@"; do [ "$p" = "$q" ] && drop=1; done
    [ $drop = 1 ] || keep+=("$p")
  done
  IT_PIDS=("${keep[@]}")
}

# it_wait_exit PID SECONDS: wait for our child PID to exit, at most SECONDS;
# sets IT_RC to its exit status (or fails the test when it does not exit).
it_wait_exit() {
  local pid=$1 secs=$2 n=0
  while it_alive "$pid" && [ $n -lt $((secs * 20)) ]; do
    sleep 0.05
    n=$((n + 1))
  done
  if it_alive "$pid"; then
    it_fail "process $pid did not exit within ${secs}s"
  fi
  IT_RC=0
  wait "$pid" 2>/dev/null || IT_RC=$?
  it_forget "$pid"
}

# it_stop PID [SECONDS]: SIGTERM, wait up to SECONDS (10) for the exit;
# sets IT_RC.
it_stop() {
  local pid=$1 secs=${2:-10}
  kill -TERM "$pid" 2>/dev/null || true
  it_wait_exit "$pid" "$secs"
}

# it_session_count_for_pid PID: how many onceq_sessions rows that pid owns.
it_session_count_for_pid() {
  it_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $1"
}

# it_cleanup: the EXIT trap: stop every process we started (SIGTERM, then
# SIGKILL after 5 s, each by pid), drop the database unless a check failed,
# remove the scratch folder.
it_cleanup() {
  local rc=$?
  trap '' INT TERM
  set +e
  oq_stop_children "$IT_NAME" "${IT_PIDS[@]}"
  if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $IT_KEEP_DB -eq 0 ]; then
    it_dump_logs
    IT_KEEP_DB=1
  fi
  if [ -n "$IT_DB" ]; then
    if [ $IT_KEEP_DB -eq 0 ]; then
      it_admin_sql "DROP DATABASE IF EXISTS $IT_DB WITH (FORCE)" \
        >/dev/null 2>&1
    else
      echo "[$IT_NAME] kept database $IT_DB for a post-mortem" >&2
    fi
  fi
  if [ -n "$IT_TMP" ]; then
    if [ $IT_KEEP_DB -eq 1 ] && [ -n "${ONCEQ_TEST_BUILD:-}" ]; then
      mkdir -p "$ONCEQ_TEST_BUILD/test-logs" 2>/dev/null &&
        cp -r "$IT_TMP" "$ONCEQ_TEST_BUILD/test-logs/${IT_DB:-$IT_NAME}" \
          2>/dev/null
    fi
    if [ -n "${IT_KEEP_TMP:-}" ]; then
      echo "[$IT_NAME] kept $IT_TMP (IT_KEEP_TMP)" >&2
    else
      rm -rf "$IT_TMP"
    fi
  fi
  exit "$rc"
}

# it_new_db NAME MIGRATE(0|1): create database NAME (dropped first if it
# exists) with the isolation of this pass; echo its conninfo.
it_new_db() {
  local name=$1 migrate=$2 dsn out
  it_admin_sql "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1
  it_admin_sql "CREATE DATABASE $name" >/dev/null
  it_admin_sql "ALTER DATABASE $name SET default_transaction_isolation = '$IT_ISOLATION'" >/dev/null
  dsn="$IT_ADMIN_DSN dbname=$name"
  if [ "$migrate" = 1 ]; then
    if ! out=$("$ONCEQ_CLI" --db "$dsn" migrate 2>&1); then
      echo "onceq migrate failed: $out" >&2
      return 1
    fi
  fi
  echo "$dsn"
}

# it_setup NAME: check the environment (skip without a database), create
# the scratch folder and the migrated test database, install the trap.
it_setup() {
  IT_NAME=$1
  IT_ADMIN_DSN=${ONCEQ_TEST_DSN:-}
  if [ -z "$IT_ADMIN_DSN" ]; then
    echo "SKIP: ONCEQ_TEST_DSN is not set; run ./test/run.sh" >&2
    exit 77
  fi
  IT_ISOLATION=${ONCEQ_TEST_ISOLATION:-read committed}
  case "$IT_ISOLATION" in
  "read committed" | serializable | "repeatable read") ;;
  *)
    echo "bad ONCEQ_TEST_ISOLATION '$IT_ISOLATION'" >&2
    exit 1
    ;;
  esac
  [ -x "${ONCEQ_WORKER:-}" ] || { echo "ONCEQ_WORKER not executable" >&2; exit 1; }
  [ -x "${ONCEQ_CLI:-}" ] || { echo "ONCEQ_CLI not executable" >&2; exit 1; }
  IT_PSQL=$(it_psql_bin) || { echo "no psql" >&2; exit 1; }
  # only our database: libpq defaults from the caller must not leak in
  unset ONCEQ_DATABASE_URL DATABASE_URL PGPASSWORD PGDATABASE PGOPTIONS
  IT_TMP=$(mktemp -d "/tmp/onceq-$IT_NAME.XXXXXX")
  chmod 755 "$IT_TMP"
  trap it_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  IT_DB="it_${IT_NAME}_$$"
  IT_DSN=$(it_new_db "$IT_DB" 1) || it_fail "cannot create $IT_DB"
  it_log "database $IT_DB, isolation $IT_ISOLATION, scratch $IT_TMP"
}

# it_ledger_exact N: the ledger has exactly N rows, N distinct item ids,
# and the items table is empty.
it_ledger_exact() {
  local n=$1
  it_check "ledger rows" "$(it_sql 'SELECT count(*) FROM ledger')" "$n"
  it_check "distinct ledger item ids" \
    "$(it_sql 'SELECT count(DISTINCT item_id) FROM ledger')" "$n"
  it_check "items left" "$(it_sql 'SELECT count(*) FROM onceq_items')" 0
}
