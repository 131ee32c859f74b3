#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in --sql statements is for the server
# test/bench/pooler_bench.sh: the --sql drain through pgbouncer in
# transaction mode against the same drain on a direct connection, in the
# same run on the same server (issue 21's target: pooled >= 0.8x direct).
# A ratio, not a pass/fail time. Each round fills N items, then drains
# them with one onceq-worker --drain --sql (one ledger row per item in the
# ack transaction), pooled then direct in odd rounds, the other way round in
# even ones; items/s comes from the worker's own
# "--drain: ... (N acked, S s since start)" line; the median of the
# per-round ratios is printed with its range.
#
#   ONCEQ_TEST_DSN=... ONCEQ_CLI=build/default/cli/onceq \
#   ONCEQ_WORKER=build/default/worker/onceq-worker \
#   test/bench/pooler_bench.sh [ITEMS (20000)] [ROUNDS (5)] [CONCURRENCY (4)] [POOL (8)]
#
# The environment is the harness's (test/harness/oq_harness.sh): the
# server of ONCEQ_TEST_DSN (./test/run.sh --one prints one) and pgbouncer
# (Debian package) started on a free port, stopped on exit.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
ITEMS=${1:-20000}
ROUNDS=${2:-5}
CONC=${3:-4}
POOL=${4:-8}
oq_setup pooler_bench
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL)" >/dev/null
oq_pgbouncer_start pgb transaction "$POOL"

# drain NAME DSN: fill, drain, echo items/s
drain() {
  local name=$1 dsn=$2 line acked secs
  oq_sql "TRUNCATE ledger;
          INSERT INTO onceq_items (payload)
          SELECT jsonb_build_object('n', g) FROM generate_series(1, $ITEMS) g" >/dev/null
  oq_sql "VACUUM ANALYZE onceq_items" >/dev/null
  oq_worker_start "$name" --db "$dsn" --drain --concurrency "$CONC" >&2 \
    --sql 'INSERT INTO ledger (item_id, n) VALUES ($2, ($1->>'"'n'"')::int)'
  oq_wait_exit "$OQ_LAST_PID" 600
  [ "$OQ_RC" = 0 ] || oq_fail "$name: exit $OQ_RC"
  oq_ledger_exact "$ITEMS" >/dev/null
  line=$(grep -- '--drain: nothing ready is left' "$OQ_TMP/$name.log")
  acked=$(sed -n 's/.*(\([0-9]*\) acked, \([0-9.]*\) s since start).*/\1/p' <<<"$line")
  secs=$(sed -n 's/.*(\([0-9]*\) acked, \([0-9.]*\) s since start).*/\2/p' <<<"$line")
  awk -v a="$acked" -v s="$secs" 'BEGIN { printf "%.0f", a / s }'
}

# cpu_ticks PID: user + system clock ticks the process has used
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

ratios=()
for r in $(seq 1 "$ROUNDS"); do
  # alternate which goes first, so a load that comes and goes on a shared
  # machine (or a warmer cache for the second drain) favours neither side
  if [ $((r % 2)) = 0 ]; then d=$(drain "direct$r" "$OQ_DSN"); fi
  c0=$(cpu_ticks "$OQ_PGB_PID")
  p=$(drain "pooled$r" "$OQ_PGB_DSN")
  cpu=$(awk -v t=$(($(cpu_ticks "$OQ_PGB_PID") - c0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", t / hz }')
  if [ $((r % 2)) = 1 ]; then d=$(drain "direct$r" "$OQ_DSN"); fi
  ratio=$(awk -v p="$p" -v d="$d" 'BEGIN { printf "%.2f", p / d }')
  ratios+=("$ratio")
  oq_log "round $r: direct $d items/s, pooled $p items/s, ratio $ratio (pgbouncer used $cpu s of CPU for the pooled drain)"
done
sorted=$(printf '%s\n' "${ratios[@]}" | sort -n)
median=$(sed -n "$(((ROUNDS + 1) / 2))p" <<<"$sorted")
oq_log "pooled/direct --sql drain: median $median (range $(head -n1 <<<"$sorted")-$(tail -n1 <<<"$sorted")), $ITEMS items, concurrency $CONC, pgbouncer transaction pool $POOL"
