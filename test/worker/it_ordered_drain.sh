#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in the --sql statement is for the server
# it_ordered_drain.sh: `onceq-worker --drain` empties a queue of keyed
# items. With ordering keys a claim can find nothing while the worker's own
# items block every key (one item per key in flight); if those finish
# between that claim and the drain's "anything in flight?" test, the worker
# used to exit with most of the queue left ("nothing ready is left" after
# 7,192 of 20,000 items at 1,000 keys x 20 in test/bench/keys_bench.sh).
# 1,000 keys x 10 items, interleaved as events of many keys arrive; one
# worker at its defaults, four drains: each must exit 0 with the queue
# empty, the ledger exact and, per key, in enqueue order.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup ordered_drain

KEYS=1000
PER=10
N=$((KEYS * PER))
oq_sql "CREATE TABLE kledger (n bigserial PRIMARY KEY, item_id uuid NOT NULL)" >/dev/null
for run in 1 2 3 4; do
  oq_sql "TRUNCATE kledger; CREATE TABLE IF NOT EXISTS expect (id uuid, okey text, seq bigint);
          TRUNCATE expect;
          INSERT INTO onceq_items (ordering_key, payload)
          SELECT 'key-' || (g % $KEYS), jsonb_build_object('g', g)
          FROM generate_series(1, $N) g;
          INSERT INTO expect SELECT id, ordering_key, enqueue_seq FROM onceq_items" >/dev/null
  oq_worker_start "drain$run" --drain --sql 'INSERT INTO kledger (item_id) VALUES ($2)'
  oq_wait_exit "$OQ_LAST_PID" 60
  oq_check "run $run: --drain exit code" "$OQ_RC" 0
  oq_check "run $run: items left after --drain" \
    "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
  oq_check "run $run: ledger rows / distinct" \
    "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "$N/$N"
  oq_check "run $run: acks out of enqueue order within a key" \
    "$(oq_sql 'SELECT count(*) FROM (SELECT e.seq, lag(e.seq) OVER
               (PARTITION BY e.okey ORDER BY l.n) AS prev
               FROM kledger l JOIN expect e ON e.id = l.item_id) x
               WHERE prev > seq')" 0
done
oq_log "PASS"
