# shellcheck shell=bash disable=SC2034 # RC, CLI_*: read by the tests
# cli_lib.sh: shared plumbing for the operator CLI tests (test/cli/cli_*.sh),
# sourced by each of them; not a test itself.
#
# Each test gets a private database (cli_<test>_<pid>) on the harness server,
# migrated with `onceq migrate`, with default_transaction_isolation set to
# ONCEQ_TEST_ISOLATION, so every connection the CLI (and any worker) makes
# runs under it. ONCEQ_DATABASE_URL points at it, so the tests call `onceq`
# the way an operator does, without --db.
#
# Environment (from ctest, see cli_ops.cmake, and from test/run.sh):
#   ONCEQ_CLI             the onceq binary under test
#   ONCEQ_WORKER          the onceq-worker binary (the cancel test)
#   ONCEQ_TEST_DSN        admin conninfo; the test skips (exit 77) without it
#   ONCEQ_TEST_ISOLATION  "read committed" (default) or "serializable"
#   CLI_KEEP              set: keep the scratch folder and the database
#
# Every check prints what it compared; a failure prints both sides and
# keeps the database and the scratch folder for a post-mortem.

# shellcheck source=../harness/psql_retry.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/psql_retry.sh"
# shellcheck source=../harness/children.sh
. "$(dirname "${BASH_SOURCE[0]}")/../harness/children.sh"

set -euo pipefail

CLI_NAME=""
CLI_TMP=""
CLI_DB=""
CLI_ADMIN=""
CLI_KEEP_DB=0
CLI_PIDS=()
CLI_EXTRA_DBS=() # more databases a test made; dropped like CLI_DB

cli_log() { printf '[%s] %s\n' "$CLI_NAME" "$*"; }

cli_fail() {
  echo "FAIL [$CLI_NAME]: $*" >&2
  CLI_KEEP_DB=1
  exit 1
}

# cli_check WHAT GOT WANT: equality, printing both sides.
cli_check() {
  if [ "$2" != "$3" ]; then
    cli_fail "$1: got '$2', want '$3'"
  fi
  cli_log "ok: $1 = $3"
}

# cli_match WHAT TEXT REGEX: TEXT matches the extended REGEX.
cli_match() {
  if ! grep -Eq -- "$3" <<<"$2"; then
    cli_fail "$1: '$2' does not match /$3/"
  fi
  cli_log "ok: $1 matches /$3/"
}

# q SQL: run SQL in the test database; unaligned, tuples only; retries
# serialization failures (test/harness/psql_retry.sh).
q() {
  local rc=0
  oq_psql_retry psql "$ONCEQ_DATABASE_URL" "$1" || rc=$?
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$OQ_PSQL_OUT" >&2
    return $rc
  fi
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

# cli_snapshot: one line that changes when any onceq table changes.
cli_snapshot() {
  q "SELECT (SELECT count(*) || ':' || coalesce(md5(string_agg(
              id::text || queue || payload::text || attempts || run_at::text
              || coalesce(claim::text, ''), ',' ORDER BY id)), '')
            FROM onceq_items) || '|' ||
         (SELECT count(*) || ':' || coalesce(md5(string_agg(id::text, ','
              ORDER BY id)), '') FROM onceq_dead) || '|' ||
         (SELECT count(*) FROM onceq_done) || '|' ||
         (SELECT count(*) FROM onceq_sessions)"
}

# run_onceq OUT ERR ARGS...: run onceq with ARGS, stdout to OUT and stderr to
# ERR (files); sets RC to its exit status. Never fails by itself.
run_onceq() {
  local out=$1 err=$2
  shift 2
  RC=0
  "$ONCEQ_CLI" "$@" >"$out" 2>"$err" || RC=$?
}

# cli_json_ok WHAT FILE: FILE holds valid JSON (one document, or JSON lines
# when the second argument is "lines").
cli_json_ok() {
  local what=$1 file=$2 mode=${3:-doc}
  python3 - "$file" "$mode" <<'EOF' || cli_fail "$what: not valid JSON: $(head -c 400 "$file")"
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
  cli_log "ok: $what is valid JSON"
}

# jget FILE EXPR: evaluate the Python expression EXPR on the JSON document in
# FILE (bound to d) and print the result.
jget() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

cli_alive() { oq_child_alive "$@"; }

cli_cleanup() {
  local rc=$? db
  set +e
  oq_stop_children "$CLI_NAME" "${CLI_PIDS[@]}"
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    CLI_KEEP_DB=1
    if [ -n "$CLI_TMP" ]; then
      for f in "$CLI_TMP"/*.err "$CLI_TMP"/*.log; do
        [ -f "$f" ] || continue
        echo "----- ${f##*/} (last 20 lines) -----" >&2
        tail -n 20 "$f" >&2
      done
    fi
  fi
  [ -n "${CLI_KEEP:-}" ] && CLI_KEEP_DB=1
  if [ -n "$CLI_DB" ]; then
    if [ $CLI_KEEP_DB -eq 0 ]; then
      for db in "$CLI_DB" "${CLI_EXTRA_DBS[@]}"; do
        psql "$CLI_ADMIN" -X -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
          >/dev/null 2>&1
      done
    else
      echo "[$CLI_NAME] kept database $CLI_DB and $CLI_TMP" >&2
    fi
  fi
  if [ -n "$CLI_TMP" ] && [ $CLI_KEEP_DB -eq 0 ]; then
    rm -rf "$CLI_TMP"
  fi
  exit $rc
}

# cli_setup NAME: skip without a database; create the scratch folder and
# the migrated test database; export ONCEQ_DATABASE_URL.
cli_setup() {
  CLI_NAME=$1
  CLI_ADMIN=${ONCEQ_TEST_DSN:-}
  if [ -z "$CLI_ADMIN" ]; then
    echo "SKIP: ONCEQ_TEST_DSN is not set; run ./test/run.sh" >&2
    exit 77
  fi
  [ -x "${ONCEQ_CLI:-}" ] || { echo "ONCEQ_CLI is not executable" >&2; exit 1; }
  command -v psql >/dev/null || { echo "psql is missing" >&2; exit 1; }
  command -v python3 >/dev/null || { echo "python3 is missing" >&2; exit 1; }
  local iso=${ONCEQ_TEST_ISOLATION:-read committed}
  case $iso in
  'read committed' | 'repeatable read' | serializable) ;;
  *) echo "bad ONCEQ_TEST_ISOLATION '$iso'" >&2; exit 1 ;;
  esac
  unset ONCEQ_DATABASE_URL DATABASE_URL PGDATABASE PGSERVICE PGOPTIONS
  CLI_TMP=$(mktemp -d "/tmp/onceq-$CLI_NAME.XXXXXX")
  trap cli_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  CLI_DB="cli_${CLI_NAME}_$$"
  psql "$CLI_ADMIN" -X -q -v ON_ERROR_STOP=1 \
    -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $CLI_DB WITH (FORCE)" \
    -c "CREATE DATABASE $CLI_DB" \
    -c "ALTER DATABASE $CLI_DB SET default_transaction_isolation = '$iso'" \
    >/dev/null || cli_fail "cannot create database $CLI_DB"
  export ONCEQ_DATABASE_URL="$CLI_ADMIN dbname=$CLI_DB"
  "$ONCEQ_CLI" migrate >"$CLI_TMP/migrate.log" 2>&1 ||
    cli_fail "onceq migrate failed: $(cat "$CLI_TMP/migrate.log")"
  cli_log "database $CLI_DB ($iso), scratch $CLI_TMP"
}
