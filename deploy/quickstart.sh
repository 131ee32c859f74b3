#!/usr/bin/env bash
# deploy/quickstart.sh: see onceq's exactly-once acknowledgement on this
# machine in about a minute.
#
#   ./deploy/quickstart.sh          build, start a local PostgreSQL, run the demo
#   ./deploy/quickstart.sh stop     stop what the demo started (workers, server)
#   ./deploy/quickstart.sh status   show what is running
#   ./deploy/quickstart.sh -h       this text
#
# Run it from anywhere, on Debian 12, as root or as a user who may sudo. It:
#   1. installs the Debian packages it needs that are missing (apt-get);
#   2. builds onceq and onceq-worker into build/quickstart (Release); a
#      second run rebuilds only what changed;
#   3. starts its own PostgreSQL 15 on 127.0.0.1 on a free port, with its
#      data in .quickstart/pg/ (run as the `postgres` OS user when we are
#      root), or reuses the one a previous run left running; then creates
#      the database onceq_demo afresh and runs `onceq migrate` on it;
#   4. enqueues 10,000 items the way an application does: 100 transactions,
#      each inserting an order and its 100 items into onceq_items; every
#      10th transaction rolls back on purpose, so 9,000 items exist;
#   5. runs 3 onceq-worker processes (4 executors each) whose --sql handler
#      inserts one row per item into demo_ledger inside the ack transaction.
#      demo_ledger has no unique constraint: a second ack of an item would
#      show up as a second row. Early on it kills one worker with SIGKILL; its
#      session stops heartbeating, and after its 3 s expiry a reaper in one
#      of the others releases the items it held, which the others then do;
#   6. prints the verdict: ledger rows = committed items (9,000), no
#      duplicates, nothing left in onceq_items, nothing dead, no row from a
#      rolled-back transaction, and the time it took;
#   7. stops the workers and leaves PostgreSQL running so you can look (it
#      prints the psql command); `./deploy/quickstart.sh stop` stops it.
# Exit status: 0 only if the verdict holds; 1 with the reason otherwise;
# 2 for bad usage.
#
# The demo server is for looking around, not for data: it trusts every
# connection from 127.0.0.1 as any role, superuser included (no password;
# said on the terminal where it starts), and listens nowhere else.
# Everything lives in .quickstart/ (worker-N.log, postgres.log, the pid
# files, enqueue.sql); `./deploy/quickstart.sh stop && rm -rf .quickstart`
# removes it all. If the postgres user cannot reach .quickstart/ (a clone
# under /root, say), the server's files go to /var/tmp/onceq-quickstart-*.
#
# Environment:
#   ONCEQ_QUICKSTART_BUILD=DIR    use the onceq and onceq-worker binaries of
#                                 this existing build tree (DIR/coordinator/
#                                 onceq, DIR/worker/onceq-worker) instead of
#                                 building build/quickstart; only the
#                                 PostgreSQL packages are installed then.
#                                 The ctest test `quickstart` passes its own
#                                 build tree this way.
#   ONCEQ_QUICKSTART_DIR=DIR      state directory instead of .quickstart/
#                                 (the test uses a private one, so it never
#                                 touches your demo).
#   ONCEQ_QUICKSTART_TIMEOUT=S    how long the workers get to finish (180).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
SELF="./deploy/quickstart.sh"
PGBIN=/usr/lib/postgresql/15/bin

# Debian packages: everything to build and run, or only to run when
# ONCEQ_QUICKSTART_BUILD names binaries that are built already.
# (libc6-dev: gcc only recommends it, and cc cannot link without it.)
BUILD_PACKAGES="cmake gcc libc6-dev make pkg-config libpq-dev
  libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev"
RUN_PACKAGES="postgresql-15 postgresql-client-15"

# The demo.
DB=onceq_demo
QUEUE=demo
TXNS=100          # enqueue transactions
PER_TXN=100       # items per transaction
ROLLBACK_EVERY=10 # every 10th transaction rolls back
WORKERS=3
CONCURRENCY=4
VICTIM=2          # the worker that gets SIGKILL
HEARTBEAT=500ms
EXPIRY=3s
WORKER_SQL="INSERT INTO demo_ledger (item_id, n) VALUES (\$2, (\$1->>'n')::int)"
TIMEOUT_S=${ONCEQ_QUICKSTART_TIMEOUT:-180}

STATE=${ONCEQ_QUICKSTART_DIR:-$ROOT/.quickstart}

usage() {
  sed -n '2,/^set -euo pipefail$/p' "${BASH_SOURCE[0]}" | sed '$d' |
    sed 's/^# \{0,1\}//'
}

say() { printf '%s\n' "$*"; }
step() { printf '\n== %s\n' "$*"; }
die() {
  printf 'quickstart: error: %s\n' "$*" >&2
  exit 1
}

case "${1:-run}" in
run | stop | status) CMD=${1:-run} ;;
-h | --help | help)
  usage
  exit 0
  ;;
*)
  echo "quickstart: unknown command '$1'; use no argument, stop or status" >&2
  exit 2
  ;;
esac
[ $# -le 1 ] || {
  echo "quickstart: too many arguments; see $SELF --help" >&2
  exit 2
}
[[ $TIMEOUT_S =~ ^[1-9][0-9]*$ ]] ||
  { echo "quickstart: ONCEQ_QUICKSTART_TIMEOUT must be seconds" >&2; exit 2; }

IS_ROOT=0
[ "$(id -u)" -eq 0 ] && IS_ROOT=1

# Only our server: no libpq settings from the caller's shell.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE \
  PGSERVICEFILE PGSSLMODE PGOPTIONS PGAPPNAME PGCONNECT_TIMEOUT \
  PGTARGETSESSIONATTRS PGREQUIRESSL PGPASSFILE ONCEQ_DATABASE_URL DATABASE_URL

# ------------------------------------------------------------------ time
now_ms() {
  local t=${EPOCHREALTIME//[.,]/}
  echo $((t / 1000))
}
secs() { # MS -> "12.3s"
  printf '%d.%ds' $(($1 / 1000)) $((($1 % 1000) / 100))
}
T_START=$(now_ms)

# ------------------------------------------------------------------ processes
# The local-server mechanics (OS user, free port, start, stop by pid) are
# shared with test/run.sh and the benchmarks.
# shellcheck source=lib/pglocal.sh
. "$ROOT/deploy/lib/pglocal.sh"
alive() { pgl_alive "$@"; }
# is_comm PID NAME...: alive and named NAME (what a pid file promises).
is_comm() {
  local pid=$1 c n
  shift
  alive "$pid" || return 1
  c=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  for n in "$@"; do [ "$c" = "$n" ] && return 0; done
  return 1
}
is_worker() { is_comm "$1" onceq-worker; }

# ------------------------------------------------------------------ server
PG_HOME=""  # the server's folder: pgdata/, postgres.log
PG_DATA=""
PG_LOG=""
PG_OSUSER="" # "postgres" when we are root
PORT=""

# as_pg CMD...: run as the server's OS user, from its folder.
as_pg() { PGL_HOME=$PG_HOME PGL_OSUSER=$PG_OSUSER pgl_as_pg "$@"; }

# Where the server's files live; remembered in $STATE/pg_home.
locate_pg_home() {
  [ $IS_ROOT -eq 1 ] && PG_OSUSER=postgres
  if [ -f "$STATE/pg_home" ]; then
    PG_HOME=$(cat "$STATE/pg_home")
  else
    PG_HOME=$STATE/pg
  fi
  PG_DATA=$PG_HOME/pgdata
  PG_LOG=$PG_HOME/postgres.log
}

choose_pg_home() {
  locate_pg_home
  [ -f "$STATE/pg_home" ] && [ -d "$PG_HOME" ] && return 0
  PG_HOME=$STATE/pg
  mkdir -p "$PG_HOME"
  if [ -n "$PG_OSUSER" ]; then
    id "$PG_OSUSER" >/dev/null 2>&1 ||
      die "no OS user '$PG_OSUSER' to run PostgreSQL (is postgresql-15 installed?)"
    chown "$PG_OSUSER": "$PG_HOME"
    if ! runuser -u "$PG_OSUSER" -- test -w "$PG_HOME" 2>/dev/null; then
      rmdir "$PG_HOME" 2>/dev/null || true
      PG_HOME=/var/tmp/onceq-quickstart-$(printf '%s' "$STATE" | md5sum | cut -c1-8)
      say "note: the postgres user cannot reach $STATE; the server's files go to $PG_HOME"
      mkdir -p "$PG_HOME"
      chown "$PG_OSUSER": "$PG_HOME"
    fi
  fi
  chmod 700 "$PG_HOME"
  echo "$PG_HOME" >"$STATE/pg_home"
  PG_DATA=$PG_HOME/pgdata
  PG_LOG=$PG_HOME/postgres.log
}

# The postmaster's pid, from the data directory.
postmaster_pid() { pgl_postmaster_pid "$PG_DATA"; }
# Our server running on its recorded port?
server_running() {
  local pid port
  pid=$(postmaster_pid 2>/dev/null) || return 1
  pgl_serves "$pid" "$PG_DATA" || return 1 # not a stale pid file
  port=$(sed -n 4p "$PG_DATA/postmaster.pid" 2>/dev/null)
  [ -n "$port" ] || return 1
  PORT=$port
  "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 5
}

init_server() {
  say "initdb: a new cluster in $PG_DATA"
  rm -rf "$PG_DATA"
  as_pg "$PGBIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 \
    --no-locale >"$STATE/initdb.log" 2>&1 ||
    { cat "$STATE/initdb.log" >&2; die "initdb failed (log above)"; }
  as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null <<'EOF'

# ---- deploy/quickstart.sh: a local demo server
listen_addresses = '127.0.0.1'
port = 0
unix_socket_directories = ''
max_connections = 100
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  as_pg tee "$PG_DATA/pg_hba.conf" >/dev/null <<'EOF'
# TYPE  DATABASE  USER  ADDRESS        METHOD
host    all       all   127.0.0.1/32   trust
EOF
}

start_server() {
  # the last port again if it is free, so URLs printed earlier stay valid
  local last=""
  [ -f "$STATE/postgres.port" ] && last=$(cat "$STATE/postgres.port")
  PGL_HOME=$PG_HOME PGL_OSUSER=$PG_OSUSER pgl_start "$PG_DATA" "$PG_LOG" "$last" ||
    die "PostgreSQL did not start (its log: $PG_LOG)"
  PORT=$PGL_PORT
  echo "$PGL_PID" >"$STATE/postgres.pid"
  echo "$PORT" >"$STATE/postgres.port"
  say "PostgreSQL 15 started: pid $PGL_PID, 127.0.0.1:$PORT, data $PG_DATA"
  say_trust
}

# pg_hba.conf (init_server) trusts 127.0.0.1: anyone on this machine may
# connect as any role, the superuser too. A demo, so said where it starts
# rather than hidden behind a password the reader would have to carry.
say_trust() {
  say "  the demo server trusts every connection from 127.0.0.1 as any role," \
    "superuser postgres included, without a password: keep no data in it"
}

ensure_server() {
  choose_pg_home
  if server_running; then
    local pid
    pid=$(postmaster_pid)
    echo "$pid" >"$STATE/postgres.pid"
    echo "$PORT" >"$STATE/postgres.port"
    say "reusing the running PostgreSQL: pid $pid, 127.0.0.1:$PORT"
    say_trust
    return 0
  fi
  if [ -f "$PG_DATA/postmaster.pid" ]; then
    # a stale pid file (a crash, a reboot): pg_ctl start copes with it
    say "a previous server is gone; starting it again"
  fi
  [ -f "$PG_DATA/PG_VERSION" ] || init_server
  start_server
}

stop_server() {
  locate_pg_home
  local pid recorded
  pid=$(postmaster_pid 2>/dev/null || true)
  recorded=$(cat "$STATE/postgres.pid" 2>/dev/null || true)
  if ! pgl_serves "$pid" "$PG_DATA" && ! pgl_serves "$recorded" "$PG_DATA"; then
    say "PostgreSQL: not running"
    rm -f "$STATE/postgres.pid"
    return 0
  fi
  [ -n "$pid" ] || pid=$recorded
  PGL_HOME=$PG_HOME PGL_OSUSER=$PG_OSUSER pgl_stop "$PG_DATA" "$pid" "$recorded"
  pgl_serves "$pid" "$PG_DATA" && die "could not stop PostgreSQL (pid $pid)"
  rm -f "$STATE/postgres.pid"
  say "stopped PostgreSQL (pid $pid); its data stays in $PG_DATA"
}

# ------------------------------------------------------------------ workers
# Worker pids of this run, by number (1-based); the exit status once reaped.
declare -a WPID=() WRC=()

# stop_pidfile_workers: stop workers that pid files name (an earlier run
# that was killed, or `stop`). Only processes named onceq-worker.
stop_pidfile_workers() {
  local f pid n=0 stopped=()
  for f in "$STATE"/worker-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if is_worker "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      stopped+=("$pid")
    fi
    rm -f "$f"
  done
  [ ${#stopped[@]} -gt 0 ] || return 0
  for pid in "${stopped[@]}"; do
    for _ in $(seq 1 150); do
      is_worker "$pid" || break
      sleep 0.1
    done
    if is_worker "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    n=$((n + 1))
  done
  say "stopped $n demo worker(s): pid ${stopped[*]}"
}

# stop_my_workers: SIGTERM the workers this run started, wait for them to
# drain and exit, SIGKILL after 20 s. Records exit statuses in WRC.
stop_my_workers() {
  local i pid deadline
  for i in "${!WPID[@]}"; do
    pid=${WPID[$i]}
    if [ -n "$pid" ] && alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  deadline=$(($(now_ms) + 20000))
  for i in "${!WPID[@]}"; do
    pid=${WPID[$i]}
    [ -n "$pid" ] || continue
    while alive "$pid" && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.1; done
    if alive "$pid"; then
      say "worker $i (pid $pid) did not stop in 20 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    local rc=0
    wait "$pid" 2>/dev/null || rc=$?
    [ -n "${WRC[i]:-}" ] || WRC[i]=$rc
    WPID[i]=""
    rm -f "$STATE/worker-$i.pid"
  done
}

# ------------------------------------------------------------------ psql
# q SQL: one query on the demo database, unaligned, fields space-separated.
q() {
  "$PGBIN/psql" -X -A -t -q -F ' ' -v ON_ERROR_STOP=1 -h 127.0.0.1 \
    -p "$PORT" -U postgres -d "${QDB:-$DB}" -c "$1"
}

# ------------------------------------------------------------------ packages
pkg_present() {
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

install_missing_packages() {
  local want=$RUN_PACKAGES missing=() p
  [ -n "${ONCEQ_QUICKSTART_BUILD:-}" ] || want="$BUILD_PACKAGES $RUN_PACKAGES"
  command -v dpkg-query >/dev/null 2>&1 ||
    die "this script installs packages with apt-get (Debian 12); install by hand: $want"
  for p in $want; do
    pkg_present "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "packages: all present"
    return 0
  fi
  say "installing: ${missing[*]}"
  local sudo=()
  if [ $IS_ROOT -eq 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      die "missing packages (${missing[*]}) and not root; install them"
    if [ -t 0 ]; then sudo=(sudo); else sudo=(sudo -n); fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
    die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    "${missing[@]}" ||
    die "apt-get install failed: ${missing[*]}"
}

# ------------------------------------------------------------------ build
ONCEQ=""
WORKER=""
build() {
  local dir t0
  t0=$(now_ms)
  if [ -n "${ONCEQ_QUICKSTART_BUILD:-}" ]; then
    dir=$(cd "$ONCEQ_QUICKSTART_BUILD" 2>/dev/null && pwd -P) ||
      die "ONCEQ_QUICKSTART_BUILD=$ONCEQ_QUICKSTART_BUILD is not a directory"
    say "using the build tree $dir (ONCEQ_QUICKSTART_BUILD)"
  else
    dir=$ROOT/build/quickstart
    local log=$STATE/build.log
    : >"$log"
    if [ ! -f "$dir/CMakeCache.txt" ]; then
      say "configuring build/quickstart (Release)"
      cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
        -DONCEQ_BUILD_TESTS=OFF >>"$log" 2>&1 ||
        { tail -n 30 "$log" >&2; die "cmake failed (log: $log)"; }
    fi
    if [ -x "$dir/worker/onceq-worker" ]; then
      say "build/quickstart exists: rebuilding only what changed"
    else
      say "building onceq and onceq-worker into build/quickstart (about a minute)"
    fi
    cmake --build "$dir" --parallel "$(nproc 2>/dev/null || echo 2)" \
      --target onceq onceq-worker >>"$log" 2>&1 ||
      { tail -n 30 "$log" >&2; die "the build failed (log: $log)"; }
  fi
  ONCEQ=$dir/cli/onceq
  WORKER=$dir/worker/onceq-worker
  [ -x "$ONCEQ" ] || die "no $ONCEQ"
  [ -x "$WORKER" ] || die "no $WORKER"
  say "built: $ONCEQ, $WORKER ($(secs $(($(now_ms) - t0))))"
}

# ------------------------------------------------------------------ commands
cmd_stop() {
  if [ ! -d "$STATE" ]; then
    say "nothing to stop: $STATE does not exist"
    return 0
  fi
  local any=0 f
  for f in "$STATE"/worker-*.pid; do [ -f "$f" ] && any=1; done
  if [ $any -eq 1 ]; then stop_pidfile_workers; else say "workers: none running"; fi
  stop_server
}

cmd_status() {
  if [ ! -d "$STATE" ]; then
    say "not set up: $STATE does not exist (run $SELF)"
    return 0
  fi
  locate_pg_home
  local f pid n=0
  for f in "$STATE"/worker-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if is_worker "$pid"; then
      say "worker: pid $pid running (${f##*/})"
      n=$((n + 1))
    fi
  done
  [ $n -gt 0 ] || say "workers: none running"
  if server_running; then
    say "PostgreSQL: running, pid $(postmaster_pid), 127.0.0.1:$PORT, data $PG_DATA"
    local c
    if c=$(q "SELECT (SELECT count(*) FROM demo_ledger),
                     (SELECT count(*) FROM onceq_items),
                     (SELECT count(*) FROM onceq_dead),
                     (SELECT count(*) FROM onceq_sessions)" 2>/dev/null); then
      read -r a b d s <<<"$c"
      say "$DB: $a ledger rows, $b items left, $d dead, $s sessions"
    fi
    say "connect: psql postgresql://postgres@127.0.0.1:$PORT/$DB"
  else
    say "PostgreSQL: not running"
  fi
}

if [ "$CMD" = stop ]; then
  cmd_stop
  exit 0
fi
if [ "$CMD" = status ]; then
  cmd_status
  exit 0
fi

# ================================================================== run
mkdir -p "$STATE"
exec 8>"$STATE/lock"
flock -n 8 || die "another quickstart runs with $STATE; wait for it or stop it"

FINISHED=0
# shellcheck disable=SC2317 # a trap handler
on_exit() {
  local rc=$?
  trap '' INT TERM
  set +e
  local any=0 i
  [ -t 1 ] && [ "$rc" -ge 129 ] && printf '\n'
  case $rc in
  130) say "quickstart: interrupted" ;;
  143) say "quickstart: terminated" ;;
  esac
  for i in "${!WPID[@]}"; do [ -n "${WPID[$i]}" ] && any=1; done
  if [ "$any" -eq 1 ]; then
    say "stopping the demo workers"
    stop_my_workers
  fi
  if [ "$FINISHED" -eq 0 ] && [ -n "$PORT" ] && [ -f "$STATE/postgres.pid" ]; then
    say "PostgreSQL is still running (127.0.0.1:$PORT); stop it with: $SELF stop"
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "onceq quickstart: exactly-once acknowledgement, live (state in $STATE)"

step "1/6 packages"
install_missing_packages
[ -x "$PGBIN/initdb" ] || die "no $PGBIN/initdb (is postgresql-15 installed?)"

step "2/6 build"
build

step "3/6 PostgreSQL"
stop_pidfile_workers
ensure_server
URL="postgresql://postgres@127.0.0.1:$PORT/$DB"
PGOPTIONS='-c client_min_messages=warning' QDB=postgres \
  q "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
QDB=postgres q "CREATE DATABASE $DB" >/dev/null
say "created the database $DB (afresh)"
"$ONCEQ" --db "$URL" migrate | sed 's/^/onceq migrate: /' ||
  die "onceq migrate failed"
q "CREATE TABLE orders (
     id        int PRIMARY KEY,
     customer  text NOT NULL,
     lines     int NOT NULL,
     placed_at timestamptz NOT NULL DEFAULT now());
   -- No unique constraint on purpose: a second ack of an item would show
   -- up here as a second row.
   CREATE TABLE demo_ledger (
     item_id  uuid NOT NULL,
     n        int NOT NULL,
     acked_at timestamptz NOT NULL DEFAULT now());" >/dev/null
say "created the tables orders and demo_ledger (no unique constraint)"

step "4/6 enqueue"
TOTAL=$((TXNS * PER_TXN))
RB_TXNS=$((TXNS / ROLLBACK_EVERY))
COMMITTED=$(((TXNS - RB_TXNS) * PER_TXN))
enqueue_txn() { # T OUTCOME
  cat <<EOF
BEGIN;
INSERT INTO orders (id, customer, lines) VALUES ($1, 'customer-$1', $PER_TXN);
INSERT INTO onceq_items (queue, payload)
  SELECT '$QUEUE', jsonb_build_object('order', $1, 'n', $((($1 - 1) * PER_TXN)) + g)
  FROM generate_series(1, $PER_TXN) AS g;
$2;
EOF
}
{
  echo "-- generated by deploy/quickstart.sh: $TXNS orders, $PER_TXN items each;"
  echo "-- every ${ROLLBACK_EVERY}th transaction rolls back (say the card was declined)."
  for t in $(seq 1 "$TXNS"); do
    if [ $((t % ROLLBACK_EVERY)) -eq 0 ]; then
      enqueue_txn "$t" ROLLBACK
    else
      enqueue_txn "$t" COMMIT
    fi
  done
} >"$STATE/enqueue.sql"
say "$TXNS transactions like this one (order 2), each an order with its $PER_TXN items"
say "(all of them are in ${STATE/#$ROOT\//}/enqueue.sql):"
enqueue_txn 2 COMMIT | sed 's/^/    /'
say "    -- ROLLBACK instead of COMMIT for orders $ROLLBACK_EVERY, $((2 * ROLLBACK_EVERY)), ..., $TXNS"
t0=$(now_ms)
"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres \
  -d "$DB" -f "$STATE/enqueue.sql" >/dev/null ||
  die "the enqueue script failed"
read -r have orders <<<"$(q "SELECT (SELECT count(*) FROM onceq_items),
                                   (SELECT count(*) FROM orders)")"
say "enqueued $TOTAL items in $TXNS transactions in $(secs $(($(now_ms) - t0))):"
say "  $((TXNS - RB_TXNS)) committed ($COMMITTED items), $RB_TXNS rolled back ($((RB_TXNS * PER_TXN)) items)"
say "  onceq_items now holds $have items, orders $orders rows"
[ "$have" -eq "$COMMITTED" ] ||
  die "onceq_items holds $have items after the enqueue, not $COMMITTED"

step "5/6 work: $WORKERS workers x $CONCURRENCY executors, heartbeat $HEARTBEAT, expiry $EXPIRY"
say "each: onceq-worker --db $URL --queue $QUEUE \\"
say "        --concurrency $CONCURRENCY --heartbeat-interval $HEARTBEAT --session-expiry $EXPIRY \\"
say "        --sql \"$WORKER_SQL\""
T_WORK=$(now_ms)
for i in $(seq 1 "$WORKERS"); do
  # setsid: a Ctrl-C on the terminal reaches this script only; its trap
  # then stops the workers in order (SIGTERM, wait).
  setsid "$WORKER" --db "$URL" --queue "$QUEUE" --concurrency "$CONCURRENCY" \
    --heartbeat-interval "$HEARTBEAT" --session-expiry "$EXPIRY" \
    --shutdown-timeout 10s --sql "$WORKER_SQL" \
    </dev/null >"$STATE/worker-$i.log" 2>&1 8>&- &
  WPID[i]=$!
  echo "${WPID[$i]}" >"$STATE/worker-$i.pid"
done
# Each must register its session; one that exits at once (bad flags, no
# schema) says why in its log.
deadline=$(($(now_ms) + 15000))
while :; do
  for i in $(seq 1 "$WORKERS"); do
    if ! alive "${WPID[i]}"; then
      rc=0
      wait "${WPID[i]}" 2>/dev/null || rc=$?
      WPID[i]=""
      tail -n 5 "$STATE/worker-$i.log" >&2 || true
      die "worker $i exited at start (status $rc); its log: $STATE/worker-$i.log"
    fi
  done
  n=$(q "SELECT count(*) FROM onceq_sessions")
  [ "$n" -ge "$WORKERS" ] && break
  [ "$(now_ms)" -lt "$deadline" ] ||
    die "only $n of $WORKERS workers registered a session in 15 s (logs: $STATE/worker-N.log)"
  sleep 0.1
done
say "started workers 1-$WORKERS: pid ${WPID[*]}; all registered (logs: ${STATE/#$ROOT\//}/worker-N.log)"

TTY=0
[ -t 1 ] && [ "${TERM:-dumb}" != dumb ] && TTY=1
KILLED=0       # 1 once the victim got SIGKILL
KILL_MS=0
HELD=0         # items the victim held when it died
REAPED=0       # 1 once its session was reaped
FAILS=0        # consecutive failed polls
last_print=0
# The rate: acks per second over the last window of at least 1 s, and
# until the first window closes, over the time since the workers started
# (the demo often acks everything in less than a second, which used to
# show 0/s throughout). Once every item is acked it is the average of the
# whole run, frozen: the windows after it would say 0/s.
rate_ms=$T_WORK
rate_done=0
rate=0
all_acked_ms=0
done_n=0
left=$COMMITTED
progress_line() {
  local el=$(($(now_ms) - T_WORK))
  printf '  %5s  %4d/%d acked (%3d%%)  %5d/s  %2d claimed  %d live worker(s)' \
    "$(secs "$el")" "$done_n" "$COMMITTED" $((done_n * 100 / COMMITTED)) \
    "$rate" "$claimed" "$live"
}
event() { # a line of its own, also on a terminal
  [ $TTY -eq 1 ] && printf '\r\033[K'
  say "  >> $*"
}

while :; do
  el=$(($(now_ms) - T_WORK))
  victim_pid=0
  [ $KILLED -eq 1 ] && victim_pid=$VICTIM_PID
  # psql catches SIGINT, and bash skips its INT trap when the foreground
  # child handled the signal; `wait` on a background psql lets Ctrl-C through.
  q "SELECT (SELECT count(*) FROM demo_ledger),
            (SELECT count(*) FROM onceq_items WHERE queue = '$QUEUE'),
            (SELECT count(*) FROM onceq_items
               WHERE queue = '$QUEUE' AND claim IS NOT NULL),
            (SELECT count(*) FROM onceq_sessions WHERE pid = $victim_pid)" \
    >"$STATE/poll.out" 2>"$STATE/poll.err" &
  poll_rc=0
  wait $! || poll_rc=$?
  row=$(cat "$STATE/poll.out")
  if [ $poll_rc -ne 0 ]; then
    FAILS=$((FAILS + 1))
    [ $FAILS -lt 20 ] ||
      die "cannot query $DB: $(cat "$STATE/poll.err")"
    sleep 0.25
    continue
  fi
  FAILS=0
  read -r done_n left claimed victim_sessions <<<"$row"
  live=0
  for i in $(seq 1 "$WORKERS"); do
    if [ -n "${WPID[$i]:-}" ] && alive "${WPID[$i]}"; then live=$((live + 1)); fi
  done
  now=$(now_ms)
  if [ "$left" -eq 0 ]; then
    [ "$all_acked_ms" -ne 0 ] || all_acked_ms=$now
    rate=$((done_n * 1000 / (all_acked_ms - T_WORK > 0 ? all_acked_ms - T_WORK : 1)))
  elif [ $((now - rate_ms)) -ge 1000 ]; then
    rate=$(((done_n - rate_done) * 1000 / (now - rate_ms)))
    rate_ms=$now
    rate_done=$done_n
  elif [ "$rate_ms" -eq "$T_WORK" ] && [ "$now" -gt "$T_WORK" ]; then
    rate=$((done_n * 1000 / (now - T_WORK)))
  fi

  # Early on (10% acked, so it still holds claims however fast the workers
  # are): SIGKILL one worker. It cannot clean up: its claims stay until its
  # session expires and a reaper in another worker deletes it.
  if [ $KILLED -eq 0 ] && [ $((done_n * 10)) -ge "$COMMITTED" ]; then
    VICTIM_PID=${WPID[$VICTIM]}
    kill -KILL "$VICTIM_PID" 2>/dev/null || true
    KILL_MS=$(now_ms)
    wait "$VICTIM_PID" 2>/dev/null || WRC[VICTIM]=$?
    WPID[VICTIM]=""
    rm -f "$STATE/worker-$VICTIM.pid"
    KILLED=1
    HELD=$(q "SELECT count(*) FROM onceq_items i JOIN onceq_sessions s
                ON s.id = i.claim WHERE s.pid = $VICTIM_PID") || HELD='?'
    event "SIGKILL to worker $VICTIM (pid $VICTIM_PID) at $done_n/$COMMITTED acked:" \
      "it held $HELD claimed item(s). Its session no longer heartbeats; after" \
      "its $EXPIRY expiry a reaper in another worker deletes it, and that releases" \
      "its items to the others."
    continue
  fi
  if [ $KILLED -eq 1 ] && [ $REAPED -eq 0 ] && [ "$victim_sessions" -eq 0 ]; then
    REAPED=1
    by=""
    vsid=$(sed -n 's/.*session=\([0-9a-f-]*\) session registered.*/\1/p' \
      "$STATE/worker-$VICTIM.log" | head -n 1)
    for i in $(seq 1 "$WORKERS"); do
      if [ "$i" -ne "$VICTIM" ] && [ -n "$vsid" ] &&
        grep -q "session=$vsid session reaped" "$STATE/worker-$i.log"; then
        by=" by worker $i's reaper"
      fi
    done
    event "worker $VICTIM's session was reaped$by $(secs $((now - KILL_MS))) after" \
      "the kill; the $HELD item(s) it held are back in the queue for the others"
  fi

  # done once every item is acked and the killed worker's session is gone
  # (its reap is part of the demonstration)
  if [ "$left" -eq 0 ] && { [ $KILLED -eq 0 ] || [ $REAPED -eq 1 ]; }; then
    [ $TTY -eq 1 ] && printf '\r\033[K'
    progress_line
    printf '\n'
    break
  fi
  if [ "$left" -eq 0 ] && [ "${WAIT_SAID:-0}" -eq 0 ]; then
    WAIT_SAID=1
    event "every item is acked; waiting for worker $VICTIM's session to" \
      "expire ($EXPIRY) and be reaped"
  fi
  if [ $TTY -eq 1 ]; then
    printf '\r\033[K'
    progress_line
  elif [ $((now - last_print)) -ge 2000 ]; then
    progress_line
    printf '\n'
    last_print=$now
  fi
  if [ "$live" -eq 0 ]; then
    [ $TTY -eq 1 ] && printf '\n'
    for i in $(seq 1 "$WORKERS"); do
      say "--- last lines of worker-$i.log:"
      tail -n 5 "$STATE/worker-$i.log" 2>/dev/null | sed 's/^/    /'
    done
    die "every worker has exited with $left item(s) left (logs: $STATE/worker-N.log)"
  fi
  if [ "$el" -ge $((TIMEOUT_S * 1000)) ]; then
    [ $TTY -eq 1 ] && printf '\n'
    die "the workers did not finish in ${TIMEOUT_S}s: $done_n/$COMMITTED acked," \
      "$left left ($claimed claimed); see $STATE/worker-N.log"
  fi
  sleep 0.25
done
T_DRAINED=$(now_ms)
rm -f "$STATE/poll.out" "$STATE/poll.err"
DRAIN_MS=$((T_DRAINED - T_WORK))
say "all items done in $(secs "$DRAIN_MS"); stopping the workers (SIGTERM)"
stop_my_workers
for i in $(seq 1 "$WORKERS"); do
  [ "$i" -eq "$VICTIM" ] && [ $KILLED -eq 1 ] && continue
  say "worker $i exited with status ${WRC[$i]:-?}"
done

step "6/6 verdict"
read -r ledger distinct_ids distinct_n leftover dead leaked sessions \
  committed_db <<<"$(q "SELECT
     (SELECT count(*) FROM demo_ledger),
     (SELECT count(DISTINCT item_id) FROM demo_ledger),
     (SELECT count(DISTINCT n) FROM demo_ledger),
     (SELECT count(*) FROM onceq_items),
     (SELECT count(*) FROM onceq_dead),
     (SELECT count(*) FROM demo_ledger l WHERE NOT EXISTS
        (SELECT 1 FROM orders o WHERE o.id = (l.n - 1) / $PER_TXN + 1)),
     (SELECT count(*) FROM onceq_sessions),
     (SELECT coalesce(sum(lines), 0) FROM orders)")"
dups=$((ledger - distinct_ids))
reasons=()
[ "$committed_db" -eq "$COMMITTED" ] ||
  reasons+=("the committed orders hold $committed_db items, not $COMMITTED")
[ "$ledger" -eq "$COMMITTED" ] ||
  reasons+=("$ledger ledger rows for $COMMITTED committed items")
[ "$dups" -eq 0 ] || reasons+=("$dups duplicate ledger rows")
[ "$distinct_n" -eq "$ledger" ] ||
  reasons+=("$((ledger - distinct_n)) ledger rows repeat an item number")
[ "$leftover" -eq 0 ] || reasons+=("$leftover items left in onceq_items")
[ "$dead" -eq 0 ] || reasons+=("$dead items dead-lettered")
[ "$leaked" -eq 0 ] ||
  reasons+=("$leaked ledger rows from rolled-back transactions")
[ $KILLED -eq 1 ] || reasons+=("no worker was killed (the demo ran too fast?)")
for i in $(seq 1 "$WORKERS"); do
  [ "$i" -eq "$VICTIM" ] && continue
  [ "${WRC[$i]:-1}" -eq 0 ] ||
    reasons+=("worker $i exited with status ${WRC[$i]:-?} (see worker-$i.log)")
done
printf '  %-34s %6d  (%d of %d transactions committed)\n' \
  "committed items" "$COMMITTED" $((TXNS - RB_TXNS)) "$TXNS"
printf '  %-34s %6d\n' "ledger rows (one per ack)" "$ledger"
printf '  %-34s %6d  (rows - distinct item ids)\n' "duplicates" "$dups"
printf '  %-34s %6d\n' "rows from rolled-back transactions" "$leaked"
printf '  %-34s %6d\n' "left in onceq_items" "$leftover"
printf '  %-34s %6d\n' "dead-lettered (onceq_dead)" "$dead"
printf '  %-34s %6d\n' "sessions left (onceq_sessions)" "$sessions"
printf '  %-34s %6s  (%d workers x %d, worker %d SIGKILLed midway)\n' \
  "time to ack them all" "$(secs "$DRAIN_MS")" "$WORKERS" "$CONCURRENCY" \
  "$VICTIM"
summary="ledger=$ledger committed=$COMMITTED duplicates=$dups left=$leftover dead=$dead rolled_back=$leaked elapsed=$(secs "$DRAIN_MS")"
FINISHED=1
say ""
say "PostgreSQL is still running for you to look around (pid $(cat "$STATE/postgres.pid"), 127.0.0.1:$PORT):"
say "  psql $URL"
say "  e.g. SELECT item_id, count(*) FROM demo_ledger GROUP BY 1 HAVING count(*) > 1;"
say "Worker logs: $STATE/worker-N.log. Stop the server: $SELF stop"
say "Total time: $(secs $(($(now_ms) - T_START)))"
if [ ${#reasons[@]} -eq 0 ]; then
  say "verdict: PASS $summary"
  exit 0
fi
say "verdict: FAIL $summary"
for r in "${reasons[@]}"; do say "  - $r"; done
exit 1
