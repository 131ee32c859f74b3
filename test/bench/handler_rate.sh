#!/usr/bin/env bash
# test/bench/handler_rate.sh: does an external handler's own time bound
# `onceq-worker --http` and `--exec` on a deep queue (issue 22: at least
# 0.85 x C/d items/s at --concurrency C, d the handler's time as the
# worker measures it)? A benchmark, not a test: not in ctest; nothing
# passes or fails on speed.
#
#   ./test/bench/handler_rate.sh [--worker W] [--tool T] [--sleep S]
#       [--ms "5 20"] [--conc "4 16"] [--kinds "http exec"]
#       [--window 4] [--rounds 1] [-h|--help]
#
# For each kind, d (--ms) and C (--conc): a private PostgreSQL 15 (one for
# the whole run; bench_server.sh, fsync and synchronous_commit on) gets a
# queue deep enough that it is not drained within the window (at least
# 4,000 items), then
#   http: W --db DSN --concurrency C --http http://127.0.0.1:PORT/
#         against `S serve` (test/bench/sleep_handler.c: answers after d
#         ms, one thread per kept-alive connection, HTTP/1.1)
#   exec: W --db DSN --concurrency C --exec S sleep d
# runs without --drain; after a warm-up (the first ack plus 1 s) the
# script reads the worker's /metrics twice, --window seconds apart:
# items/s = acked_total's growth / the window; d = the growth of
# onceq_worker_handler_seconds_sum / of its _count (request to response,
# or spawn to exit: the worker's own clock). Printed per run: items/s,
# C/d, the ratio (target >= 0.85), the depth left (the queue must stay
# deep), and for http the server's own time per request and CPU share
# (so a server that cannot keep up shows). With --rounds R each cell runs
# R times and the median ratio is printed.
# W, T, S default to build/default's onceq-worker, test/bench/
# onceq_bench_tool and test/bench/onceq_bench_sleep. Logs:
# build/handler-rate-logs/ of the repository.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
CMDLINE="./test/bench/handler_rate.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done
# shellcheck disable=SC2034 # BENCH_NAME, OUR_PIDS: read by bench_server.sh
BENCH_NAME=test/bench/handler_rate.sh
# shellcheck disable=SC2034
OUR_PIDS=()
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

W="$ROOT/build/default/worker/onceq-worker"
TOOL="$ROOT/build/default/test/bench/onceq_bench_tool"
SLEEP="$ROOT/build/default/test/bench/onceq_bench_sleep"
MS_LIST="5 20" CONC_LIST="4 16" KINDS="http exec" WINDOW=4 ROUNDS=1
while [ $# -gt 0 ]; do
  case "$1" in
  --worker) W=$2; shift 2 ;;
  --tool) TOOL=$2; shift 2 ;;
  --sleep) SLEEP=$2; shift 2 ;;
  --ms) MS_LIST=$2; shift 2 ;;
  --conc) CONC_LIST=$2; shift 2 ;;
  --kinds) KINDS=$2; shift 2 ;;
  --window) WINDOW=$2; shift 2 ;;
  --rounds) ROUNDS=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
for f in "$W" "$TOOL" "$SLEEP"; do [ -x "$f" ] || die "not executable: '$f' (see --help)"; done
[[ "$WINDOW" =~ ^[0-9]+$ ]] && [ "$WINDOW" -ge 1 ] && [ "$WINDOW" -le 60 ] ||
  die "--window must be 1..60 seconds"
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 21 ] ||
  die "--rounds must be 1..21"
for k in $KINDS; do [ "$k" = http ] || [ "$k" = exec ] || die "--kinds: http or exec"; done
LOG_DIR="$ROOT/build/handler-rate-logs"
mkdir -p "$LOG_DIR"
WORK=""
bench_on_exit

calc() { awk "BEGIN { printf \"${2:-%.2f}\", $1 }"; }
median() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
  END { printf "%s", a[int((NR + 1) / 2)] }'
}
# a free port on 127.0.0.1 (the kernel's pick; released before use)
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# metric NAME FILE: a sample's value (0 when absent)
metric() { awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }' "$2"; }
# the CPU seconds (user + system) process PID used so far
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}

echo "command: $CMDLINE"
echo "worker:  $W ($("$W" --version 2>/dev/null | head -n1 || true))"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"

WORK=$(mktemp -d /tmp/onceq-handler-rate.XXXXXX)
bench_server_start "$WORK" "$LOG_DIR" 100 '%m [%p] ' 711 </dev/null
bench_own_env
DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$DSN" -c "$1"; }
"$TOOL" migrate "$DSN" >"$LOG_DIR/migrate.log" 2>&1 ||
  { cat "$LOG_DIR/migrate.log" >&2; die "schema migration failed"; }

SRV_PID="" SRV_STATS=""
# start_server MS: the HTTP handler answering after MS ms; sets SRV_PORT
start_server() {
  local pf="$WORK/port.$1"
  rm -f "$pf"
  SRV_STATS="$WORK/server-stats.$1"
  "$SLEEP" serve "$pf" "$1" "$SRV_STATS" >"$LOG_DIR/server-$1ms.log" 2>&1 &
  SRV_PID=$!
  OUR_PIDS+=("$SRV_PID")
  for _ in $(seq 1 50); do
    [ -s "$pf" ] && break
    sleep 0.1
  done
  [ -s "$pf" ] || die "the sleep server did not start (log: $LOG_DIR/server-$1ms.log)"
  SRV_PORT=$(cat "$pf")
}

# one KIND MS C ROUND: one measured run; prints its table row, sets RATIO
one() {
  local kind=$1 ms=$2 c=$3 r=$4 n mport log wpid t0 t1 left
  local name="$kind-${ms}ms-c$c-r$r"
  # deep: twice what C/d drains in the warm-up and the window, >= 4,000
  n=$(calc "2 * $c * 1000 / $ms * ($WINDOW + 3)" '%.0f')
  [ "$n" -ge 4000 ] || n=4000
  q "TRUNCATE onceq_items;
     INSERT INTO onceq_items (payload)
     SELECT jsonb_build_object('k', g) FROM generate_series(1, $n) g" >/dev/null
  q "VACUUM ANALYZE onceq_items" >/dev/null
  mport=$(free_port)
  log="$LOG_DIR/$name.log"
  local handler=()
  if [ "$kind" = http ]; then
    handler=(--http "http://127.0.0.1:$SRV_PORT/")
  else
    handler=(--exec "$SLEEP" sleep "$ms")
  fi
  "$W" --db "$DSN" --concurrency "$c" --metrics-addr "127.0.0.1:$mport" \
    --log-level info "${handler[@]}" >"$log" 2>&1 &
  wpid=$!
  OUR_PIDS+=("$wpid")
  # warm-up: the first ack, then one more second
  local up=0
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$mport/metrics" >"$WORK/m0" 2>/dev/null &&
      [ "$(metric onceq_worker_acked_total "$WORK/m0")" != 0 ]; then
      up=1
      break
    fi
    pgl_alive "$wpid" || break
    sleep 0.1
  done
  [ $up -eq 1 ] || { tail -n 20 "$log" >&2; die "$name: no ack within 10 s"; }
  sleep 1
  local scpu0=0 scpu1=0
  [ "$kind" = http ] && scpu0=$(cpu_s "$SRV_PID")
  local wcpu0 wcpu1
  wcpu0=$(cpu_s "$wpid")
  t0=$(date +%s.%N)
  curl -fsS "http://127.0.0.1:$mport/metrics" >"$WORK/m0"
  sleep "$WINDOW"
  curl -fsS "http://127.0.0.1:$mport/metrics" >"$WORK/m1"
  t1=$(date +%s.%N)
  wcpu1=$(cpu_s "$wpid")
  [ "$kind" = http ] && scpu1=$(cpu_s "$SRV_PID")
  cp "$WORK/m1" "$LOG_DIR/$name.metrics"
  stop_pid "$wpid" 100
  left=$(q "SELECT count(*) FROM onceq_items")
  local acked hsum hcount rate d cd
  acked=$(calc "$(metric onceq_worker_acked_total "$WORK/m1") - $(metric onceq_worker_acked_total "$WORK/m0")" '%.0f')
  hsum=$(calc "$(metric onceq_worker_handler_seconds_sum "$WORK/m1") - $(metric onceq_worker_handler_seconds_sum "$WORK/m0")" '%.6f')
  hcount=$(calc "$(metric onceq_worker_handler_seconds_count "$WORK/m1") - $(metric onceq_worker_handler_seconds_count "$WORK/m0")" '%.0f')
  [ "$hcount" -gt 0 ] || die "$name: no handler call in the window"
  rate=$(calc "$acked / ($t1 - $t0)" '%.0f')
  d=$(calc "$hsum / $hcount * 1000" '%.2f')
  cd=$(calc "$c * 1000 / $d" '%.0f')
  RATIO=$(calc "$rate / $cd" '%.3f')
  local wcpu scol=""
  wcpu=$(calc "($wcpu1 - $wcpu0) / ($t1 - $t0) * 100" '%.0f')
  if [ "$kind" = http ]; then
    # the server's share of a core in the window (its time per answer is
    # printed when it exits)
    scol=$(calc "($scpu1 - $scpu0) / ($t1 - $t0) * 100" '%.0f')%
  fi
  printf '%-5s %4s %3s %2s %8s %8s %8s %7s %6s %6s %5s %s\n' "$kind" "$ms" "$c" "$r" \
    "$rate" "$d" "$cd" "$RATIO" "$left" "$wcpu%" "${scol:--}" \
    "$([ "$left" -gt "$c" ] || echo '(queue ran dry: raise --window or N)')"
}

printf '%-5s %4s %3s %2s %8s %8s %8s %7s %6s %6s %5s\n' kind d_ms C r "items/s" \
  "d_meas" "C/d" ratio left wCPU sCPU
declare -A RES=()
for kind in $KINDS; do
  for ms in $MS_LIST; do
    [ "$kind" = http ] && start_server "$ms"
    for c in $CONC_LIST; do
      rs=()
      for r in $(seq 1 "$ROUNDS"); do
        one "$kind" "$ms" "$c" "$r"
        rs+=("$RATIO")
      done
      RES["$kind $ms $c"]=$(median "${rs[@]}")
    done
    if [ "$kind" = http ]; then
      stop_pid "$SRV_PID" 50
      # requests=N busy_us=U: the server's own time per answer
      if [ -s "$SRV_STATS" ]; then
        read -r sreq sbusy <<<"$(sed 's/[a-z_]*=//g' "$SRV_STATS")"
        [ "$sreq" -gt 0 ] &&
          echo "  server ${ms} ms: $sreq requests, $(calc "$sbusy / $sreq / 1000" '%.2f') ms from request read to answer written"
      fi
    fi
  done
done
echo
echo "summary (median ratio of $ROUNDS round(s); items/s over C/d, d as the worker measures it; target >= 0.85):"
for kind in $KINDS; do
  for ms in $MS_LIST; do
    for c in $CONC_LIST; do
      v=${RES["$kind $ms $c"]}
      printf '  %-4s d=%2s ms C=%2s: %s %s\n' "$kind" "$ms" "$c" "$v" \
        "$(awk "BEGIN { exit !($v >= 0.85) }" && echo met || echo 'NOT met')"
    done
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
echo "logs: $LOG_DIR"
