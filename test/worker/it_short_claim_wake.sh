#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in the --sql statements is for the server
# it_short_claim_wake.sh: a worker whose claim came back short while its
# own items were in flight claims again as soon as one of them settles,
# not a poll interval later. With ordering keys a claim gets one head per
# key, and the next item of a key is claimable only once the worker's own
# head is acknowledged; under a concurrency limit the worker's own items
# count against it. Waiting for a NOTIFY or the poll interval there ran a
# keyed queue at one item per key per poll interval (4 workers
# --partitioned drained 1,000 keys x 20 at 500 to 1,000 items/s against
# 15,000 to 20,000 without keys in test/bench/keys_bench.sh) and a queue
# limited to 3 at about 3 claims a second. Poll interval 10 s here, so
# either part takes minutes without the wake-up and about a second with it.
# Part 3: our items may all settle WHILE a claim runs (its snapshot was
# taken before their acks committed), so the claim comes back short with
# nothing of ours left in flight; that is no sign of an empty queue
# either (a statement trigger slows every claim by 300 ms to make the
# window certain; it failed the serializable pass of a CI run by chance).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup short_claim_wake

oq_sql "CREATE TABLE kledger (n bigserial PRIMARY KEY, item_id uuid NOT NULL)" >/dev/null
SQL='INSERT INTO kledger (item_id) VALUES ($2)'

# ---- 1. 50 keys x 10 items: ten heads in a row per key
oq_sql "INSERT INTO onceq_items (ordering_key, payload)
        SELECT 'key-' || (g % 50), jsonb_build_object('g', g)
        FROM generate_series(1, 500) g" >/dev/null
t0=$(oq_now_ms)
oq_worker_start keyed --poll-interval 10s --sql "$SQL"
w=$OQ_LAST_PID
oq_wait_until 8 "500 keyed items acknowledged with a 10 s poll interval" oq_all_done
oq_log "500 keyed items in $(($(oq_now_ms) - t0)) ms"
oq_stop "$w" 15
oq_check "keyed worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "500/500"

# ---- 2. a concurrency limit of 2, 30 items of 50 ms
oq_sql "TRUNCATE kledger" >/dev/null
oq_run_cli "$OQ_TMP/limit.out" "$OQ_TMP/limit.err" --db "$OQ_DSN" limit default --concurrency 2
oq_check "onceq limit exit code" "$OQ_RC" 0
oq_sql "INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('g', g) FROM generate_series(1, 30) g" >/dev/null
t0=$(oq_now_ms)
oq_worker_start limited --poll-interval 10s \
  --sql 'INSERT INTO kledger (item_id) SELECT $2 FROM pg_sleep(0.05)'
w=$OQ_LAST_PID
oq_wait_until 8 "30 items under a limit of 2 with a 10 s poll interval" oq_all_done
oq_log "30 limited items in $(($(oq_now_ms) - t0)) ms"
oq_stop "$w" 15
oq_check "limited worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "30/30"
# ---- 3. acks that commit while the claim runs
oq_run_cli "$OQ_TMP/limit3.out" "$OQ_TMP/limit3.err" --db "$OQ_DSN" limit default --concurrency none
oq_check "onceq limit none exit code" "$OQ_RC" 0
oq_sql "TRUNCATE kledger" >/dev/null
oq_sql "CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS
        \$\$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END \$\$;
        CREATE TRIGGER slow_claim BEFORE UPDATE ON onceq_items
        FOR EACH STATEMENT EXECUTE FUNCTION slow_claim()" >/dev/null
oq_sql "INSERT INTO onceq_items (ordering_key, payload)
        SELECT 'k3-' || (g % 5), jsonb_build_object('g', g)
        FROM generate_series(1, 20) g" >/dev/null
t0=$(oq_now_ms)
oq_worker_start settled --poll-interval 10s --sql "$SQL"
w=$OQ_LAST_PID
oq_wait_until 8 "20 keyed items whose acks land during slow claims" oq_all_done
oq_log "20 keyed items under slow claims in $(($(oq_now_ms) - t0)) ms"
oq_stop "$w" 15
oq_check "settled worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "20/20"
oq_log "PASS"
