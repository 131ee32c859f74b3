#!/usr/bin/env bash
# test/bench/claim_fk_ab.sh: what the `claim` foreign key (onceq_items.claim
# REFERENCES onceq_sessions ON DELETE SET NULL) costs a claim, measured
# before replacing it (issue 22 item 2: "keep the foreign key if the gain is
# not there"). One build, one private PostgreSQL 15; the schema alternates
# between variants inside every round, so a shared, noisy machine drifts on
# all of them alike. A benchmark, not a test: not in ctest; nothing passes
# or fails on speed.
#
#   ./test/bench/claim_fk_ab.sh --build DIR [--n 20000] [--batch 1000]
#                               [--rounds 5] [-h|--help]
#
# Variants, one database each on the same server (same data, same plan):
#   fk        the schema as migrated: the FK checks every claimed row
#   nofk      the FK dropped, the library's claim unchanged (the upper bound)
#   nofk+lock the FK dropped, the claim locking its session row once
#             (a CTE "s": SELECT ... FROM onceq_sessions WHERE id = $1 AND
#             not expired FOR KEY SHARE, cross-joined into the claim's
#             scan), the shape that replaces the FK (claim leg only)
# Legs, each round on N fresh ready items per database (TRUNCATE, INSERT,
# VACUUM ANALYZE, CHECKPOINT):
#   claim   N/BATCH claims of BATCH rows per variant, the library's
#           PostgreSQL claim (printed by onceq_bench_tool), nothing else,
#           interleaved claim by claim (fk, nofk, nofk+lock, then rotated)
#           from one psql (\timing, \connect between them), so a burst of
#           load on the shared machine hits all variants alike; reports
#           the mean ms per claim of the round
#   ledger  onceq-worker --sql 'INSERT INTO ledger (item_id) VALUES ($2)'
#           --drain with the defaults, fk then nofk (nofk first in even
#           rounds); items/s = N / the worker's own clock (its --drain
#           line), as test/bench/ledger_ab.sh reads it
# Prints every round and, per leg and variant, the median and range, and
# the median of the per-round ratios against fk. Server: fsync on,
# synchronous_commit on, shared_buffers 256MB (bench_server.sh).
# DIR: a build tree with onceq-worker and test/bench/onceq_bench_tool
# (cmake --build DIR --target onceq-worker onceq_bench_tool).
# Logs: build/claim-fk-ab-logs/ of the repository.
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
CMDLINE="./test/bench/claim_fk_ab.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done
# shellcheck disable=SC2034 # BENCH_NAME, OUR_PIDS: read by bench_server.sh
BENCH_NAME=test/bench/claim_fk_ab.sh
# shellcheck disable=SC2034
OUR_PIDS=()
# shellcheck source=bench_server.sh
. "$ROOT/test/bench/bench_server.sh"

BUILD="" N=20000 BATCH=1000 ROUNDS=5
while [ $# -gt 0 ]; do
  case "$1" in
  --build) BUILD=$2; shift 2 ;;
  --n) N=$2; shift 2 ;;
  --batch) BATCH=$2; shift 2 ;;
  --rounds) ROUNDS=$2; shift 2 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$BUILD" ] || die "--build DIR is required (see --help)"
WORKER=$BUILD/worker/onceq-worker
TOOL=$BUILD/test/bench/onceq_bench_tool
for f in "$WORKER" "$TOOL"; do [ -x "$f" ] || die "not executable: '$f' (see --help)"; done
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 100 ] || die "--n must be >= 100"
[[ "$BATCH" =~ ^[0-9]+$ ]] && [ "$BATCH" -ge 1 ] || die "--batch must be >= 1"
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 21 ] ||
  die "--rounds must be 1..21"
LOG_DIR="$ROOT/build/claim-fk-ab-logs"
mkdir -p "$LOG_DIR"
WORK=""
bench_on_exit

median() {
  printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
  END { printf "%s", a[int((NR + 1) / 2)] }'
}
range() { printf '%s..%s' "$(printf '%s\n' "$@" | sort -g | head -n1)" \
  "$(printf '%s\n' "$@" | sort -g | tail -n1)"; }
echo "command: $CMDLINE"
echo "commit:  $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"

WORK=$(mktemp -d /tmp/onceq-claim-fk-ab.XXXXXX)
bench_server_start "$WORK" "$LOG_DIR" 100 '%m [%p] ' 711 </dev/null
bench_own_env
DSN0="host=127.0.0.1 port=$PG_PORT user=postgres sslmode=disable"
dsn() { echo "$DSN0 dbname=onceq_$1"; }
VARIANTS=(fk nofk lock) # lock: nofk+lock
SESS=00000000-0000-4000-8000-0000000000a1
# q DB SQL
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$(dsn "$1")" -c "$2"; }
for v in "${VARIANTS[@]}"; do
  "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$DSN0 dbname=postgres" \
    -c "CREATE DATABASE onceq_$v" >/dev/null
  "$TOOL" migrate "$(dsn "$v")" >"$LOG_DIR/migrate-$v.log" 2>&1 ||
    { cat "$LOG_DIR/migrate-$v.log" >&2; die "schema migration failed"; }
  q "$v" "CREATE TABLE ledger (item_id uuid PRIMARY KEY)"
  q "$v" "INSERT INTO onceq_sessions (id, expiry, hostname, pid, version, queues)
          VALUES ('$SESS', interval '1 day', 'bench', 0, 'bench', 'default')"
  # schema v8 dropped the foreign key: the fk database gets it back
  q "$v" "SET client_min_messages = warning;
          ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS onceq_items_claim_fkey" >/dev/null
  if [ "$v" = fk ]; then
    q "$v" "ALTER TABLE onceq_items ADD CONSTRAINT onceq_items_claim_fkey
            FOREIGN KEY (claim) REFERENCES onceq_sessions (id) ON DELETE SET NULL"
  fi
done
echo "fk:      onceq_items_claim_fkey only in onceq_fk"

# The library's claim with its parameters as literals: $1 the session, $2
# the queues, $3 the batch, $4 the byte budget (the worker's default).
LIB_CLAIM=$("$TOOL" sql claim | sed -e "s/\$1::uuid/'$SESS'::uuid/g" \
  -e "s/\$2::text\[\]/'{default}'::text[]/g" -e "s/\$3::int/$BATCH::int/g" \
  -e "s/\$4::int8/67108864::int8/g")
if grep -q '\$[0-9]' <<<"$LIB_CLAIM"; then
  die "the library's claim has parameters this bench does not know: $LIB_CLAIM"
fi
# nofk+lock: the session row locked once, the scan joined to it (no row:
# nothing is claimed). From schema v8 on the library's claim is that one,
# and the fk and nofk variants run it with the lock taken out.
LOCK_CLAIM=$LIB_CLAIM
if grep -q 'FROM onceq_sessions' <<<"$LIB_CLAIM"; then
  LIB_CLAIM=$(sed -e 's/^WITH s AS (SELECT 1 \/ count(\*) AS live FROM (SELECT 1 FROM onceq_sessions .* FOR KEY SHARE) l), c AS MATERIALIZED (/WITH c AS MATERIALIZED (/' \
    -e 's/ FROM s CROSS JOIN / FROM /' <<<"$LOCK_CLAIM")
  ! grep -q 'onceq_sessions' <<<"$LIB_CLAIM" ||
    die "cannot take the session lock out of the library's claim; update this bench"
else
  LOCK_CTE="WITH s AS (SELECT id FROM onceq_sessions WHERE id = '$SESS'::uuid"
  LOCK_CTE+=" AND heartbeated_at + expiry >= now() FOR KEY SHARE),"
  LOCK_CLAIM=$(sed -e "s/^WITH c AS MATERIALIZED (/$LOCK_CTE c AS MATERIALIZED (/" \
    -e 's/ FROM (SELECT name FROM unnest/ FROM s CROSS JOIN (SELECT name FROM unnest/' \
    <<<"$LIB_CLAIM")
  grep -q 'FROM s CROSS JOIN' <<<"$LOCK_CLAIM" ||
    die "cannot add the session lock to the library's claim; update this bench"
fi
printf '%s;\n' "$LIB_CLAIM" >"$LOG_DIR/claim.sql"
printf '%s;\n' "$LOCK_CLAIM" >"$LOG_DIR/claim_lock.sql"

fill() {
  local v
  for v in "${VARIANTS[@]}"; do
    q "$v" "TRUNCATE onceq_items, ledger;
       INSERT INTO onceq_items (payload)
       SELECT jsonb_build_object('k', g) FROM generate_series(1, $N) g" >/dev/null
    q "$v" "VACUUM ANALYZE" >/dev/null
  done
  q fk "CHECKPOINT" >/dev/null
}

# claim_leg R: "fk_ms nofk_ms lock_ms", the mean ms per claim of each
claim_leg() {
  local r=$1 k j v script=$LOG_DIR/claims.psql out=$LOG_DIR/claims-$r.out
  fill
  {
    echo '\timing on'
    for k in $(seq 0 $((N / BATCH - 1))); do
      for j in 0 1 2; do
        v=${VARIANTS[$(((k + j) % 3))]}
        echo "\\connect '$(dsn "$v")'"
        echo "\\echo variant $v"
        if [ "$v" = lock ]; then cat "$LOG_DIR/claim_lock.sql"; else cat "$LOG_DIR/claim.sql"; fi
      done
    done
  } >"$script"
  "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$(dsn fk)" -f "$script" \
    2>&1 | grep -E '^(variant |Time: )' >"$out" ||
    die "claim round $r: psql failed"
  for v in "${VARIANTS[@]}"; do
    [ "$(q "$v" "SELECT count(*) FROM onceq_items WHERE claim IS NULL")" -lt "$BATCH" ] ||
      die "claim round $r: $v left items unclaimed"
  done
  awk '/^variant / { v = $2 } /^Time: / { s[v] += $2; n[v]++ }
       END { printf "%.3f %.3f %.3f", s["fk"] / n["fk"], s["nofk"] / n["nofk"],
             s["lock"] / n["lock"] }' "$out"
}

# ledger_leg V: items/s of the default worker's ledger drain
ledger_leg() {
  local v=$1 sec left
  timeout -k 10 300 "$WORKER" --db "$(dsn "$v")" \
    --sql 'INSERT INTO ledger (item_id) VALUES ($2)' --drain \
    --log-level info >"$LOG_DIR/ledger-$v.log" 2>&1 ||
    die "ledger $v: the worker failed (log: $LOG_DIR/ledger-$v.log)"
  left=$(q "$v" "SELECT count(*) FROM onceq_items")
  [ "$left" = 0 ] || die "ledger $v: $left item(s) left"
  [ "$(q "$v" 'SELECT count(*) FROM ledger')" = "$N" ] || die "ledger $v: ledger is not $N rows"
  sec=$(sed -n 's/.*--drain: nothing ready is left; exiting ([0-9]* acked, \([0-9.]*\) s since start).*/\1/p' \
    "$LOG_DIR/ledger-$v.log" | tail -n 1)
  [ -n "$sec" ] || die "ledger $v: no --drain line in $LOG_DIR/ledger-$v.log"
  awk "BEGIN { printf \"%.0f\", $N / $sec }"
}

declare -A RES=()
for r in $(seq 1 "$ROUNDS"); do
  read -r cf cn cl <<<"$(claim_leg "$r")"
  [ -n "$cl" ] || die "claim round $r failed (log: $LOG_DIR/claims-$r.out)"
  RES[claim.fk]+=" $cf" RES[claim.nofk]+=" $cn" RES[claim.nofk+lock]+=" $cl"
  fill
  if [ $((r % 2)) = 1 ]; then order=(fk nofk); else order=(nofk fk); fi
  for v in "${order[@]}"; do
    x=$(ledger_leg "$v")
    RES[ledger.$v]+=" $x"
    declare "l_$v=$x"
  done
  # shellcheck disable=SC2154 # l_fk, l_nofk: declared above
  echo "round $r: claim ms fk $cf nofk $cn nofk+lock $cl; ledger items/s fk $l_fk nofk $l_nofk (load $(cut -d' ' -f1 /proc/loadavg))"
done
# summary LEG V...: the median, the range, and the median per-round ratio
# to fk (for the claim: fk's ms / V's ms, so > 1 means V is faster)
summary() {
  local leg=$1 v i
  shift
  read -r -a base <<<"${RES[$leg.fk]}"
  for v in "$@"; do
    read -r -a xs <<<"${RES[$leg.$v]}"
    local ratios=()
    for i in "${!xs[@]}"; do
      if [ "$leg" = claim ]; then
        ratios+=("$(awk "BEGIN { printf \"%.3f\", ${base[$i]} / ${xs[$i]} }")")
      else
        ratios+=("$(awk "BEGIN { printf \"%.3f\", ${xs[$i]} / ${base[$i]} }")")
      fi
    done
    printf '%-7s %-10s median %s (%s), speed vs fk: median %s (%s)\n' "$leg" "$v" \
      "$(median "${xs[@]}")" "$(range "${xs[@]}")" "$(median "${ratios[@]}")" \
      "$(range "${ratios[@]}")"
  done
}
echo "median of $ROUNDS, N=$N, claim batch $BATCH (claim: ms per claim; ledger: items/s):"
summary claim fk nofk nofk+lock
summary ledger fk nofk
