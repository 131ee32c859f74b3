#!/usr/bin/env bash
# test/bench/keys_bench.sh: what ordering keys and queue controls (issue 23,
# schema v5 and v6) cost, and how fast a pause or a new limit takes hold,
# as RATIOS measured in one run on one private PostgreSQL 15. A benchmark,
# not a test: not in ctest; nothing passes or fails on speed.
#
#   ./test/bench/keys_bench.sh [--build DIR] [--base-rev REV] [--n N]
#       [--keys K] [--layout interleaved|overtime|grouped] [--rounds R]
#       [--workers W] [--partitions P] [--legs LIST] [-h|--help]
#
# Legs (--legs, comma-separated; default keys,parts,overhead,control):
#   keys      one `onceq-worker --sql 'INSERT INTO ledger (item_id) VALUES
#             ($2)' --drain` at its defaults: N items without a key against
#             the same N items spread over K ordering keys (N/K per key),
#             alternately (plain keyed, keyed plain, ...); items/s = N / the
#             worker's own --drain clock, as test/bench/ledger_ab.sh reads
#             it. Each fill: TRUNCATE, INSERT, VACUUM ANALYZE, CHECKPOINT.
#   parts     W workers --partitioned on P parts (no --drain), started on an
#             empty queue and left until the ownership rows match the blocks;
#             per round N items are inserted in one transaction, keyed or
#             not (alternately), and timed from that commit until the queue
#             is empty (polled every 20 ms on one connection by
#             onceq_bench_tool wait_empty).
#   overhead  the keys leg's plain drain, HEAD's worker against REV's (the
#             commit before the features; default 7afc633 = a2c5408^1, the
#             last without schema v5), each on its own database migrated by
#             its own build, alternately: what a queue with no key, no limit
#             and no pause pays for their existence.
#   control   two workers (--concurrency 4, default poll interval 1 s) drain
#             N items whose handler sleeps 10 ms, while the bench runs, about
#             1.5 s apart: `onceq pause`, `onceq resume`, `onceq limit
#             --concurrency 3`, `--concurrency 6`, `--concurrency none`. The
#             handler records each item's claimed_at (the claim statement's
#             now()) in its ledger; a sampler reads the claimed count every
#             10 ms. Printed: claims that started after the pause committed,
#             the resume's first claim, and for each limit how long until
#             the claimed count keeps to it (lowered) or first passes the
#             old one (raised).
# Keyed legs also check the ledger: per key, acknowledgements committed in
# enqueue order (the ledger's serial against enqueue_seq); every leg checks
# N rows, N distinct ids, 0 left. The exit status is 0 unless the bench
# broke or a check failed.
#
# Options:
#   --build DIR    HEAD's build tree (default build/bench; configured Release
#                  when it has no CMakeCache.txt; onceq-worker, onceq and
#                  onceq_bench_tool are (re)built)
#   --base-rev REV the overhead leg's older commit (default 7afc633), built
#                  from `git archive` in build/keys-bench-base (kept; rebuilt
#                  when REV changes)
#   --n N          items per drain (default 20000)
#   --keys K       distinct keys in the keyed drains (default 1000)
#   --layout L     interleaved: item g has key g mod K (keys arrive mixed, as
#                  events of many customers do), all N in one INSERT (one
#                  run_at; the default); overtime: the same keys with run_at
#                  1 ms apart in enqueue order, as if enqueued over 20 s
#                  (plain drains too); grouped: one INSERT, a key's items
#                  one after the other
#   --rounds R     rounds per leg (default 5); figures are medians of the
#                  per-round ratios, with their range
#   --workers W    the parts leg's workers (default 4)
#   --partitions P the parts leg's parts (default 64)
#   --legs LIST    which legs (default keys,parts,overhead,control)
#   -h, --help     this text
# Logs: build/keys-bench-logs/ of the repository.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CMDLINE="./test/bench/keys_bench.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done
# shellcheck disable=SC2034 # BENCH_NAME, OUR_PIDS: read by bench_server.sh
BENCH_NAME=test/bench/keys_bench.sh
OUR_PIDS=()
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

BUILD="" BASE_REV=7afc633 N=20000 K=1000 LAYOUT=interleaved ROUNDS=5 W=4 P=64
LEGS=keys,parts,overhead,control
num() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
  die "$1 must be a whole number from $3 to $4"; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case "$1" in -h | --help) ;; *) die "$1 needs a value" ;; esac
  case "$1" in
  --build) BUILD=$2 ;;
  --base-rev) BASE_REV=$2 ;;
  --n) num --n "$2" 100 2000000; N=$2 ;;
  --keys) num --keys "$2" 1 1000000; K=$2 ;;
  --layout)
    case "$2" in interleaved | overtime | grouped) LAYOUT=$2 ;; *) die "--layout: interleaved, overtime or grouped" ;; esac
    ;;
  --rounds) num --rounds "$2" 1 21; ROUNDS=$2 ;;
  --workers) num --workers "$2" 1 32; W=$2 ;;
  --partitions) num --partitions "$2" 1 1024; P=$2 ;;
  --legs) LEGS=$2 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
  shift 2
done
for l in ${LEGS//,/ }; do
  case "$l" in keys | parts | overhead | control) ;; *) die "--legs: unknown leg '$l'" ;; esac
done
leg_on() { [[ ",$LEGS," == *",$1,"* ]]; }
[ -n "$BUILD" ] || BUILD="$ROOT/build/bench"
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd -P)
LOG_DIR="$ROOT/build/keys-bench-logs"
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log "$LOG_DIR"/*.txt
WORK=""
bench_on_exit

for t in "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBIN/psql"; do
  [ -x "$t" ] || die "missing $t (apt-get install postgresql-15)"
done

echo "command: (cd $(printf '%q' "$PWD") && $CMDLINE)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
echo "source:  $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(
  [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] && echo ' (dirty)')"
echo "sizes:   N=$N, K=$K keys ($LAYOUT, $((N / K)) per key), $ROUNDS rounds," \
  "parts leg W=$W x P=$P, legs $LEGS"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on this machine skews every figure)"

# ---------------------------------------------------------------- builds
# build_tree DIR SRC: a Release tree of SRC in DIR with the three programs.
build_tree() {
  local dir=$1 src=$2
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release >"$LOG_DIR/cmake-$(basename "$dir").log" 2>&1 ||
      { tail -n 30 "$LOG_DIR/cmake-$(basename "$dir").log" >&2; die "cmake configure of $dir failed"; }
  fi
  cmake --build "$dir" -j2 --target onceq-worker onceq onceq_bench_tool \
    >"$LOG_DIR/build-$(basename "$dir").log" 2>&1 ||
    { tail -n 30 "$LOG_DIR/build-$(basename "$dir").log" >&2; die "build of $dir failed"; }
  grep -q '^CMAKE_BUILD_TYPE:[A-Z]*=Release$' "$dir/CMakeCache.txt" ||
    echo "WARNING: $dir is not a Release build; numbers will be low"
}
log "build ($BUILD)"
build_tree "$BUILD" "$ROOT"
WORKER="$BUILD/worker/onceq-worker" CLI="$BUILD/cli/onceq"
TOOL="$BUILD/test/bench/onceq_bench_tool"
if leg_on overhead; then
  BASE_DIR="$ROOT/build/keys-bench-base"
  BASE_SHA=$(git -C "$ROOT" rev-parse --verify "$BASE_REV^{commit}") ||
    die "--base-rev $BASE_REV: no such commit"
  if [ "$(cat "$BASE_DIR/rev" 2>/dev/null || true)" != "$BASE_SHA" ]; then
    log "build of $BASE_REV (git archive into $BASE_DIR)"
    rm -rf "$BASE_DIR"
    mkdir -p "$BASE_DIR/src"
    git -C "$ROOT" archive "$BASE_SHA" | tar -x -C "$BASE_DIR/src"
    echo "$BASE_SHA" >"$BASE_DIR/rev"
  fi
  build_tree "$BASE_DIR/build" "$BASE_DIR/src"
  BASE_WORKER="$BASE_DIR/build/worker/onceq-worker"
  BASE_TOOL="$BASE_DIR/build/test/bench/onceq_bench_tool"
fi

# ---------------------------------------------------------------- server
log "server"
WORK=$(mktemp -d /tmp/onceq-keys-bench.XXXXXX)
bench_server_start "$WORK" "$LOG_DIR" 100 '%m [%p] %d ' 711 <<'EOF'
# only to count statements per drain
shared_preload_libraries = 'pg_stat_statements'
EOF
bench_own_env
ADMIN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
dsn_of() { echo "host=127.0.0.1 port=$PG_PORT user=postgres dbname=$1 sslmode=disable"; }
qd() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
echo "postgres: pid $PG_PID, 127.0.0.1:$PG_PORT"

# new_db NAME TOOL: a database with the schema of TOOL's build, the ledger
# (n: the order in which acknowledgements inserted their rows) and the
# expected order of the keyed items (expect: filled per drain).
new_db() {
  local db=$1 tool=$2 dsn
  dsn=$(dsn_of "$db")
  qd "$ADMIN" "CREATE DATABASE $db" >/dev/null
  "$tool" migrate "$dsn" >"$LOG_DIR/migrate-$db.log" 2>&1 ||
    { cat "$LOG_DIR/migrate-$db.log" >&2; die "schema migration of $db failed"; }
  qd "$dsn" "CREATE EXTENSION pg_stat_statements;
    CREATE TABLE ledger (item_id uuid PRIMARY KEY, n bigserial);
    CREATE TABLE expect (id uuid PRIMARY KEY, k text, s bigint)" >/dev/null
}

# the fill's INSERT: N items, keyed (KEYED=1) or not; overtime: run_at 1 ms
# apart in enqueue order, all in the past (keyed and plain alike)
fill_sql() {
  local keyexpr runat="now()"
  [ "$LAYOUT" != overtime ] || runat="now() - ($N - g) * interval '1 millisecond'"
  if [ "$1" = 1 ]; then
    if [ "$LAYOUT" = grouped ]; then keyexpr="'key-' || ((g - 1) * $K / $N)"; else keyexpr="'key-' || (g % $K)"; fi
    echo "INSERT INTO onceq_items (payload, ordering_key, run_at)
          SELECT jsonb_build_object('k', g), $keyexpr, $runat FROM generate_series(1, $N) g"
  else
    echo "INSERT INTO onceq_items (payload, run_at)
          SELECT jsonb_build_object('k', g), $runat FROM generate_series(1, $N) g"
  fi
}

# the expected order of a keyed fill (nothing for an unkeyed one: an older
# schema has no ordering_key)
expect_sql() {
  [ "$1" = 1 ] || return 0
  echo "INSERT INTO expect SELECT id, ordering_key, enqueue_seq FROM onceq_items;"
}

# check DSN NAME KEYED: the ledger is exact and, keyed, in enqueue order
# per key; dies otherwise.
CHECK_FAILED=0
check() {
  local dsn=$1 name=$2 keyed=$3 rows distinct left bad
  read -r rows distinct < <(qd "$dsn" "SELECT count(*), count(DISTINCT item_id) FROM ledger" | tr '|' ' ')
  left=$(qd "$dsn" "SELECT count(*) FROM onceq_items")
  if [ "$rows" != "$N" ] || [ "$distinct" != "$N" ] || [ "$left" != 0 ]; then
    echo "  CHECK FAILED ($name): ledger $rows rows, $distinct distinct, $left left; want $N, $N, 0" >&2
    CHECK_FAILED=1
  fi
  if [ "$keyed" = 1 ]; then
    bad=$(qd "$dsn" "SELECT count(*) FROM (SELECT e.s, lag(e.s) OVER (PARTITION BY e.k ORDER BY l.n) AS p
                      FROM ledger l JOIN expect e ON e.id = l.item_id) x WHERE p > s")
    if [ "$bad" != 0 ]; then
      echo "  CHECK FAILED ($name): $bad acknowledgement(s) out of enqueue order within a key" >&2
      CHECK_FAILED=1
    fi
  fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { printf "%s", a[int((NR + 1) / 2)] }'; }
span() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s..%s", lo, hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
verdict() { [ "$(awk -v a="$1" -v b="$2" 'BEGIN { print (a >= b) }')" = 1 ] && echo met || echo MISSED; }
SUMMARY=()

# drain DB WORKER NAME KEYED: one --drain of N fresh items; prints items/s
# by the worker's own clock (its --drain line).
# shellcheck disable=SC2016 # $2 is the worker's SQL parameter
# The claim statements' calls and time (pg_stat_statements), and apart
# from them the acks' next-item statements (OQ__SQL_ACK_NEXT, which also
# locks FOR UPDATE SKIP LOCKED; it alone unnests the keys' two arrays).
claim_stats() {
  qd "$1" "SELECT coalesce(sum(calls) FILTER (WHERE NOT nx), 0) || ' claims, '
      || coalesce(round((sum(total_exec_time) FILTER (WHERE NOT nx))::numeric
         / 1000, 2), 0) || ' s claiming, '
      || coalesce(sum(calls) FILTER (WHERE nx), 0) || ' next-item statements, '
      || coalesce(round((sum(total_exec_time) FILTER (WHERE nx))::numeric
         / 1000, 2), 0) || ' s'
    FROM (SELECT calls, total_exec_time,
                 query LIKE '%unnest(\$2::text[], \$3::text[])%' AS nx
          FROM pg_stat_statements
          WHERE query LIKE '%FROM onceq_items%FOR UPDATE SKIP LOCKED%') s"
}

LEDGER_SQL='INSERT INTO ledger (item_id) VALUES ($2)'
drain() {
  local db=$1 worker=$2 name=$3 keyed=$4 dsn sec claims
  dsn=$(dsn_of "$db")
  qd "$dsn" "TRUNCATE onceq_items, ledger, expect; $(fill_sql "$keyed"); $(expect_sql "$keyed")" \
    >/dev/null || die "$name: the fill failed"
  qd "$dsn" "VACUUM ANALYZE" >/dev/null
  qd "$dsn" "CHECKPOINT" >/dev/null
  qd "$dsn" "SELECT pg_stat_statements_reset()" >/dev/null
  timeout -k 10 300 "$worker" --db "$dsn" --sql "$LEDGER_SQL" --drain \
    --log-level info >"$LOG_DIR/$name.log" 2>&1 ||
    die "$name: the worker failed (log: $LOG_DIR/$name.log)"
  sec=$(sed -n 's/.*--drain: nothing ready is left; exiting ([0-9]* acked, \([0-9.]*\) s since start).*/\1/p' \
    "$LOG_DIR/$name.log" | tail -n 1)
  [ -n "$sec" ] || die "$name: no --drain line in $LOG_DIR/$name.log"
  check "$dsn" "$name" "$keyed"
  claims=$(claim_stats "$dsn")
  echo "    $name: $sec s, $claims" >&2
  awk -v n="$N" -v s="$sec" 'BEGIN { printf "%.0f", n / s }'
}

# ---------------------------------------------------------------- keys
if leg_on keys; then
  log "keys: one onceq-worker --sql ledger --drain, no keys (A) against $K keys (B), $ROUNDS rounds"
  new_db kb_keys "$TOOL"
  RA=() RB=() X=()
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
      a=$(drain kb_keys "$WORKER" "keys-plain-$r" 0)
      b=$(drain kb_keys "$WORKER" "keys-keyed-$r" 1)
    else
      b=$(drain kb_keys "$WORKER" "keys-keyed-$r" 1)
      a=$(drain kb_keys "$WORKER" "keys-plain-$r" 0)
    fi
    RA+=("$a") RB+=("$b") X+=("$(ratio "$b" "$a")")
    printf '  round %d: no keys %s items/s, keyed %s items/s, keyed/none %s (load %s)\n' \
      "$r" "$a" "$b" "${X[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
  done
  m=$(median "${X[@]}")
  SUMMARY+=("$(printf '%-44s %9s %9s %7s %-13s %s' "keys, default (1 worker --drain)" \
    "$(median "${RA[@]}")" "$(median "${RB[@]}")" "$m" "($(span "${X[@]}"))" \
    ">= 0.7: $(verdict "$m" 0.7)")")
fi

# ---------------------------------------------------------------- parts
# mismatch_sql P: ownership rows that differ from the blocks (as in
# parts_bench.sh), 0 when W live partitioned sessions own them as assigned.
mismatch_sql() {
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

# parts_round NAME KEYED: N items inserted while the workers run; prints
# items/s from the insert's commit to the queue found empty.
parts_round() {
  local name=$1 keyed=$2 dsn t0 t1
  dsn=$(dsn_of kb_parts)
  qd "$dsn" "TRUNCATE ledger, expect" >/dev/null
  qd "$dsn" "VACUUM ANALYZE onceq_items" >/dev/null
  qd "$dsn" "CHECKPOINT" >/dev/null
  qd "$dsn" "SELECT pg_stat_statements_reset()" >/dev/null
  # the expected order is read in the insert's transaction, before it commits
  qd "$dsn" "BEGIN; $(fill_sql "$keyed"); $(expect_sql "$keyed") COMMIT" >/dev/null ||
    die "$name: the fill failed"
  t0=$(date +%s%3N)
  # one connection polls every 20 ms (bench_tool.c: a new psql per poll
  # took about a third of the 2-core machine from the drain it timed)
  t1=$("$TOOL" wait_empty "$dsn" 300) ||
    die "$name: the queue did not empty (onceq_bench_tool wait_empty said why above)"
  check "$dsn" "$name" "$keyed"
  echo "    $name: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }') s," \
    "$(claim_stats "$dsn")" >&2
  awk -v n="$N" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / ((b - a) / 1000) }'
}

if leg_on parts; then
  log "parts: $W workers --partitioned on $P parts, no keys (A) against $K keys (B), $ROUNDS rounds"
  new_db kb_parts "$TOOL"
  PDSN=$(dsn_of kb_parts)
  "$CLI" --db "$PDSN" parts set "$P" >/dev/null
  for i in $(seq 1 "$W"); do
    "$WORKER" --db "$PDSN" --partitioned --sql "$LEDGER_SQL" --log-level warn \
      >"$LOG_DIR/parts-w$i.log" 2>&1 </dev/null &
    OUR_PIDS+=($!)
  done
  ready=0
  for _ in $(seq 1 300); do
    [ "$(qd "$PDSN" "$(mismatch_sql "$P")")" = 0 ] && { ready=1; break; }
    sleep 0.1
  done
  [ $ready = 1 ] || die "parts: workers did not converge in 30 s"
  RA=() RB=() X=()
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
      a=$(parts_round "parts-plain-$r" 0)
      b=$(parts_round "parts-keyed-$r" 1)
    else
      b=$(parts_round "parts-keyed-$r" 1)
      a=$(parts_round "parts-plain-$r" 0)
    fi
    RA+=("$a") RB+=("$b") X+=("$(ratio "$b" "$a")")
    printf '  round %d: no keys %s items/s, keyed %s items/s, keyed/none %s (load %s)\n' \
      "$r" "$a" "$b" "${X[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
  done
  stop_our_pids
  m=$(median "${X[@]}")
  SUMMARY+=("$(printf '%-44s %9s %9s %7s %-13s %s' "keys, --partitioned ($W workers, P=$P)" \
    "$(median "${RA[@]}")" "$(median "${RB[@]}")" "$m" "($(span "${X[@]}"))" \
    ">= 0.9: $(verdict "$m" 0.9)")")
fi

# ---------------------------------------------------------------- overhead
if leg_on overhead; then
  log "overhead: no keys, no limit, no pause; $BASE_REV (A, its own schema) against HEAD (B), $ROUNDS rounds"
  new_db kb_base "$BASE_TOOL"
  new_db kb_head "$TOOL"
  echo "  schema versions: A $(qd "$(dsn_of kb_base)" "SELECT max(version) FROM onceq_migrations" 2>/dev/null || echo '?')," \
    "B $(qd "$(dsn_of kb_head)" "SELECT max(version) FROM onceq_migrations" 2>/dev/null || echo '?')"
  RA=() RB=() X=()
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
      a=$(drain kb_base "$BASE_WORKER" "overhead-base-$r" 0)
      b=$(drain kb_head "$WORKER" "overhead-head-$r" 0)
    else
      b=$(drain kb_head "$WORKER" "overhead-head-$r" 0)
      a=$(drain kb_base "$BASE_WORKER" "overhead-base-$r" 0)
    fi
    RA+=("$a") RB+=("$b") X+=("$(ratio "$b" "$a")")
    printf '  round %d: %s %s items/s, HEAD %s items/s, HEAD/%s %s (load %s)\n' \
      "$r" "$BASE_REV" "$a" "$b" "$BASE_REV" "${X[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
  done
  m=$(median "${X[@]}")
  SUMMARY+=("$(printf '%-44s %9s %9s %7s %-13s %s' "no controls: HEAD vs $BASE_REV (default drain)" \
    "$(median "${RA[@]}")" "$(median "${RB[@]}")" "$m" "($(span "${X[@]}"))" \
    "~1.0 within the range")")
fi

# ---------------------------------------------------------------- control
if leg_on control; then
  log "control: pause, resume and concurrency limits under two draining workers"
  new_db kb_ctl "$TOOL"
  CDSN=$(dsn_of kb_ctl)
  qd "$CDSN" "CREATE TABLE cl (item_id uuid PRIMARY KEY, claimed_at timestamptz NOT NULL,
    started_at timestamptz NOT NULL, worker int NOT NULL)" >/dev/null
  for i in 1 2; do
    # the item's claimed_at is read from its row, still there in the ack
    # transaction; 10 ms of sleep per item keeps the drain going for seconds
    "$WORKER" --db "$CDSN" --concurrency 4 --log-level warn --sql \
      "INSERT INTO cl (item_id, claimed_at, started_at, worker) SELECT i.id, i.claimed_at, clock_timestamp(), $i
       FROM onceq_items i, (SELECT pg_sleep(0.01)) s WHERE i.id = \$2::uuid" \
      >"$LOG_DIR/control-w$i.log" 2>&1 </dev/null &
    OUR_PIDS+=($!)
  done
  for _ in $(seq 1 100); do
    [ "$(qd "$CDSN" "SELECT count(*) FROM onceq_sessions")" = 2 ] && break
    sleep 0.1
  done
  "$PGBIN/psql" -X -q -At -F ' ' -d "$CDSN" >"$LOG_DIR/control-samples.txt" 2>/dev/null <<'EOF' &
SELECT extract(epoch FROM clock_timestamp()), count(*) FROM onceq_items WHERE claim IS NOT NULL \watch 0.01
EOF
  OUR_PIDS+=($!)
  CN=$((N < 8000 ? N : 8000))
  qd "$CDSN" "INSERT INTO onceq_items (payload) SELECT jsonb_build_object('k', g) FROM generate_series(1, $CN) g" >/dev/null
  # at: the server's clock before an onceq command and after it returned:
  # its change committed in between. Lags are measured from the first
  # (an upper bound), windows start at the second and end at the next
  # command's first.
  at() {
    qd "$CDSN" "SELECT extract(epoch FROM clock_timestamp())"
    "$CLI" --db "$CDSN" "$@" >>"$LOG_DIR/control-cli.log" 2>&1 || die "onceq $* failed"
    qd "$CDSN" "SELECT extract(epoch FROM clock_timestamp())"
  }
  sleep 1
  read -r -d '' B_PAUSE T_PAUSE < <(at pause default) || true
  sleep 1.5
  read -r -d '' B_RESUME T_RESUME < <(at resume default) || true
  sleep 1.5
  read -r -d '' B_L3 T_L3 < <(at limit default --concurrency 3) || true
  sleep 1.5
  read -r -d '' B_L6 T_L6 < <(at limit default --concurrency 6) || true
  sleep 1.5
  read -r -d '' B_NONE T_NONE < <(at limit default --concurrency none) || true
  for v in "$B_PAUSE" "$T_PAUSE" "$B_RESUME" "$T_RESUME" "$B_L3" "$T_L3" "$B_L6" "$T_L6" "$B_NONE" "$T_NONE"; do
    [[ "$v" =~ ^[0-9]+\.?[0-9]*$ ]] || die "control: no server clock around an onceq command ('$v')"
  done
  for _ in $(seq 1 600); do
    [ "$(qd "$CDSN" "SELECT count(*) FROM onceq_items")" = 0 ] && break
    sleep 0.1
  done
  sleep 0.2
  stop_our_pids
  left=$(qd "$CDSN" "SELECT count(*) FROM onceq_items")
  [ "$left" = 0 ] || echo "  WARNING: $left items left after 60 s (the drain outlasted the bench's wait)"
  cq() { qd "$CDSN" "SELECT coalesce(($1)::text, '-') FROM cl"; }
  ms() { echo "round(1000 * ($1))::int"; }
  after_pause=$(cq "count(*) FILTER (WHERE extract(epoch FROM claimed_at) > $T_PAUSE AND extract(epoch FROM claimed_at) < $B_RESUME)")
  last_pause=$(cq "$(ms "max(extract(epoch FROM claimed_at)) FILTER (WHERE extract(epoch FROM claimed_at) < $B_RESUME) - $B_PAUSE")")
  started_pause=$(cq "$(ms "max(extract(epoch FROM started_at)) FILTER (WHERE extract(epoch FROM started_at) < $B_RESUME) - $B_PAUSE")")
  first_resume=$(cq "$(ms "min(extract(epoch FROM claimed_at)) FILTER (WHERE extract(epoch FROM claimed_at) > $B_RESUME) - $B_RESUME")")
  # from the samples (epoch, claimed count): lowered: the last sample above
  # the limit; raised: the first sample above the old limit
  samples() { awk -v a="$1" -v b="$2" 'NF == 2 && $1 ~ /^[0-9.]+$/ && $1 >= a && $1 < b' "$LOG_DIR/control-samples.txt"; }
  over_until() { samples "$1" "$2" | awk -v t="$1" -v lim="$3" '$2 > lim { last = $1 } END { if (last == "") print 0; else printf "%.3f", 1000 * (last - t) }'; }
  first_over() { samples "$1" "$2" | awk -v t="$1" -v lim="$3" '$2 > lim { printf "%.1f", 1000 * ($1 - t); f = 1; exit } END { if (!f) print "never" }'; }
  max_in() { samples "$1" "$2" | awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }'; }
  before_max=$(max_in "$T_RESUME" "$B_L3")
  l3_until=$(over_until "$B_L3" "$B_L6" 3)
  l3_max=$(samples "$B_L3" "$B_L6" | awk -v t="$B_L3" -v u="$l3_until" 'BEGIN { m = 0 } 1000 * ($1 - t) > u + 0.001 && $2 > m { m = $2 } END { print m }')
  l6_first=$(first_over "$B_L6" "$B_NONE" 3)
  l6_until=$(over_until "$T_L6" "$B_NONE" 6)
  l6_max=$(max_in "$T_L6" "$B_NONE")
  none_first=$(first_over "$B_NONE" 1e12 6)
  none_max=$(max_in "$T_NONE" 1e12)
  nsamples=$(samples 0 1e12 | wc -l)
  echo "pause $B_PAUSE $T_PAUSE resume $B_RESUME $T_RESUME limit3 $B_L3 $T_L3" \
    "limit6 $B_L6 $T_L6 none $B_NONE $T_NONE" >"$LOG_DIR/control-times.txt"
  echo "  $CN items, handler 10 ms each; $nsamples samples of the claimed count (every 10 ms)"
  echo "  pause:  $after_pause claim(s) started after the pause committed; last claim $last_pause ms," \
    "last handler start $started_pause ms after it (items already claimed finish)"
  echo "  resume: first claim $first_resume ms after the resume committed (poll interval 1000 ms)"
  echo "  no limit: up to $before_max claimed"
  echo "  limit 3:  claimed above 3 until $l3_until ms after the change (items claimed before it finishing), then at most $l3_max"
  in_l3=$(cq "count(*) FILTER (WHERE extract(epoch FROM claimed_at) BETWEEN $T_L3 AND $B_L6)")
  echo "            $in_l3 claims in its $(awk -v a="$T_L3" -v b="$B_L6" 'BEGIN { printf "%.1f", b - a }') s" \
    "(3 handlers of 10 ms at a time could start about 300 a second)"
  echo "  limit 6:  first above 3 after $l6_first ms; above 6 until $l6_until ms; at most $l6_max"
  echo "  none:     first above 6 after $none_first ms; at most $none_max"
  [ "$(qd "$CDSN" "SELECT count(*) FROM cl")" = "$CN" ] ||
    { echo "  CHECK FAILED (control): $(qd "$CDSN" "SELECT count(*) FROM cl") handler rows, want $CN" >&2; CHECK_FAILED=1; }
  SUMMARY+=("$(printf '%-44s %s' "pause: claims after it / last claim" "$after_pause / $last_pause ms (target: within 1000 ms)")")
  SUMMARY+=("$(printf '%-44s %s' "resume: first claim" "$first_resume ms")")
  SUMMARY+=("$(printf '%-44s %s' "limit none->3: above 3 until / then max" "$l3_until ms / $l3_max (target: within 1000 ms)")")
  SUMMARY+=("$(printf '%-44s %s' "limit 3: claims in its window" "$in_l3 in $(awk -v a="$T_L3" -v b="$B_L6" 'BEGIN { printf "%.1f", b - a }') s")")
  SUMMARY+=("$(printf '%-44s %s' "limit 3->6: first above 3 / max" "$l6_first ms / $l6_max")")
  SUMMARY+=("$(printf '%-44s %s' "limit 6->none: first above 6" "$none_first ms")")
fi

# ---------------------------------------------------------------- summary
log "summary (N=$N, K=$K $LAYOUT, $ROUNDS rounds; items/s medians, ratio = median of per-round ratios (range))"
printf '%-44s %9s %9s %7s %-13s %s\n' leg "A items/s" "B items/s" "B/A" "(range)" target
printf '%s\n' "${SUMMARY[@]}"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
echo "logs: build/keys-bench-logs/"
[ "$CHECK_FAILED" = 0 ]
