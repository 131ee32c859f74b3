#!/usr/bin/env bash
# it_bad_flags.sh: onceq-worker's usage and configuration errors. Each bad
# invocation exits 2 (1 when the server cannot be reached: docs/cli.md "Exit
# codes") with exactly one line on stderr that names the problem,
# and a password given in --db or ONCEQ_DATABASE_URL never shows in stderr,
# nor in the logs or /proc/PID/cmdline of a worker that runs.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup badflags

SECRET=SeCrEt
UNMIGRATED_DB="it_badflags_raw_$$"
UNMIGRATED_DSN=$(oq_new_db "$UNMIGRATED_DB" 0) || oq_fail "cannot create $UNMIGRATED_DB"
drop_unmigrated() {
  oq_admin_sql "DROP DATABASE IF EXISTS $UNMIGRATED_DB WITH (FORCE)" >/dev/null 2>&1 || true
}

# expect_usage CASE WANT_SUBSTRING [NAME=VALUE ...] -- ARGS...: run the
# worker (at most 6 s), expect exit 2 (EXPECT_RC=1 for a server that
# cannot be reached: the exit-code rule of docs/cli.md "Exit codes"), one
# stderr line containing WANT_SUBSTRING and not the secret, nothing on
# stdout. Problems are collected in PROBLEMS, so that one run reports every
# case.
PROBLEMS=()
NCASES=0
expect_usage() {
  local name=$1 want=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  local err=$OQ_TMP/case-$NCASES.stderr out=$OQ_TMP/case-$NCASES.stdout
  local pid n=0 text lines
  NCASES=$((NCASES + 1))
  env -u ONCEQ_DATABASE_URL -u DATABASE_URL "${envs[@]}" "$ONCEQ_WORKER" "$@" \
    >"$out" 2>"$err" </dev/null &
  pid=$!
  OQ_PIDS+=("$pid")
  while oq_alive "$pid" && [ $n -lt 120 ]; do
    sleep 0.05
    n=$((n + 1))
  done
  if oq_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    oq_wait_exit "$pid" 10
    PROBLEMS+=("$name: the worker did not exit within 6 s; it ran (exit code $OQ_RC after SIGTERM); stderr: $(head -n 2 "$err" | cut -c1-200 | tr '\n' ' ')")
    return 0
  fi
  OQ_RC=0
  wait "$pid" 2>/dev/null || OQ_RC=$?
  oq_forget "$pid"
  text=$(cat "$err")
  lines=$(wc -l <"$err")
  oq_log "$name: exit $OQ_RC, stderr: $text"
  local want_rc=${EXPECT_RC:-2}
  [ "$OQ_RC" = "$want_rc" ] || PROBLEMS+=("$name: exit code $OQ_RC, want $want_rc")
  [ "$lines" = 1 ] || PROBLEMS+=("$name: $lines stderr lines, want 1")
  case "$text" in
  *"$want"*) ;;
  *) PROBLEMS+=("$name: stderr does not contain '$want'") ;;
  esac
  case "$text" in
  *"$SECRET"*) PROBLEMS+=("$name: the password shows in stderr") ;;
  esac
  [ ! -s "$out" ] || PROBLEMS+=("$name: printed on stdout: $(head -c 200 "$out")")
}

DB=(--db "$OQ_DSN")
expect_usage "no handler" "no handler" -- "${DB[@]}"
expect_usage "unknown handler flag" "--nope" -- "${DB[@]}" --nope
expect_usage "two handlers (--sql then --exec)" "more than one handler" -- \
  "${DB[@]}" --sql 'SELECT 1' --exec /bin/true
expect_usage "two handlers (--http then --sql)" "more than one handler" -- \
  "${DB[@]}" --http http://127.0.0.1:1/ --sql 'SELECT 1'
expect_usage "bad duration" "--poll-interval 5" -- \
  "${DB[@]}" --poll-interval 5 --sql 'SELECT 1'
expect_usage "bad concurrency" "--concurrency" -- \
  "${DB[@]}" --concurrency 0 --sql 'SELECT 1'
EXPECT_RC=1 expect_usage "unreachable database" "127.0.0.1" -- \
  --db "host=127.0.0.1 port=1 connect_timeout=2" --sql 'SELECT 1'
expect_usage "missing database" "it_no_such_db_$$" -- \
  --db "$OQ_ADMIN_DSN dbname=it_no_such_db_$$" --sql 'SELECT 1'
EXPECT_RC=1 expect_usage "no --db, libpq defaults point nowhere" "port 1" \
  PGHOST=127.0.0.1 PGPORT=1 PGCONNECT_TIMEOUT=2 -- --sql 'SELECT 1'
EXPECT_RC=1 expect_usage "URL with a password" "127.0.0.1" -- \
  --db "postgresql://u:$SECRET@127.0.0.1:1/x" --sql 'SELECT 1'
EXPECT_RC=1 expect_usage "conninfo with a password" "127.0.0.1" -- \
  --db "host=127.0.0.1 port=1 user=u password=$SECRET connect_timeout=2" \
  --sql 'SELECT 1'
EXPECT_RC=1 expect_usage "ONCEQ_DATABASE_URL with a password" "127.0.0.1" \
  "ONCEQ_DATABASE_URL=postgresql://u:$SECRET@127.0.0.1:1/x" -- --sql 'SELECT 1'
expect_usage "unmigrated database" "onceq migrate" -- \
  --db "$UNMIGRATED_DSN" --sql 'SELECT 1'
drop_unmigrated
# --exec takes the rest of the line, so a handler flag after it is a second
# handler, not an argument (the brief's "--exec x --sql y")
expect_usage "two handlers (--exec then --sql)" "more than one handler" -- \
  "${DB[@]}" --exec /bin/true --sql 'SELECT 1'

# ---- a running worker never shows the password (trust auth ignores it)
port=$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$OQ_ADMIN_DSN")
host=$(sed -n 's/.*host=\([^ ]*\).*/\1/p' <<<"$OQ_ADMIN_DSN")
user=$(sed -n 's/.*user=\([^ ]*\).*/\1/p' <<<"$OQ_ADMIN_DSN")
if [ -n "$port" ] && [ -n "$host" ] && [ -n "$user" ]; then
  for form in url conninfo; do
    if [ $form = url ]; then
      dsn="postgresql://$user:$SECRET@$host:$port/$OQ_DB?sslmode=disable"
    else
      dsn="$OQ_DSN password=$SECRET"
    fi
    "$ONCEQ_WORKER" --db "$dsn" --log-level debug --sql 'SELECT 1' \
      >"$OQ_TMP/run-$form.log" 2>&1 </dev/null &
    pid=$!
    OQ_PIDS+=("$pid")
    up() { [ "$(oq_session_count_for_pid "$pid")" = 1 ]; }
    oq_wait_until 10 "the worker ($form with a password) to register" up
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    oq_log "running worker's cmdline ($form): $cmdline"
    case "$cmdline" in
    *"$SECRET"*) oq_fail "the password shows in /proc/$pid/cmdline: $cmdline" ;;
    esac
    oq_stop "$pid" 10
    oq_check "exit code ($form with a password)" "$OQ_RC" 0
    if grep -q "$SECRET" "$OQ_TMP/run-$form.log"; then
      oq_fail "the password shows in the log: $(grep "$SECRET" "$OQ_TMP/run-$form.log" | head -3)"
    fi
    oq_log "ok: no password in the $form worker's cmdline or log"
  done
else
  oq_log "admin DSN is not key=value with host/port/user; password run skipped"
fi

# ---- --env NAME=VALUE (issue 20): the value leaves argv, and the log
"$ONCEQ_WORKER" --db "$OQ_DSN" --log-level debug --env "OQT_TOKEN=$SECRET" \
  --env=OQT_B="$SECRET" --exec /bin/true >"$OQ_TMP/run-env.log" 2>&1 </dev/null &
pid=$!
OQ_PIDS+=("$pid")
up() { [ "$(oq_session_count_for_pid "$pid")" = 1 ]; }
oq_wait_until 10 "the worker with --env NAME=VALUE to register" up
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
oq_log "running worker's cmdline (--env): $cmdline"
case "$cmdline" in
*"$SECRET"*) oq_fail "an --env value shows in /proc/$pid/cmdline: $cmdline" ;;
esac
oq_contains "the cmdline" "$cmdline" "--env OQT_TOKEN=*** "
oq_stop "$pid" 10
oq_check "exit code (--env NAME=VALUE)" "$OQ_RC" 0
if grep -q "$SECRET" "$OQ_TMP/run-env.log"; then
  oq_fail "an --env value shows in the log: $(grep "$SECRET" "$OQ_TMP/run-env.log" | head -3)"
fi
if [ ${#PROBLEMS[@]} -gt 0 ]; then
  oq_fail "$NCASES usage cases, ${#PROBLEMS[@]} problem(s):$(printf '\n  - %s' "${PROBLEMS[@]}")"
fi
oq_log "ok: all $NCASES usage cases exit 2 (1: server unreachable) with one line and no password"
oq_log "PASS"
