#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in single quotes is SQL
# cli_pause: `onceq pause` and `onceq resume` against a running worker
# (issue 23 item 2): while a queue is paused its new items are not claimed
# (enqueue works, they wait ready), `onceq stats` (table and --json) marks
# it, and after `onceq resume` the worker claims them again within one
# poll interval (plus scheduling slack); --json output; usage errors.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup pause --url
t=$OQ_TMP
poll_ms=300

ledger_is() { [ "$(oq_q 'SELECT count(*) FROM ledger')" = "$1" ]; }

oq_q "CREATE TABLE ledger (item_id uuid PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())"
[ -z "${ONCEQ_TEST_ROLE:-}" ] || oq_q "GRANT INSERT, SELECT ON ledger TO onceq_test_worker"

# ---------------------------------------------------------------- usage
oq_run_cli "$t/u.out" "$t/u.err" pause
oq_check "pause without a queue: usage error" "$OQ_RC" 2
oq_run_cli "$t/u.out" "$t/u.err" resume ""
oq_check "resume of an empty name: usage error" "$OQ_RC" 2

oq_worker_start worker --queue pq --concurrency 2 \
  --poll-interval "${poll_ms}ms" --sql 'INSERT INTO ledger (item_id) VALUES ($2)'
"$ONCEQ_CLI" push --queue pq '{"n": 0}' >/dev/null || oq_fail "push failed"
oq_wait_until 20 "the worker runs pq's first item" ledger_is 1

# ---------------------------------------------------------------- pause
oq_run_cli "$t/p.out" "$t/p.err" pause pq
oq_check "pause exit" "$OQ_RC" 0
oq_check "pause says so" "$(cat "$t/p.out")" "queue pq paused"
oq_run_cli "$t/pj.out" "$t/pj.err" --json pause pq
oq_check "a second pause (idempotent), --json" "$OQ_RC" 0
oq_check "pause --json" "$(oq_jget "$t/pj.out" 'd["queue"], d["paused"]')" \
  "pq True"
for i in 1 2 3; do
  "$ONCEQ_CLI" push --queue pq "{\"n\": $i}" >/dev/null ||
    oq_fail "push into a paused queue failed"
done
sleep $((poll_ms * 5 / 1000)).$((poll_ms * 5 % 1000))
oq_check "nothing claimed in 5 poll intervals while paused" \
  "$(oq_q 'SELECT count(*) FROM onceq_items WHERE claim IS NULL')" 3
oq_check "ledger unchanged while paused" "$(oq_q 'SELECT count(*) FROM ledger')" 1

oq_run_cli "$t/s.out" "$t/s.err" stats
oq_check "stats exit" "$OQ_RC" 0
oq_match "stats marks the queue paused" "$(grep '^pq ' "$t/s.out")" ' paused$'
oq_run_cli "$t/sj.out" "$t/sj.err" --json stats
oq_check "stats --json paused" \
  "$(oq_jget "$t/sj.out" '[q["paused"] for q in d["queues"] if q["queue"] == "pq"]')" \
  "[True]"

# ---------------------------------------------------------------- resume
t0=$(oq_now_ms)
oq_run_cli "$t/r.out" "$t/r.err" resume pq
oq_check "resume exit" "$OQ_RC" 0
oq_check "resume says so" "$(cat "$t/r.out")" "queue pq resumed"
oq_wait_until 20 "the worker claims pq again" ledger_is 4
took=$(($(oq_now_ms) - t0))
oq_log "claims resumed after ${took} ms (poll interval ${poll_ms} ms)"
oq_check_le "resumed within one poll interval (+1500 ms slack)" "$took" \
  $((poll_ms + 1500))
oq_run_cli "$t/sj.out" "$t/sj.err" --json stats
oq_check "stats --json after resume" \
  "$(oq_jget "$t/sj.out" '[q["paused"] for q in d["queues"] if q["queue"] == "pq"]')" \
  "[]"
oq_run_cli "$t/rj.out" "$t/rj.err" --json resume pq
oq_check "resume --json (idempotent)" \
  "$(oq_jget "$t/rj.out" 'd["queue"], d["paused"]')" "pq False"
oq_log "ok"
