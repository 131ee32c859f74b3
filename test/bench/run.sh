#!/usr/bin/env bash
# test/bench/run.sh: onceq's benchmark. It prints RATIOS against ceilings
# measured in the same run on the same PostgreSQL, not pass/fail times.
#
#   ./test/bench/run.sh [--build DIR] [--quick] [--items N] [--rounds N]
#                       [-c N] [-b N] [-h|--help]
#
# It starts its own throwaway PostgreSQL 15 on 127.0.0.1 (a free port, data
# in a mktemp folder, run as the `postgres` user when we are root) with
# realistic durability: fsync on, synchronous_commit on, shared_buffers
# 256MB, max_connections 200. A trap stops it (by its pid) and every process
# the bench started, on any exit.
#
# Every throughput leg drains the same queue: N ready items (fill,
# VACUUM ANALYZE, CHECKPOINT), worked until empty, items/s = rows deleted
# (count before/after) / wall time. The same depth matters: the claim's
# cost grows with the number of ready items (section 5), so legs run at
# different depths would compare depths, not code.
#
# What it measures (C = concurrency, B = claim batch):
#   1. ceilings: pgbench (C clients, -j 2, -t N/(C*B) each, simple
#      protocol) running the exact statements the library sends
#      (lib/src/dialect.c, PostgreSQL claim) against a registered session
#      row:
#        per-item  claim B, then B ack transactions
#                  BEGIN; INSERT INTO ledger; DELETE ... AND claim = s; COMMIT
#        batched   claim B, then one DELETE ... WHERE id = ANY(ids) AND
#                  claim = s
#   2. throughput, as a ratio to its ceiling:
#        (a) noop_bench.c: public C API, C threads, oq_claim(B) +
#            oq_ack_batch                                  vs batched
#        (b) onceq-worker --sql "INSERT INTO ledger ..." --drain
#            (one ack transaction per item)                vs per-item
#        (c) onceq-worker --exec /bin/true --drain          vs batched
#      Ceiling and code run back to back in each of 5 rounds; the median
#      of the per-round ratios is reported, with the range.
#   3. enqueue-to-start latency p50/p99: an idle onceq-worker (--sql, poll
#      interval 10s, so wake-ups come from LISTEN/NOTIFY); items enqueued one
#      at a time in autocommit, 20 ms apart.
#   4. peak RSS (VmHWM) of the (b) worker.
#   5. diagnostic: one claim's server time at several queue depths, the
#      library's claim next to two rewrites (EXPLAIN ANALYZE, rolled back).
# Then a summary table. Not part of ctest; nothing here passes or fails on
# speed (exit status 0 unless the bench itself broke).
#
# Options:
#   --build DIR   build tree to use (default: build/bench). Configured as
#                 Release with -DONCEQ_BUILD_TESTS=OFF when it has no
#                 CMakeCache.txt; the targets the bench needs (onceq-worker,
#                 onceq_static) are (re)built either way.
#   --quick       one round instead of five, fewer latency samples
#                 (about a minute instead of about four).
#   --items N     queue depth N of every throughput leg (default 5000);
#                 rounded down to a multiple of C*B.
#   --rounds N    ceiling/code rounds (default 5, --quick 1).
#   -c N          concurrency C: pgbench clients, noop_bench threads,
#                 --concurrency of the workers (default 4).
#   -b N          claim batch B (default 16).
#   -h, --help    this text.
# Logs (pgbench scripts and output, workers, server) are kept in
# build/bench-logs/ of the repository; the data directory is removed.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CMDLINE="$0"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

BENCH_NAME=test/bench/run.sh
OUR_PIDS=() # workers and bench programs we started (not the server)
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

BUILD=""
QUICK=0
ITEMS=""
ROUNDS_OPT=""
C=4
B=16
while [ $# -gt 0 ]; do
  case "$1" in
  --build)
    [ $# -ge 2 ] || die "--build needs a directory"
    BUILD=$2
    shift
    ;;
  --build=*) BUILD=${1#--build=} ;;
  --quick) QUICK=1 ;;
  --items)
    [ $# -ge 2 ] || die "--items needs a number"
    ITEMS=$2
    shift
    ;;
  --rounds)
    [ $# -ge 2 ] || die "--rounds needs a number"
    ROUNDS_OPT=$2
    shift
    ;;
  -c)
    [ $# -ge 2 ] || die "-c needs a number"
    C=$2
    shift
    ;;
  -b)
    [ $# -ge 2 ] || die "-b needs a number"
    B=$2
    shift
    ;;
  -h | --help)
    usage
    exit 0
    ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
if ! [[ "$C" =~ ^[0-9]+$ ]] || [ "$C" -lt 1 ] || [ "$C" -gt 64 ]; then
  die "-c must be 1..64"
fi
if ! [[ "$B" =~ ^[0-9]+$ ]] || [ "$B" -lt 1 ] || [ "$B" -gt 256 ]; then
  die "-b must be 1..256"
fi
[ -z "$ITEMS" ] || { [[ "$ITEMS" =~ ^[0-9]+$ ]] && [ "$ITEMS" -ge 1000 ] &&
  [ "$ITEMS" -le 2000000 ]; } || die "--items must be 1000..2000000"
[ -z "$ROUNDS_OPT" ] || { [[ "$ROUNDS_OPT" =~ ^[0-9]+$ ]] &&
  [ "$ROUNDS_OPT" -ge 1 ] && [ "$ROUNDS_OPT" -le 20 ]; } ||
  die "--rounds must be 1..20"
[ -n "$BUILD" ] || BUILD="$ROOT/build/bench"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd -P)

# ---------------------------------------------------------------- sizes
# N: items per throughput leg. RUN_LIMIT_S: hard time bound per leg (a leg
# that hits it is stopped and reported from the rows it deleted).
# DEPTHS: queue depths of the claim diagnostic.
# ROUNDS: ceiling/code pairs, run back to back; the median ratio is
# reported (a shared or virtual disk's flush latency drifts by 2x within
# minutes, so a ceiling measured once, minutes away, says little).
# K_FAST: queues the fast (batched) legs drain per round.
if [ $QUICK -eq 1 ]; then
  N=${ITEMS:-5000} ROUNDS=1 K_FAST=2 RUN_LIMIT_S=90 LAT_N=100
  DEPTHS="1000 10000 50000"
else
  N=${ITEMS:-5000} ROUNDS=5 K_FAST=3 RUN_LIMIT_S=120 LAT_N=200
  DEPTHS="1000 10000 100000"
fi
ROUNDS=${ROUNDS_OPT:-$ROUNDS}
N=$((N / (C * B) * (C * B)))
[ "$N" -ge $((C * B)) ] || N=$((C * B))
PGB_T=$((N / (C * B))) # pgbench -t: scripts per client
LAT_GAP_MS=20
PGBENCH_JOBS=2
[ "$C" -lt $PGBENCH_JOBS ] && PGBENCH_JOBS=$C

# ---------------------------------------------------------------- helpers
now() { date +%s.%N; }
# calc EXPR: awk arithmetic, printed with %.6g unless a format is given.
calc() { awk "BEGIN { printf \"${2:-%.6g}\", ($1) }"; }
WORK=""
LOG_DIR="$ROOT/build/bench-logs"

bench_on_exit

# ---------------------------------------------------------------- header
echo "command: (cd $(printf '%q' "$PWD") && $CMDLINE)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo |
  sed 's/.*: //')), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' \
  /proc/meminfo) RAM, $(uname -sr)"
echo "source:  $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
  [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] && echo ' (dirty)')"
echo "sizes:   C=$C clients/threads/--concurrency, B=$B, N=$N items per drain" \
  "(pgbench -t $PGB_T per client), $ROUNDS round(s), fast legs x$K_FAST," \
  "time bound ${RUN_LIMIT_S}s per drain$([ $QUICK -eq 1 ] && echo ', --quick')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on" \
  "this machine skews every figure)"

# ---------------------------------------------------------------- build
for t in "$PGBIN/pgbench" "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBIN/psql"; do
  [ -x "$t" ] || die "missing $t (apt-get install postgresql-15)"
done
command -v cmake >/dev/null || die "cmake is missing"
command -v python3 >/dev/null || die "python3 is missing (free-port probe)"
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log "$LOG_DIR"/*.sql

log "build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DONCEQ_BUILD_TESTS=OFF >"$LOG_DIR/build.log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/build.log" >&2; die "cmake configure failed"; }
fi
cmake --build "$BUILD" -j2 --target onceq-worker onceq_static \
  >>"$LOG_DIR/build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/build.log" >&2; die "build failed (log: $LOG_DIR/build.log)"; }
BTYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
SAN=$(sed -n 's/^ONCEQ_SANITIZER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
echo "build type: ${BTYPE:-<none>}${SAN:+, sanitizer $SAN}"
case "$BTYPE" in
Release | RelWithDebInfo) ;;
*) echo "WARNING: $BUILD is not an optimised build; numbers will be low" ;;
esac
[ -z "$SAN" ] || echo "WARNING: sanitizer build; numbers are meaningless"
WORKER="$BUILD/worker/onceq-worker"
LIBA="$BUILD/lib/libonceq.a"
for f in "$WORKER" "$LIBA"; do
  [ -e "$f" ] || die "missing $f after the build"
done

WORK=$(mktemp -d /tmp/onceq-bench.XXXXXX)
NOOP="$WORK/noop_bench"
# shellcheck disable=SC2046 # pkg-config output is a list of flags
"${CC:-cc}" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall \
  -Wextra -Wno-unused-parameter -I"$ROOT/lib/include" -I"$BUILD/lib/include" \
  "$ROOT/test/bench/noop_bench.c" "$LIBA" $(pkg-config --cflags --libs libpq) \
  -pthread -o "$NOOP" >>"$LOG_DIR/build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/build.log" >&2; die "noop_bench.c did not compile"; }
TOOL="$WORK/bench_tool"
# shellcheck disable=SC2046 # pkg-config output is a list of flags
"${CC:-cc}" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall \
  -I"$ROOT/lib/include" -I"$BUILD/lib/include" -I"$ROOT/lib/src" \
  "$ROOT/test/bench/bench_tool.c" \
  "$LIBA" $(pkg-config --cflags --libs libpq) -pthread -o "$TOOL" \
  >>"$LOG_DIR/build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/build.log" >&2; die "bench_tool.c did not compile"; }
echo "built: onceq-worker, noop_bench, bench_tool (against $LIBA)"

# ---------------------------------------------------------------- server
log "PostgreSQL 15 in $WORK"
bench_server_start "$WORK" "$LOG_DIR" 200 '%m [%p] %q%u@%d ' 711 <<'EOF'
# only to count claim statements per leg (items per claim)
shared_preload_libraries = 'pg_stat_statements'
EOF

bench_own_env
ADMIN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=onceq_bench sslmode=disable"
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$DSN" -c "$1"; }
"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$ADMIN" -c 'CREATE DATABASE onceq_bench' >/dev/null
echo "server: pid $PG_PID, 127.0.0.1:$PG_PORT, $(q 'SHOW server_version'), data on" \
  "$(df -T "$PG_DATA" | awk 'NR==2 {print $2 " (" $1 ")"}')"
echo "settings: $(q "SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','shared_buffers','max_connections','wal_sync_method','max_wal_size')")"

"$TOOL" migrate "$DSN" >"$LOG_DIR/migrate.log" 2>&1 ||
  { cat "$LOG_DIR/migrate.log" >&2; die "schema migration failed"; }
q "CREATE EXTENSION pg_stat_statements" >/dev/null
q "CREATE TABLE ledger (item_id uuid PRIMARY KEY);
   CREATE TABLE lat (item_id uuid PRIMARY KEY, started_at timestamptz NOT NULL);
   CREATE UNLOGGED TABLE lat_enqueue (item_id uuid PRIMARY KEY,
     created_at timestamptz NOT NULL, committed_at timestamptz NOT NULL);"
SESS=$(q "INSERT INTO onceq_sessions (expiry, hostname, pid, version, queues)
          VALUES (interval '1 day', 'pgbench', 0, 'bench', 'default')
          RETURNING id")
echo "schema migrated; pgbench session row $SESS (expiry 1 day)"

# fill N: an empty queue (and ledger), then N ready items, analysed, with a
# checkpoint so that no run pays for the previous one's dirty pages.
fill() {
  q "TRUNCATE onceq_items, ledger, lat, lat_enqueue;
     INSERT INTO onceq_items (payload)
       SELECT jsonb_build_object('n', g) FROM generate_series(1, $1) g;"
  q "VACUUM ANALYZE onceq_items" >/dev/null
  q "CHECKPOINT" >/dev/null
}
count_items() { q "SELECT count(*) FROM onceq_items"; }

# ---------------------------------------------------------------- pgbench
# The statements, as lib/src/dialect.c sends them on PostgreSQL (printed by
# bench_tool, so the ceilings follow any change to the library's SQL), with
# their parameters written as pgbench variables or literals:
#   claim      $1 session, $2 queues, $3 limit; its RETURNING rows are
#              folded into one array for \gset ('{}' when nothing was
#              claimed: its elements are then NULL and the acks touch
#              nothing)
#   ack        $1 item, $2 session; $3 no result, $4 no history, $5 not cut
#   ack_batch  $1 items, $2 session; $3 no results, $4 no history, $5 no
#              cut flags (what the worker sends for items that keep no
#              result, with history off)
sql_of() {
  local out
  out=$("$TOOL" sql "$1") || die "bench_tool sql $1 failed"
  shift
  out=$(sed "$@" <<<"$out")
  if grep -q '\$[0-9]' <<<"$out"; then
    die "the library's SQL has parameters this bench does not know; update" \
      "test/bench/run.sh: $out"
  fi
  printf '%s' "$out"
}
LIB_CLAIM=$(sql_of claim -e "s/\$1::uuid/':sess'::uuid/g" \
  -e "s/\$2::text\[\]/'{default}'::text[]/g" -e "s/\$3::int/$B::int/g" \
  -e "s/\$4::int8/67108864::int8/g") # the byte budget: the worker's default
# The claim is one WITH statement ending in "SELECT id, queue, ... FROM u
# ORDER BY ..."; a data-modifying WITH cannot be nested, so its final
# SELECT is replaced by the fold.
[[ $LIB_CLAIM == *" SELECT id, "*" FROM u ORDER BY "* ]] ||
  die "the library's claim no longer ends in SELECT ... FROM u; update test/bench/run.sh"
CLAIM_SQL="${LIB_CLAIM% SELECT id, *} SELECT coalesce(array_agg(id ORDER BY priority DESC, run_at), '{}')::text AS ids FROM u \\gset"
{
  printf '%s\n' "$CLAIM_SQL"
  for k in $(seq 1 "$B"); do
    echo "BEGIN;"
    echo "INSERT INTO ledger (item_id) SELECT x FROM (SELECT (':ids'::uuid[])[$k] AS x) s WHERE x IS NOT NULL;"
    echo "$(sql_of ack -e "s/\$1::uuid/(':ids'::uuid[])[$k]/g" \
      -e "s/\$2::uuid/':sess'::uuid/g" -e "s/\$3::text/NULL::text/g" \
      -e "s/\$4::bool/false/g" -e "s/\$5::bool/false/g");"
    echo "COMMIT;"
  done
} >"$WORK/per_item.sql"
{
  printf '%s\n' "$CLAIM_SQL"
  echo "$(sql_of ack_batch -e "s/\$1::uuid\[\]/':ids'::uuid[]/g" \
    -e "s/\$2::uuid/':sess'::uuid/g" -e "s/\$3::text\[\]/NULL::text[]/g" \
    -e "s/\$4::bool/false/g" -e "s/\$5::bool\[\]/NULL::bool[]/g");"
} >"$WORK/batched.sql"
# fail here, not in the middle of the run, when the claim does not wrap
q "BEGIN; $(sed -e "s/:sess/$SESS/" -e 's/ \\gset$//' <<<"$CLAIM_SQL"); ROLLBACK" \
  >/dev/null || die "the library's claim does not work as a pgbench step"
cp "$WORK/per_item.sql" "$WORK/batched.sql" "$LOG_DIR/"

# sample_hwm PID OUT DEADLINE: write PID's VmHWM (kB) to OUT every 20 ms
# until it exits; SIGTERM it at DEADLINE (epoch s), SIGKILL 15 s later.
sample_hwm() {
  local pid=$1 out=$2 deadline=$3 v termed=0
  echo 0 >"$out"
  while pgl_alive "$pid"; do
    v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$v" ] && echo "$v" >"$out"
    if [ $termed -lt 2 ] && [ "$(calc "$(now) >= $deadline" '%d')" = 1 ]; then
      if [ $termed -eq 0 ]; then
        echo "  time bound (${RUN_LIMIT_S}s) reached: SIGTERM $pid" >&2
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$(calc "$deadline + 15" '%.3f')
      else
        kill -KILL "$pid" 2>/dev/null || true
      fi
      termed=$((termed + 1))
    fi
    sleep 0.02
  done
}

# drain NAME CMD...: fill N items, run CMD in the background until it
# exits (bounded by RUN_LIMIT_S), timed by the wall clock. Adds to
# LEG_ACKED, LEG_SECS, LEG_CLAIMS (claim statements, pg_stat_statements)
# and raises LEG_HWM_KB (peak RSS of CMD).
drain() {
  local name=$1
  shift
  fill "$N"
  q "SELECT pg_stat_statements_reset()" >/dev/null
  local t0 t1 pid spid after rc=0 hwm claims
  t0=$(now)
  "$@" >"$LOG_DIR/$name.log" 2>&1 &
  pid=$!
  OUR_PIDS+=("$pid")
  sample_hwm "$pid" "$WORK/$name.hwm" "$(calc "$t0 + $RUN_LIMIT_S" '%.3f')" &
  spid=$!
  wait "$pid" || rc=$?
  t1=$(now)
  wait "$spid" || true
  OUR_PIDS=()
  after=$(count_items)
  claims=$(q "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
              WHERE query LIKE '%FROM onceq_items%FOR UPDATE SKIP LOCKED%'")
  hwm=$(cat "$WORK/$name.hwm")
  LEG_ACKED=$((LEG_ACKED + N - after))
  LEG_SECS=$(calc "$LEG_SECS + $t1 - $t0" '%.3f')
  LEG_CLAIMS=$((LEG_CLAIMS + claims))
  [ "$hwm" -gt "$LEG_HWM_KB" ] && LEG_HWM_KB=$hwm
  if [ "$rc" -ne 0 ] || [ "$after" -ne 0 ]; then
    echo "  WARNING: $name exited $rc with $after of $N items left" \
      "(log: $LOG_DIR/$name.log)"
  fi
  return 0
}

# leg ROUND LABEL TIMES NAME CMD...: TIMES drains of N items; prints one
# table row and sets LEG_RATE (items/s over all its drains) and the totals.
leg() {
  local round=$1 label=$2 times=$3 name=$4 k
  shift 4
  LEG_ACKED=0 LEG_SECS=0 LEG_CLAIMS=0 LEG_HWM_KB=0
  for k in $(seq 1 "$times"); do
    drain "$name-r$round-$k" "$@"
  done
  LEG_RATE=$(calc "$LEG_ACKED / $LEG_SECS" '%.1f')
  LEG_PER_CLAIM=$(calc "$LEG_ACKED / ($LEG_CLAIMS > 0 ? $LEG_CLAIMS : 1)" '%.1f')
  printf '  %-5s %-22s %7d %8.2f %10.1f %12s' "$round" "$label" \
    "$LEG_ACKED" "$LEG_SECS" "$LEG_RATE" "$LEG_PER_CLAIM"
}
leg_header() {
  printf '  %-5s %-22s %7s %8s %10s %12s %8s\n' round leg items "s" items/s \
    items/claim ratio
}

ratio() { calc "$1 / $2" '%.2f'; }
# verdict VALUE TARGET: "met" when VALUE >= TARGET, else "MISSED"
verdict() {
  [ "$(calc "$1 >= $2" '%d')" = 1 ] && echo "met" || echo "MISSED"
}
# median X...: the median of the numbers (the lower middle one when even)
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
  END { printf "%s", a[int((NR + 1) / 2)] }'; }
span() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 }
  END { printf "%s-%s", lo, hi }'; }

# shellcheck disable=SC2016 # $2 is the worker's SQL parameter
B_SQL='INSERT INTO ledger (item_id) VALUES ($2)'
log "1+2. throughput: ceilings (pgbench, the library's SQL) and the code under test, $ROUNDS round(s)"
echo "  every row drains queues of N=$N items; C=$C, B=$B; the fast legs drain $K_FAST queues per round"
echo "  ceiling per-item: pgbench -n -M simple -c $C -j $PGBENCH_JOBS -t $PGB_T -D sess=<session> -f $LOG_DIR/per_item.sql DSN"
echo "  ceiling batched:  pgbench ... -f $LOG_DIR/batched.sql DSN"
echo "  (a) noop_bench --db DSN --threads $C --batch $B --max-items $N --max-seconds $RUN_LIMIT_S"
echo "  (b) onceq-worker --db DSN --sql '$B_SQL' --concurrency $C --drain"
echo "  (c) onceq-worker --db DSN --concurrency $C --drain --exec /bin/true"
echo "  DSN = $DSN"
leg_header
R_PI=() R_B=() R_BA=() R_A=() X_B=() X_A=() PC_B=() PC_A=()
B_HWM_KB=0
for r in $(seq 1 "$ROUNDS"); do
  leg "$r" "ceiling per-item" 1 pgbench-per-item "$PGBIN/pgbench" -n -M simple \
    -c "$C" -j "$PGBENCH_JOBS" -t "$PGB_T" -D sess="$SESS" \
    -f "$WORK/per_item.sql" "$DSN"
  echo
  pi=$LEG_RATE
  [ "$(q "SELECT count(*) FROM ledger")" -eq "$LEG_ACKED" ] ||
    echo "  WARNING: ledger rows differ from items acked (per-item script)"
  leg "$r" "(b) worker --sql" 1 worker-sql "$WORKER" --db "$DSN" \
    --sql "$B_SQL" --concurrency "$C" --drain
  x=$(ratio "$LEG_RATE" "$pi")
  printf ' %8s\n' "$x"
  R_PI+=("$pi") R_B+=("$LEG_RATE") X_B+=("$x") PC_B+=("$LEG_PER_CLAIM")
  [ "$LEG_HWM_KB" -gt "$B_HWM_KB" ] && B_HWM_KB=$LEG_HWM_KB
  [ "$(q "SELECT count(*) FROM ledger")" -eq "$LEG_ACKED" ] ||
    echo "  WARNING: ledger rows differ from items acked (worker --sql)"
  leg "$r" "ceiling batched" "$K_FAST" pgbench-batched "$PGBIN/pgbench" -n \
    -M simple -c "$C" -j "$PGBENCH_JOBS" -t "$PGB_T" -D sess="$SESS" \
    -f "$WORK/batched.sql" "$DSN"
  echo
  ba=$LEG_RATE
  leg "$r" "(a) noop_bench" "$K_FAST" noop_bench "$NOOP" --db "$DSN" \
    --threads "$C" --batch "$B" --max-items "$N" --max-seconds "$RUN_LIMIT_S"
  x=$(ratio "$LEG_RATE" "$ba")
  printf ' %8s\n' "$x"
  R_BA+=("$ba") R_A+=("$LEG_RATE") X_A+=("$x") PC_A+=("$LEG_PER_CLAIM")
done
CEIL_PER_ITEM=$(median "${R_PI[@]}")
CEIL_BATCHED=$(median "${R_BA[@]}")
leg "-" "(c) worker --exec" 1 worker-exec "$WORKER" --db "$DSN" \
  --concurrency "$C" --drain --exec /bin/true
C_RATE=$LEG_RATE C_HWM_KB=$LEG_HWM_KB C_PER_CLAIM=$LEG_PER_CLAIM
C_RATIO=$(ratio "$C_RATE" "$CEIL_BATCHED")
printf ' %8s\n' "$C_RATIO"
A_RATE=$(median "${R_A[@]}") A_RATIO=$(median "${X_A[@]}")
B_RATE=$(median "${R_B[@]}") B_RATIO=$(median "${X_B[@]}")
echo
echo "  ceilings (median of rounds): per-item $CEIL_PER_ITEM items/s," \
  "batched $CEIL_BATCHED items/s"
echo "  (a) public C API, no-op handler, batched acks: $A_RATE items/s," \
  "$A_RATIO x batched (rounds $(span "${X_A[@]}"); target >= 0.5x:" \
  "$(verdict "$A_RATIO" 0.5))"
echo "  (b) onceq-worker --sql, one ack transaction per item: $B_RATE items/s," \
  "$B_RATIO x per-item (rounds $(span "${X_B[@]}"); target >= 0.6x:" \
  "$(verdict "$B_RATIO" 0.6)); $(median "${PC_B[@]}") items per claim"
echo "  (c) onceq-worker --exec /bin/true: $C_RATE items/s, $C_RATIO x batched" \
  "($(ratio "$C_RATE" "$CEIL_PER_ITEM") x per-item; no target); $C_PER_CLAIM items per claim"
echo "  (ratios are per round, ceiling and code run back to back; the median is reported)"

# ---------------------------------------------------------------- latency
log "3. enqueue-to-start latency: $LAT_N items, one every ${LAT_GAP_MS} ms, idle worker (poll 10s: NOTIFY wakes it)"
fill 0
# shellcheck disable=SC2016 # $2 is the worker's SQL parameter
L_SQL='INSERT INTO lat (item_id, started_at) VALUES ($2, clock_timestamp())'
"$WORKER" --db "$DSN" --sql "$L_SQL" --concurrency "$C" --poll-interval 10s \
  >"$LOG_DIR/worker-latency.log" 2>&1 &
LPID=$!
OUR_PIDS+=("$LPID")
# idle = its listener connection is up and waiting
ready=0
for _ in $(seq 1 100); do
  if [ "$(q "SELECT count(*) FROM pg_stat_activity
            WHERE application_name = 'onceq-worker-listen'
              AND query LIKE 'LISTEN%' AND state = 'idle'")" -ge 1 ]; then
    ready=1
    break
  fi
  pgl_alive "$LPID" || break
  sleep 0.1
done
[ $ready -eq 1 ] ||
  { cat "$LOG_DIR/worker-latency.log" >&2; die "latency worker not listening"; }
sleep 1 # let its first claim round finish and the loop go idle
cat >"$WORK/enqueue.sql" <<EOF
INSERT INTO onceq_items (payload) VALUES ('{}') RETURNING id::text AS id, created_at::text AS created \\gset
INSERT INTO lat_enqueue (item_id, created_at, committed_at) VALUES (':id'::uuid, ':created'::timestamptz, clock_timestamp());
\\sleep $LAT_GAP_MS ms
EOF
cp "$WORK/enqueue.sql" "$LOG_DIR/"
timeout -k 10 120 "$PGBIN/pgbench" -n -M simple -c 1 -t "$LAT_N" \
  -f "$WORK/enqueue.sql" "$DSN" >"$LOG_DIR/pgbench-enqueue.log" 2>&1 ||
  { tail -n 20 "$LOG_DIR/pgbench-enqueue.log" >&2; die "enqueue pgbench failed"; }
for _ in $(seq 1 300); do
  [ "$(q "SELECT count(*) FROM lat")" -ge "$LAT_N" ] && break
  sleep 0.1
done
stop_pid "$LPID" 400
OUR_PIDS=()
# From commit: committed_at is clock_timestamp() of the client's next
# statement, right after COMMIT returned (one loopback round trip late).
# From created_at: now() at the INSERT's start, so it also counts the
# enqueue's own INSERT and commit flush.
read -r L_N L_P50 L_P99 L_MAX L_CP50 L_CP99 < <(q "
  SELECT count(*),
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY c)::numeric, 2),
    round(percentile_cont(0.99) WITHIN GROUP (ORDER BY c)::numeric, 2),
    round(max(c)::numeric, 2),
    round(percentile_cont(0.5) WITHIN GROUP (ORDER BY cr)::numeric, 2),
    round(percentile_cont(0.99) WITHIN GROUP (ORDER BY cr)::numeric, 2)
  FROM (SELECT extract(epoch FROM l.started_at - e.committed_at) * 1000 AS c,
               extract(epoch FROM l.started_at - e.created_at) * 1000 AS cr
        FROM lat l JOIN lat_enqueue e USING (item_id)) s" | tr '|' ' ')
echo "  $L_N of $LAT_N items started"
echo "  from commit:     p50 $L_P50 ms, p99 $L_P99 ms, max $L_MAX ms" \
  "(target p50 <= 3 ms: $(verdict "$(calc "3 - ${L_P50:-999}")" 0))"
echo "  from created_at: p50 $L_CP50 ms, p99 $L_CP99 ms (includes the enqueue's own commit)"
echo "  worker:  onceq-worker --db DSN --sql '$L_SQL' --concurrency $C --poll-interval 10s"
echo "  enqueue: pgbench -n -M simple -c 1 -t $LAT_N -f $LOG_DIR/enqueue.sql DSN"

# ---------------------------------------------------------------- rss
log "4. worker peak RSS (VmHWM, sampled every 20 ms until exit)"
B_HWM=$(calc "$B_HWM_KB / 1024" '%.1f')
C_HWM=$(calc "$C_HWM_KB / 1024" '%.1f')
echo "  (b) --sql worker:  $B_HWM MiB"
echo "  (c) --exec worker: $C_HWM MiB"

# ---------------------------------------------------------------- claim
log "5. diagnostic: one claim of $B, server time (EXPLAIN ANALYZE, rolled back, median of 5)"
# lib: the library's claim (bench_tool sql claim), as is. join: its UPDATE
# joined to the CTE (what the library did before: the planner hashed the
# table). tid: the chosen rows found by ctid, locked by the CTE (a lead for
# the claim's cost: docs/benchmarks.md).
CLAIM_LIB=${LIB_CLAIM//:sess/$SESS}
claim_pick() { # $1: the extra column of c
  printf '%s' "WITH c AS MATERIALIZED (
 SELECT x.id$1 FROM unnest('{default}'::text[]) AS q(name)
 CROSS JOIN LATERAL (SELECT id, ctid, priority, run_at FROM onceq_items
   WHERE claim IS NULL AND queue = q.name AND run_at <= now()
   AND attempts < max_attempts ORDER BY priority DESC, run_at
   LIMIT $B::int FOR UPDATE SKIP LOCKED) x
 ORDER BY x.priority DESC, x.run_at LIMIT $B::int)
UPDATE onceq_items i SET claim = '$SESS'::uuid, claimed_at = now(),
 attempts = i.attempts + 1"
}
CLAIM_JOIN="$(claim_pick '') FROM c WHERE i.id = c.id
 RETURNING i.id::text, i.queue, i.payload::text, i.attempts"
CLAIM_TID="$(claim_pick ', x.ctid') WHERE i.ctid = ANY (ARRAY(SELECT ctid FROM c))
 RETURNING i.id::text, i.queue, i.payload::text, i.attempts"
printf '  %-8s %14s %14s %14s\n' "depth" "lib" "join" "tid"
DIAG_LAST=""
for d in $DEPTHS; do
  fill "$d"
  row=""
  for v in "$CLAIM_LIB" "$CLAIM_JOIN" "$CLAIM_TID"; do
    med=$(for _ in 1 2 3 4 5; do
      printf 'BEGIN;\nEXPLAIN (ANALYZE) %s;\nROLLBACK;\n' "$v"
    done | "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$DSN" |
      sed -n 's/^Execution Time: \([0-9.]*\) ms/\1/p' | sort -g |
      awk '{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] }')
    row+=$(printf ' %11s ms' "$med")
  done
  printf '  %-8s%s\n' "$d" "$row"
  DIAG_LAST="$d:$row"
done
echo "  lib = lib/src/dialect.c as sent; join = its UPDATE joined to the CTE;" \
  "tid = the rows found by ctid"

# ---------------------------------------------------------------- summary
log "summary (C=$C, B=$B, N=$N, $ROUNDS round(s)$([ $QUICK -eq 1 ] && echo ', --quick'))"
row() { printf '%-46s %16s %14s %8s\n' "$@"; }
row "measure" "value" "ratio (range)" "target"
row "ceiling per-item (pgbench, median)" "$CEIL_PER_ITEM items/s" "1" ""
row "ceiling batched (pgbench, median)" "$CEIL_BATCHED items/s" "1" ""
row "(a) C API no-op + oq_ack_batch vs batched" "$A_RATE items/s" \
  "$A_RATIO ($(span "${X_A[@]}"))" ">= 0.5"
row "(b) worker --sql vs per-item" "$B_RATE items/s" \
  "$B_RATIO ($(span "${X_B[@]}"))" ">= 0.6"
row "(c) worker --exec /bin/true vs batched" "$C_RATE items/s" "$C_RATIO" ""
row "enqueue-to-start p50 (from commit)" "$L_P50 ms" "" "<= 3"
row "enqueue-to-start p99 (from commit)" "$L_P99 ms" "" ""
row "enqueue-to-start p50/p99 (from created_at)" "$L_CP50/$L_CP99 ms" "" ""
row "(b) worker peak RSS (VmHWM)" "$B_HWM MiB" "" ""
row "items per claim: (b) / (c) worker" "$(median "${PC_B[@]}") / $C_PER_CLAIM" "" ""
read -r dd dl _ de _ dx _ <<<"${DIAG_LAST//:/ }"
row "one claim at depth $dd: lib/join/tid" "$dl/$de/$dx ms" "" ""
echo "targets: (a) $(verdict "$A_RATIO" 0.5), (b) $(verdict "$B_RATIO" 0.6)," \
  "latency p50 $(verdict "$(calc "3 - ${L_P50:-999}")" 0)"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
echo "logs: $LOG_DIR"
