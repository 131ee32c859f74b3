#!/usr/bin/env bash
# test/bench/parts_bench.sh: static partitions against none, as RATIOS.
#
#   ./test/bench/parts_bench.sh [--build DIR] [--items N] [--workers W]
#       [-c N] [-b N] [--partitions P] [--isolation rc|serializable|both]
#       [--rounds R] [-h|--help]
#
# Same items, same database server, same worker processes; only the flag
# differs. Each leg: a fresh database under the leg's isolation (ALTER
# DATABASE ... SET default_transaction_isolation), W `onceq-worker` processes
# (--concurrency C, --batch B, --sql "INSERT INTO ledger ...": one ack
# transaction per item), started on an empty queue and, for the partitioned
# leg, left until the ownership rows match the blocks; then N items are
# inserted in one transaction and the leg ends when the queue is empty.
#
# Per leg it reports:
#   items/s      N / (insert commit -> queue empty); and "90%/s", the rate
#                until 90% are done (without the tail, where a static
#                assignment waits for its slowest block)
#   claim p50/p99  server-side duration of the claim statements (both claims
#                start "WITH c AS MATERIALIZED"), from the server log
#                (log_min_duration_statement = 0 on the leg's database, so
#                every statement is logged in both legs alike)
#   lock waits   pg_locks sampled every 100 ms: ungranted locks in the leg's
#                database, summed over samples (and the largest sample);
#                and ">10ms": lock waits on the queue's rows that lasted
#                longer than 10 ms (log_lock_waits, deadlock_timeout = 10ms;
#                waits on the handler's own ledger table are not counted)
#   ser. fail    "could not serialize access" errors in the server log
#                (each one is a restart the library took)
#   rollbacks    pg_stat_database.xact_rollback delta (restarts, deadlocks,
#                claim/ack statements that failed)
#   ledger       rows / distinct ids: must equal N (exactly once)
# and the ratios partitioned / unpartitioned. Nothing passes or fails on
# speed; the exit status is 0 unless the bench itself broke or a ledger was
# not exact.
#
# It starts its own throwaway PostgreSQL 15 on 127.0.0.1 (a free port, data
# in a mktemp folder, run as the `postgres` user when we are root) with
# fsync on, synchronous_commit on, shared_buffers 256MB, max_connections
# 300, log_lock_waits on and deadlock_timeout 10ms (both legs alike). A trap
# stops it and every process the bench started, on any exit.
#
# Options:
#   --build DIR        build tree (default build/parts-bench; configured
#                      Release without tests when it has no CMakeCache.txt)
#   --items N          items per leg (default 20000)
#   --workers W        worker processes (default 8)
#   -c N               --concurrency of each worker (default 4)
#   -b N               --batch of each worker (default 16)
#   --partitions P     P for the partitioned legs (default 64)
#   --isolation I      rc, serializable or both (default both)
#   --rounds R         unpartitioned/partitioned pairs per isolation
#                      (default 1); figures are medians over rounds
#   -h, --help         this text
# Logs (workers, server) are kept in build/parts-bench-logs/.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CMDLINE="$0"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

BENCH_NAME=test/bench/parts_bench.sh
OUR_PIDS=()
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

BUILD=""
N=20000
W=8
C=4
B=16
P=64
ISO=both
ROUNDS=1
num() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
  die "$1 must be a whole number from $3 to $4"; }
while [ $# -gt 0 ]; do
  case "$1" in
  --build) [ $# -ge 2 ] || die "--build needs a directory"; BUILD=$2; shift ;;
  --items) [ $# -ge 2 ] || die "--items needs N"; num --items "$2" 100 2000000; N=$2; shift ;;
  --workers) [ $# -ge 2 ] || die "--workers needs W"; num --workers "$2" 1 64; W=$2; shift ;;
  -c) [ $# -ge 2 ] || die "-c needs N"; num -c "$2" 1 64; C=$2; shift ;;
  -b) [ $# -ge 2 ] || die "-b needs N"; num -b "$2" 1 1024; B=$2; shift ;;
  --partitions) [ $# -ge 2 ] || die "--partitions needs P"; num --partitions "$2" 1 1024; P=$2; shift ;;
  --isolation)
    [ $# -ge 2 ] || die "--isolation needs rc, serializable or both"
    case "$2" in rc | serializable | both) ISO=$2 ;; *) die "--isolation: rc, serializable or both" ;; esac
    shift
    ;;
  --rounds) [ $# -ge 2 ] || die "--rounds needs R"; num --rounds "$2" 1 20; ROUNDS=$2; shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ -n "$BUILD" ] || BUILD="$ROOT/build/parts-bench"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd -P)
LOG_DIR="$ROOT/build/parts-bench-logs"
LEG_LIMIT_S=600 # a leg that takes longer is stopped and reported as such

# ---------------------------------------------------------------- server
WORK=""
bench_on_exit

for t in "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBIN/psql"; do
  [ -x "$t" ] || die "missing $t (apt-get install postgresql-15)"
done
command -v cmake >/dev/null || die "cmake is missing"
command -v python3 >/dev/null || die "python3 is missing (free-port probe)"
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log

echo "command: (cd $(printf '%q' "$PWD") && $CMDLINE)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM"
echo "source:  $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
  [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] && echo ' (dirty)')"
echo "sizes:   N=$N items, W=$W workers x C=$C executors, batch $B, P=$P," \
  "$ROUNDS round(s), isolation $ISO"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews every figure)"

log "build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DONCEQ_BUILD_TESTS=OFF >"$LOG_DIR/cmake.log" 2>&1 ||
    { cat "$LOG_DIR/cmake.log" >&2; die "cmake configure failed"; }
fi
cmake --build "$BUILD" -j2 --target onceq-worker onceq >"$LOG_DIR/build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/build.log" >&2; die "build failed"; }
WORKER="$BUILD/worker/onceq-worker"
CLI="$BUILD/cli/onceq"

log "server"
WORK=$(mktemp -d /tmp/onceq-parts-bench.XXXXXX)
# The log is parsed per database (" $db "), hence the short prefix.
bench_server_start "$WORK" "$LOG_DIR" 300 '%m [%p] %d ' 700 <<'EOF'
log_parameter_max_length = 0
log_lock_waits = on
deadlock_timeout = 10ms
EOF
ADMIN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
psql_admin() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$ADMIN" "$@"; }
echo "postgres: pid $PG_PID, 127.0.0.1:$PG_PORT"

# ---------------------------------------------------------------- a leg
SQL='INSERT INTO ledger (item_id, n) VALUES ($2, ($1->>'"'n'"')::int)'
RESULTS=() # "iso|mode|round|items_s|p50|p99|claims|lockw|lockmax|serfail|rollbacks|ledger|waits10|items90_s"

# The bench's own reads run under READ COMMITTED, so that a serializable
# leg never picks them as the victim of a serialization failure.
db_sql() {
  PGOPTIONS='-c default_transaction_isolation=read\ committed' \
    "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"
}

mismatch_sql() { # ownership rows that differ from the blocks, for P=$1
  cat <<EOF
WITH m AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS i,
           count(*) OVER () AS k FROM onceq_sessions
           WHERE partitioned AND heartbeated_at + expiry >= now()),
want AS (SELECT g AS part, m.id FROM generate_series(0, $1 - 1) g
         JOIN m ON g >= m.i * $1 / m.k AND g < (m.i + 1) * $1 / m.k)
SELECT (SELECT count(*) FROM want w LEFT JOIN onceq_session_parts sp
        ON sp.part = w.part WHERE sp.session_id IS DISTINCT FROM w.id)
     + (SELECT count(*) FROM onceq_session_parts sp LEFT JOIN want w
        ON w.part = sp.part WHERE w.part IS NULL)
     + (SELECT CASE WHEN count(*) = $W THEN 0 ELSE 1 END FROM m)
EOF
}

run_leg() { # run_leg ISO MODE ROUND
  local iso=$1 mode=$2 round=$3 db dsn flags=() i
  db="pb_${mode}_$(tr ' ' '_' <<<"$iso")_$round"
  dsn="host=127.0.0.1 port=$PG_PORT user=postgres dbname=$db sslmode=disable"
  psql_admin -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" \
    >/dev/null 2>&1
  psql_admin -c "ALTER DATABASE $db SET default_transaction_isolation = '$iso'" \
    -c "ALTER DATABASE $db SET log_min_duration_statement = 0" >/dev/null
  "$CLI" --db "$dsn" migrate >/dev/null
  db_sql "$dsn" "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL)"
  [ "$mode" = partitioned ] && flags=(--partitioned) &&
    "$CLI" --db "$dsn" parts set "$P" >/dev/null
  for i in $(seq 1 "$W"); do
    "$WORKER" --db "$dsn" --concurrency "$C" --batch "$B" "${flags[@]}" \
      --log-level warn --sql "$SQL" >"$LOG_DIR/$db-w$i.log" 2>&1 </dev/null &
    OUR_PIDS+=($!)
  done
  # wait for every session (and, partitioned, converged ownership)
  local ready=0
  for _ in $(seq 1 300); do
    if [ "$mode" = partitioned ]; then
      [ "$(db_sql "$dsn" "$(mismatch_sql "$P")")" = 0 ] && ready=1
    else
      [ "$(db_sql "$dsn" 'SELECT count(*) FROM onceq_sessions')" = "$W" ] && ready=1
    fi
    [ $ready = 1 ] && break
    sleep 0.1
  done
  [ $ready = 1 ] || die "$db: workers did not register/converge in 30 s"
  local rb0 log0
  rb0=$(db_sql "$dsn" "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()")
  log0=$(wc -l <"$WORK/postgres.log")
  # sample ungranted locks every 100 ms
  "$PGBIN/psql" -X -q -At -d "$ADMIN" >"$LOG_DIR/$db-locks.txt" 2>/dev/null <<EOF &
SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
WHERE NOT l.granted AND d.datname = '$db' \watch 0.1
EOF
  local sampler=$!
  OUR_PIDS+=("$sampler")
  local t0 t1 left=-1 ts0 ts1
  t0=$(date +%s%3N)
  ts0=$(date -u '+%Y-%m-%d %H:%M:%S.%3N')
  db_sql "$dsn" "INSERT INTO onceq_items (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null
  local t90=""
  for _ in $(seq 1 $((LEG_LIMIT_S * 10))); do
    left=$(db_sql "$dsn" "SELECT count(*) FROM onceq_items")
    if [ -z "$t90" ] && [ "$left" -le $((N / 10)) ]; then t90=$(date +%s%3N); fi
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  t1=$(date +%s%3N)
  [ -n "$t90" ] || t90=$t1
  ts1=$(date -u '+%Y-%m-%d %H:%M:%S.%3N')
  kill -TERM "$sampler" 2>/dev/null || true
  local rb1
  rb1=$(db_sql "$dsn" "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()")
  stop_our_pids
  local ledger distinct
  ledger=$(db_sql "$dsn" "SELECT count(*) FROM ledger")
  distinct=$(db_sql "$dsn" "SELECT count(DISTINCT item_id) FROM ledger")
  # the leg's log lines between the insert and the empty queue (the
  # timestamps lead each line: "2024-05-01 09:30:00.123 UTC [pid] db ...")
  tail -n +"$((log0 + 1))" "$WORK/postgres.log" | grep -a " $db " |
    awk -v a="$ts0" -v b="$ts1" '{ t = substr($0, 1, 23) } t >= a && t <= b' \
      >"$LOG_DIR/$db-server.log" || true
  local stats
  stats=$(grep -a 'duration: .* ms  execute <unnamed>: WITH c AS MATERIALIZED' \
    "$LOG_DIR/$db-server.log" | sed -E 's/.*duration: ([0-9.]+) ms.*/\1/' |
    sort -g | awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "- - 0"; exit }
      i50 = int(0.50 * NR); if (i50 < 1) i50 = 1
      i99 = int(0.99 * NR); if (i99 < 1) i99 = 1
      printf "%.3f %.3f %d\n", v[i50], v[i99], NR }')
  local serfail lockw lockmax waits10
  serfail=$(grep -ac 'could not serialize access' "$LOG_DIR/$db-server.log" || true)
  # lock waits over 10 ms on the queue's rows (the log line's CONTEXT or
  # STATEMENT names an onceq_ relation); the others (e.g. extending the
  # handler's ledger table) are the handler's own
  waits10=$(awk '
    /still waiting for/ { match($0, /\[[0-9]+\]/); w[substr($0, RSTART, RLENGTH)] = 1; next }
    /(CONTEXT|STATEMENT):/ { match($0, /\[[0-9]+\]/); p = substr($0, RSTART, RLENGTH)
      if (p in w) { if ($0 ~ /onceq_/) q++; delete w[p] } }
    END { print q + 0 }' "$LOG_DIR/$db-server.log")
  lockw=$(awk '/^[0-9]+$/ { s += $1 } END { print s + 0 }' "$LOG_DIR/$db-locks.txt")
  lockmax=$(awk '/^[0-9]+$/ { if ($1 > m) m = $1 } END { print m + 0 }' "$LOG_DIR/$db-locks.txt")
  local secs items_s
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')
  items_s=$(awk -v n="$N" -v l="$left" -v s="$secs" 'BEGIN { printf "%.0f", (n - l) / s }')
  local items90_s
  items90_s=$(awk -v n="$N" -v a="$t0" -v b="$t90" \
    'BEGIN { printf "%.0f", 0.9 * n / ((b - a) / 1000) }')
  read -r p50 p99 nclaims <<<"$stats"
  echo "$iso $mode round $round: $items_s items/s ($secs s, $left left;" \
    "first 90%: $items90_s items/s)," \
    "claim p50 $p50 ms p99 $p99 ms ($nclaims claims), lock waits $lockw" \
    "(max $lockmax), queue lock waits > 10 ms $waits10, serialization" \
    "failures $serfail," \
    "rollbacks $((rb1 - rb0))," \
    "ledger $ledger/$distinct"
  RESULTS+=("$iso|$mode|$round|$items_s|$p50|$p99|$nclaims|$lockw|$lockmax|$serfail|$((rb1 - rb0))|$ledger/$distinct|$waits10|$items90_s")
  if [ "$ledger" != "$N" ] || [ "$distinct" != "$N" ]; then
    echo "LEDGER NOT EXACT: $ledger rows, $distinct distinct, want $N" >&2
    LEDGER_BAD=1
  fi
  psql_admin -c "DROP DATABASE IF EXISTS $db" >/dev/null
}

LEDGER_BAD=0
isos=()
case "$ISO" in
rc) isos=("read committed") ;;
serializable) isos=(serializable) ;;
both) isos=("read committed" serializable) ;;
esac
for iso in "${isos[@]}"; do
  for r in $(seq 1 "$ROUNDS"); do
    log "$iso, round $r: unpartitioned"
    run_leg "$iso" unpartitioned "$r"
    log "$iso, round $r: partitioned (P=$P)"
    run_leg "$iso" partitioned "$r"
  done
done

# ---------------------------------------------------------------- summary
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'; }
field() { # field ISO MODE INDEX: the median of that column over rounds
  local r
  for r in "${RESULTS[@]}"; do
    IFS='|' read -r -a f <<<"$r"
    if [ "${f[0]}" = "$1" ] && [ "${f[1]}" = "$2" ]; then echo "${f[$3]}"; fi
  done | median
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print (a + 0 == 0 ? "1 (both 0)" : "inf"); else printf "%.3f", a / b }'; }
echo
echo "=============================== partitions: summary ==============================="
printf '%-15s %-13s %7s %7s %6s %6s %6s %7s %5s %6s %8s %9s\n' isolation mode \
  items/s "90%/s" "p50ms" "p99ms" claims "lock w." max ">10ms" ser.fail rollbacks
for iso in "${isos[@]}"; do
  for mode in unpartitioned partitioned; do
    printf '%-15s %-13s %7s %7s %6s %6s %6s %7s %5s %6s %8s %9s\n' "$iso" "$mode" \
      "$(field "$iso" $mode 3)" "$(field "$iso" $mode 13)" \
      "$(field "$iso" $mode 4)" "$(field "$iso" $mode 5)" \
      "$(field "$iso" $mode 6)" "$(field "$iso" $mode 7)" "$(field "$iso" $mode 8)" \
      "$(field "$iso" $mode 12)" "$(field "$iso" $mode 9)" "$(field "$iso" $mode 10)"
  done
  echo "  $iso, partitioned / unpartitioned:" \
    "throughput $(ratio "$(field "$iso" partitioned 3)" "$(field "$iso" unpartitioned 3)")" \
    "(first 90%: $(ratio "$(field "$iso" partitioned 13)" "$(field "$iso" unpartitioned 13)"))," \
    "claim p50 $(ratio "$(field "$iso" partitioned 4)" "$(field "$iso" unpartitioned 4)")," \
    "p99 $(ratio "$(field "$iso" partitioned 5)" "$(field "$iso" unpartitioned 5)")," \
    "lock waits sampled $(ratio "$(field "$iso" partitioned 7)" "$(field "$iso" unpartitioned 7)")," \
    "> 10 ms $(ratio "$(field "$iso" partitioned 12)" "$(field "$iso" unpartitioned 12)")," \
    "serialization failures $(ratio "$(field "$iso" partitioned 9)" "$(field "$iso" unpartitioned 9)")," \
    "rollbacks $(ratio "$(field "$iso" partitioned 10)" "$(field "$iso" unpartitioned 10)")"
done
echo "logs: build/parts-bench-logs/"
[ "$LEDGER_BAD" = 0 ]
