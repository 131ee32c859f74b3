#!/usr/bin/env bash
# test/bench/ledger_ab.sh: the default `onceq-worker --sql` ledger drain of
# the peer benchmark (test/bench/peers/run.sh, "worker ledger"), two worker
# binaries A and B side by side, alternately (A B A B ...) on one private
# PostgreSQL 15, so a shared, noisy machine drifts on both alike. A
# benchmark, not a test: not in ctest; nothing passes or fails on speed.
#
#   ./test/bench/ledger_ab.sh --a WORKER_A --b WORKER_B --tool BENCH_TOOL
#                             [--n 20000] [--rounds 5] [-h|--help]
#
# Each run: N items (TRUNCATE, INSERT, VACUUM ANALYZE, CHECKPOINT), then
# WORKER --sql 'INSERT INTO ledger (item_id) VALUES ($2)' --drain with the
# defaults (WORKER_ARGS adds flags to both), items/s = N / the worker's own
# clock (its --drain line: main() to the queue found empty, as the peer
# benchmark reads it). The server: fsync on, synchronous_commit on,
# shared_buffers 256MB (bench_server.sh, like every benchmark here).
# BENCH_TOOL: a build's test/bench/onceq_bench_tool (applies the schema).
# Prints every run (with its claim statements and ack DELETEs, from
# pg_stat_statements) and the median per binary, with A/B per round.
# Logs: build/ledger-ab-logs/ of the repository.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
CMDLINE="./test/bench/ledger_ab.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done
# shellcheck disable=SC2034 # BENCH_NAME, OUR_PIDS: read by bench_server.sh
BENCH_NAME=test/bench/ledger_ab.sh
# shellcheck disable=SC2034
OUR_PIDS=()
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

A="" B="" TOOL="" N=20000 ROUNDS=5
while [ $# -gt 0 ]; do
  case "$1" in
  --a) A=$2; shift 2 ;;
  --b) B=$2; shift 2 ;;
  --tool) TOOL=$2; shift 2 ;;
  --n) N=$2; shift 2 ;;
  --rounds) ROUNDS=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
for f in "$A" "$B" "$TOOL"; do [ -x "$f" ] || die "not executable: '$f' (see --help)"; done
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 100 ] || die "--n must be >= 100"
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 21 ] ||
  die "--rounds must be 1..21"
read -r -a WARGS <<<"${WORKER_ARGS:-}"
LOG_DIR="$ROOT/build/ledger-ab-logs"
mkdir -p "$LOG_DIR"
WORK=""
bench_on_exit

median() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
  END { printf "%s", a[int((NR + 1) / 2)] }'
}
echo "command: $CMDLINE${WORKER_ARGS:+ (WORKER_ARGS=$WORKER_ARGS)}"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"

WORK=$(mktemp -d /tmp/onceq-ledger-ab.XXXXXX)
bench_server_start "$WORK" "$LOG_DIR" 100 '%m [%p] ' 711 <<'EOF2'
# only to count statements: items per claim statement and per ack DELETE
shared_preload_libraries = 'pg_stat_statements'
EOF2
bench_own_env
DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$DSN" -c "$1"; }
"$TOOL" migrate "$DSN" >"$LOG_DIR/migrate.log" 2>&1 ||
  { cat "$LOG_DIR/migrate.log" >&2; die "schema migration failed"; }
q "CREATE EXTENSION pg_stat_statements" >/dev/null
q "CREATE TABLE ledger (item_id uuid PRIMARY KEY)"
LEDGER_SQL='INSERT INTO ledger (item_id) VALUES ($2)'

# run NAME WORKER: one drain; prints items/s
run() {
  local name=$1 worker=$2 sec left
  q "TRUNCATE onceq_items, ledger;
     INSERT INTO onceq_items (payload)
     SELECT jsonb_build_object('k', g) FROM generate_series(1, $N) g" >/dev/null
  q "VACUUM ANALYZE" >/dev/null
  q "CHECKPOINT" >/dev/null
  q "SELECT pg_stat_statements_reset()" >/dev/null
  timeout -k 10 300 "$worker" --db "$DSN" --sql "$LEDGER_SQL" --drain \
    --log-level info "${WARGS[@]}" >"$LOG_DIR/$name.log" 2>&1 ||
    die "$name: the worker failed (log: $LOG_DIR/$name.log)"
  left=$(q "SELECT count(*) FROM onceq_items")
  [ "$left" = 0 ] || die "$name: $left item(s) left"
  [ "$(q 'SELECT count(*) FROM ledger')" = "$N" ] || die "$name: ledger is not $N rows"
  sec=$(sed -n 's/.*--drain: nothing ready is left; exiting ([0-9]* acked, \([0-9.]*\) s since start).*/\1/p' \
    "$LOG_DIR/$name.log" | tail -n 1)
  [ -n "$sec" ] || die "$name: no --drain line in $LOG_DIR/$name.log"
  # the shape, to stderr: claim statements and ack DELETEs, and the
  # server's time in each (the claim loop is serial: claims x their mean
  # time near the drain's seconds says it, not the acks, bounds the rate)
  local claims dels
  claims=$(q "SELECT coalesce(sum(calls), 0) || ' claim statements (' ||
      coalesce(round((sum(total_exec_time) / nullif(sum(calls), 0))::numeric, 1), 0)
      || ' ms each)' FROM pg_stat_statements
    WHERE query LIKE '%FROM onceq_items%FOR UPDATE SKIP LOCKED%'")
  dels=$(q "SELECT coalesce(sum(calls), 0) || ' ack DELETEs (' ||
      coalesce(round((sum(total_exec_time) / nullif(sum(calls), 0))::numeric, 1), 0)
      || ' ms each)' FROM pg_stat_statements
    WHERE query LIKE '%DELETE FROM onceq_items%'")
  echo "  $name: $claims, $dels, $sec s" >&2
  awk "BEGIN { printf \"%.0f\", $N / $sec }"
}

RA=() RB=() RATIO=()
for r in $(seq 1 "$ROUNDS"); do
  a=$(run "a-$r" "$A")
  b=$(run "b-$r" "$B")
  RA+=("$a") RB+=("$b")
  RATIO+=("$(awk "BEGIN { printf \"%.3f\", $a / $b }")")
  printf 'round %d: A %s items/s, B %s items/s, A/B %s (load %s)\n' "$r" "$a" "$b" \
    "${RATIO[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
done
echo "A: $A"
echo "B: $B"
printf 'median of %d, N=%d: A %s items/s (%s..%s), B %s items/s (%s..%s), A/B %s\n' \
  "$ROUNDS" "$N" "$(median "${RA[@]}")" "$(printf '%s\n' "${RA[@]}" | sort -g | head -n1)" \
  "$(printf '%s\n' "${RA[@]}" | sort -g | tail -n1)" "$(median "${RB[@]}")" \
  "$(printf '%s\n' "${RB[@]}" | sort -g | head -n1)" "$(printf '%s\n' "${RB[@]}" | sort -g | tail -n1)" \
  "$(median "${RATIO[@]}")"
