#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in single quotes is SQL
# cli_limit: `onceq limit Q --concurrency N|none` with three workers of
# four executors each (issue 23 item 3): a sampler counts the queue's
# items claimed by live sessions every 20 ms and never sees more than N;
# every item is acknowledged once; `onceq stats` shows the limit; --json;
# usage errors.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup limit --url
t=$OQ_TMP
limit=2
items=30

oq_q "CREATE TABLE ledger (item_id uuid PRIMARY KEY)"
[ -z "${ONCEQ_TEST_ROLE:-}" ] || oq_q "GRANT INSERT, SELECT ON ledger TO onceq_test_worker"

# ---------------------------------------------------------------- usage
oq_run_cli "$t/u.out" "$t/u.err" limit
oq_check "limit without a queue: usage error" "$OQ_RC" 2
oq_run_cli "$t/u.out" "$t/u.err" limit lq
oq_check "limit without --concurrency: usage error" "$OQ_RC" 2
oq_run_cli "$t/u.out" "$t/u.err" limit lq --concurrency -1
oq_check "a negative limit: usage error" "$OQ_RC" 2
oq_run_cli "$t/u.out" "$t/u.err" limit lq --concurrency 2x
oq_check "a bad limit: usage error" "$OQ_RC" 2

oq_run_cli "$t/l.out" "$t/l.err" limit lq --concurrency $limit
oq_check "limit exit" "$OQ_RC" 0
oq_check "limit says so" "$(cat "$t/l.out")" \
  "queue lq: at most $limit items claimed at once"
oq_run_cli "$t/lj.out" "$t/lj.err" --json limit lq --concurrency $limit
oq_check "limit --json" "$(oq_jget "$t/lj.out" 'd["queue"], d["concurrency"]')" \
  "lq $limit"
for i in $(seq 1 $items); do echo "{\"n\": $i}"; done |
  "$ONCEQ_CLI" push --queue lq >/dev/null || oq_fail "push failed"

for w in 1 2 3; do
  oq_worker_start "w$w" --queue lq --concurrency 4 --poll-interval 200ms \
    --sql 'INSERT INTO ledger (item_id) SELECT $2 FROM pg_sleep(0.1)'
done
most=0 samples=0
deadline=$(($(oq_now_ms) + 60000))
while [ "$(oq_now_ms)" -lt "$deadline" ]; do
  read -r n left < <(oq_q "SELECT (SELECT count(*) FROM onceq_items i JOIN
    onceq_sessions s ON s.id = i.claim WHERE i.queue = 'lq'
    AND s.heartbeated_at + s.expiry >= now()),
    (SELECT count(*) FROM onceq_items WHERE queue = 'lq')" | tr '|' ' ')
  [ "$n" -gt "$most" ] && most=$n
  samples=$((samples + 1))
  [ "$left" -eq 0 ] && break
  sleep 0.02
done
oq_log "$samples samples, at most $most claimed by live sessions"
oq_check_le "never more than the limit claimed" "$most" $limit
oq_check "every item acknowledged once" "$(oq_q 'SELECT count(*) FROM ledger')" $items
oq_check "no item left" "$(oq_q "SELECT count(*) FROM onceq_items WHERE queue = 'lq'")" 0

oq_run_cli "$t/s.out" "$t/s.err" stats
oq_match "stats shows the limit" "$(grep '^lq ' "$t/s.out")" " limit $limit\$"
oq_run_cli "$t/sj.out" "$t/sj.err" --json stats
oq_check "stats --json concurrency_limit" \
  "$(oq_jget "$t/sj.out" '[q["concurrency_limit"] for q in d["queues"] if q["queue"] == "lq"]')" \
  "[$limit]"
oq_run_cli "$t/n.out" "$t/n.err" --json limit lq --concurrency none
oq_check "limit none --json" "$(oq_jget "$t/n.out" 'd["concurrency"]')" "None"
oq_log "ok"
