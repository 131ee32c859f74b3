#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# parts_resize.sh: P changes on a running cluster.
#
# Four `onceq-worker --partitioned` work while a producer enqueues 12,000
# items. P goes 8 -> 3 (more members than parts: one worker idles) -> 50 ->
# 1024 -> 5 with `onceq parts set`; after each change the ownership rows
# converge to the members' blocks under the new P (bounded wait; no row
# left >= P), and `onceq parts --json` reports it. The ledger written by
# the --sql handler in the ack transaction is exact at the end.
source "$(dirname "${BASH_SOURCE[0]}")/parts_lib.sh"
oq_setup parts_resize

N=${PARTS_RESIZE_N:-12000}
CONVERGE_S=15
COMMON=(--heartbeat-interval 300ms --session-expiry 2s --poll-interval 200ms
  --concurrency 4 --partitioned --orphan-after 5s --sql "$PARTS_SQL")

"$ONCEQ_CLI" --db "$OQ_DSN" parts set 8 >/dev/null
parts_ledger_table
for w in w1 w2 w3 w4; do oq_worker_start "$w" "${COMMON[@]}"; done
four_members() { [ "$(parts_members)" = 4 ]; }
oq_wait_until 15 "4 members" four_members
oq_wait_until "$CONVERGE_S" "P=8 to converge" parts_converged 8
parts_producer "$N" 200 0.3

resize() { # resize P
  local t0
  t0=$(oq_now_ms)
  "$ONCEQ_CLI" --db "$OQ_DSN" parts set "$1" >/dev/null
  oq_wait_until "$CONVERGE_S" "P=$1 to converge" parts_converged "$1"
  oq_metric "parts_resize_to_$1" $(($(oq_now_ms) - t0)) ms "converged"
  oq_check "rows >= P after resize to $1" \
    "$(parts_sql "SELECT count(*) FROM onceq_session_parts WHERE part >= $1")" 0
  oq_check "onceq parts: partitions" "$(parts_json_field partitions)" "$1"
  oq_check "onceq parts: unowned" "$(parts_json_field unowned)" 0
  oq_check "owned parts" \
    "$(parts_sql 'SELECT count(*) FROM onceq_session_parts')" "$1"
}
sleep 2
resize 3
oq_check "onceq parts: owners with P=3 and 4 members" \
  "$(parts_json_field owners)" 3
sleep 2
resize 50
sleep 2
resize 1024
sleep 2
resize 5

oq_wait_exit "$PARTS_PRODUCER" 300
oq_check "producer exit status" "$OQ_RC" 0
oq_wait_until 120 "every item acknowledged" parts_all_done
for pid in "${OQ_PIDS[@]}"; do
  if [ "$pid" != "$PARTS_PRODUCER" ]; then
    oq_stop "$pid" 30
    oq_check "worker $pid exit status after SIGTERM" "$OQ_RC" 0
  fi
done
parts_check_ledger "$N"
oq_metric parts_resize_wait_max "$(parts_max_wait_ms claimed_at)" ms
oq_check "ownership rows" "$(oq_sql 'SELECT count(*) FROM onceq_session_parts')" 0
oq_log "PASS"
