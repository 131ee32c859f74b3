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
oq_run_cli "$t/sh0.out" "$t/sh0.err" limit lq
oq_check "limit QUEUE with no option shows it" "$OQ_RC" 0
oq_check "a queue without controls" "$(cat "$t/sh0.out")" "queue lq: no concurrency limit
queue lq: no rate limit
queue lq: not paused"
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
oq_run_cli "$t/pz.out" "$t/pz.err" pause lq
oq_check "pause lq" "$OQ_RC" 0
oq_run_cli "$t/sh1.out" "$t/sh1.err" limit lq
oq_check "limit lq shows the limit and the pause" "$(cat "$t/sh1.out")" \
  "queue lq: at most $limit items claimed at once
queue lq: no rate limit
queue lq: paused"
oq_run_cli "$t/sh1.json" "$t/sh1.err" --json limit lq
oq_check "limit lq --json" \
  "$(oq_jget "$t/sh1.json" 'd["queue"], d["concurrency"], d["rate"], d["paused"]')" \
  "lq $limit None True"
oq_run_cli "$t/pz.out" "$t/pz.err" resume lq
oq_run_cli "$t/n.out" "$t/n.err" --json limit lq --concurrency none
oq_check "limit none --json" "$(oq_jget "$t/n.out" 'd["concurrency"]')" "None"

# ---------------------------------------------------------------- rate
oq_run_cli "$t/u.out" "$t/u.err" limit rq --rate 5
oq_check "--rate without an interval: usage error" "$OQ_RC" 2
oq_run_cli "$t/u.out" "$t/u.err" limit rq --rate 0/1s
oq_check "--rate 0/1s: usage error" "$OQ_RC" 2
oq_run_cli "$t/r.out" "$t/r.err" limit rq --rate 5/500ms
oq_check "limit --rate exit" "$OQ_RC" 0
oq_check "limit --rate says so" "$(cat "$t/r.out")" \
  "queue rq: at most 5 starts per 500ms"
for i in $(seq 1 20); do echo "{\"r\": $i}"; done |
  "$ONCEQ_CLI" push --queue rq >/dev/null || oq_fail "push failed"
t0=$(oq_now_ms)
oq_worker_start r1 --queue rq --concurrency 8 --poll-interval 100ms \
  --sql 'INSERT INTO ledger (item_id) VALUES ($2)'
oq_worker_start r2 --queue rq --concurrency 8 --poll-interval 100ms \
  --sql 'INSERT INTO ledger (item_id) VALUES ($2)'
oq_wait_until 30 "the rate-limited queue drains" oq_sql_is \
  "SELECT count(*) FROM onceq_items WHERE queue = 'rq'" 0
took=$(($(oq_now_ms) - t0))
# a full bucket of 5 at once, then 5 per 500 ms: 15 more need >= 1500 ms
oq_log "20 items at 5/500ms took $took ms"
oq_check_le "the rate limit held (>= 1500 ms for 20 items)" 1500 "$took"
oq_run_cli "$t/sj.out" "$t/sj.err" --json stats
oq_check "stats --json rate_limit" \
  "$(oq_jget "$t/sj.out" '[(q["rate_limit"], q["rate_interval_ms"]) for q in d["queues"] if q["queue"] == "rq"]')" \
  "[(5, 500)]"
oq_run_cli "$t/rs.out" "$t/rs.err" limit rq
oq_check "limit rq shows the rate" "$(sed -n 2p "$t/rs.out")" \
  "queue rq: at most 5 starts per 500ms"
oq_run_cli "$t/rs.json" "$t/rs.err" --json limit rq
oq_check "limit rq --json rate" \
  "$(oq_jget "$t/rs.json" 'd["rate"], d["rate_interval_ms"], d["concurrency"]')" \
  "5 500 None"
oq_run_cli "$t/rn.out" "$t/rn.err" --json limit rq --rate none
oq_check "limit --rate none --json" "$(oq_jget "$t/rn.out" 'd["rate"]')" "None"
oq_log "ok"
