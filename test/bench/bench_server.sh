# shellcheck shell=bash disable=SC2034 # PG_*: read by the callers
# bench_server.sh: what the benchmarks (test/bench/run.sh, parts_bench.sh,
# peers/run.sh) share; sourced, not run. One copy of the server setup, so
# the benches keep measuring against the same durability settings instead of
# three copies drifting apart.
#
# The caller sets, before sourcing:
#   ROOT        the repository
#   BENCH_NAME  its own path from ROOT (messages, the postgresql.conf mark)
#   PGBIN       the server's bin folder
# and has `set -euo pipefail`, `OUR_PIDS=()` (pids it started, not the
# server's) and, for bench_on_exit, WORK and LOG_DIR.

# shellcheck source=../../deploy/lib/pglocal.sh
. "$ROOT/deploy/lib/pglocal.sh"

# The help text is the script's own header comment, so it cannot go stale;
# BASH_SOURCE[-1] is the script that was run, not this file.
usage() {
  sed -n '2,/^set -euo pipefail$/p' "${BASH_SOURCE[-1]}" | sed '$d' |
    sed 's/^# \{0,1\}//'
}
die() {
  echo "$BENCH_NAME: $*" >&2
  exit 2
}
log() { printf '\n==> %s\n' "$*"; }

# stop_our_pids: SIGTERM each of OUR_PIDS, then SIGKILL after 5 s; by pid
# only, so nothing of anyone else's on a shared machine is touched.
stop_our_pids() {
  local p
  for p in "${OUR_PIDS[@]}"; do
    if pgl_alive "$p"; then kill -TERM "$p" 2>/dev/null || true; fi
  done
  for p in "${OUR_PIDS[@]}"; do
    stop_pid "$p" 50
  done
  OUR_PIDS=()
  return 0
}

# stop_pid PID [TENTHS]: SIGTERM, up to TENTHS tenths of a second (default
# 100) for a clean exit, then SIGKILL; reaps it.
stop_pid() {
  local p=$1 tenths=${2:-100}
  pgl_alive "$p" || { wait "$p" 2>/dev/null || true; return 0; }
  kill -TERM "$p" 2>/dev/null || true
  for _ in $(seq 1 "$tenths"); do
    pgl_alive "$p" || break
    sleep 0.1
  done
  if pgl_alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
  wait "$p" 2>/dev/null || true
  return 0
}

# bench_on_exit: on any exit (INT and TERM included) stop OUR_PIDS, then the
# server, keeping the exit status. Reads WORK and LOG_DIR when it fires, so
# it can be set before the server exists. A caller that stops its pids
# another way defines its own trap around bench_server_stop.
bench_on_exit() {
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
bench_cleanup() {
  local rc=$?
  trap '' INT TERM
  set +e
  stop_our_pids
  # shellcheck disable=SC2153 # WORK, LOG_DIR: the caller's
  bench_server_stop "$WORK" "$LOG_DIR"
  exit "$rc"
}

PG_DATA="" PG_PORT="" PG_PID="" PG_OSUSER=""

# bench_server_start WORK LOG_DIR MAX_CONNECTIONS LOG_LINE_PREFIX MODE
#   <<< EXTRA_CONF
# initdb a cluster in WORK/data and start it on 127.0.0.1, a free port,
# logging to WORK/postgres.log; WORK gets MODE. Sets PG_DATA (first, so a
# cleanup after a failed initdb still knows it), PG_OSUSER, PG_PORT and
# PG_PID. The settings each bench differs in come as arguments or stdin
# (extra postgresql.conf lines); fsync and synchronous_commit stay on in all
# of them, because a bench that loosens durability measures a queue no one
# runs. Exits through die when the server cannot be set up.
bench_server_start() {
  local work=$1 log_dir=$2 max_conn=$3 prefix=$4 mode=$5 extra
  extra=$(cat)
  PG_DATA="$work/data"
  # The server refuses to run as root.
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "no OS user 'postgres' to run the server"
    PG_OSUSER=postgres
    chown postgres: "$work"
  fi
  chmod "$mode" "$work"
  bench_as_pg "$work" "$PGBIN/initdb" -D "$PG_DATA" -U postgres -A trust \
    -E UTF8 --no-locale >"$log_dir/initdb.log" 2>&1 ||
    { cat "$log_dir/initdb.log" >&2; die "initdb failed"; }
  bench_as_pg "$work" touch "$work/postgres.log"
  bench_as_pg "$work" tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# ---- $BENCH_NAME: realistic durability
listen_addresses = '127.0.0.1'
port = 0
unix_socket_directories = '$work'
max_connections = $max_conn
shared_buffers = 256MB
fsync = on
synchronous_commit = on
log_line_prefix = '$prefix'
log_min_messages = warning
$extra
EOF
  PGL_HOME=$work PGL_OSUSER=$PG_OSUSER pgl_start "$PG_DATA" \
    "$work/postgres.log" || die "PostgreSQL did not start"
  PG_PORT=$PGL_PORT
  PG_PID=$PGL_PID
}

# bench_own_env: the bench's clients reach only the server it started, as
# its DSNs say; a PG* variable or a pgpass entry of the caller's would
# otherwise redirect or log in some of them and not others.
bench_own_env() {
  unset PGHOST PGHOSTADDR PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE \
    PGOPTIONS ONCEQ_DATABASE_URL DATABASE_URL
  export PGPASSFILE=/nonexistent/onceq-bench-pgpass
}

# bench_as_pg WORK CMD...: CMD as the server's OS user, from WORK.
bench_as_pg() {
  local work=$1
  shift
  PGL_HOME=$work PGL_OSUSER=$PG_OSUSER pgl_as_pg "$@"
}

# bench_server_stop WORK LOG_DIR: stop the server (by its pid, never by
# name: other clusters may run here), keep its log in LOG_DIR, remove WORK.
# For the EXIT trap, so it never fails; a no-op before WORK exists.
bench_server_stop() {
  local work=$1 log_dir=$2
  [ -n "$work" ] || return 0
  if [ -n "$PG_DATA" ]; then
    PGL_HOME=$work PGL_OSUSER=$PG_OSUSER pgl_stop "$PG_DATA" "$PG_PID"
  fi
  if [ -f "$work/postgres.log" ]; then
    cp "$work/postgres.log" "$log_dir/" 2>/dev/null || true
  fi
  rm -rf "$work"
  return 0
}
