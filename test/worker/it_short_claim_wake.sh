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
# Part 4: the wake-up comes as the item settles, not at the next of the
# wait's periodic checks (every 20 ms before): one key of 150 items needs
# 150 claim -> run -> ack rounds in a row, and a checked wait made each
# round at least 20 ms (>= 3 s in all). The bound is relative to the same
# chain drained with --drain (whose wait is woken by the settle itself),
# so a slow machine slows both sides alike.
# Part 5: only a keyed item's or a limited queue's settle ends the wait: a
# plain item's makes nothing claimable, and re-claiming on it made one
# empty claim per settle (counted by a statement trigger on the claims'
# UPDATE).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup short_claim_wake

oq_sql "CREATE TABLE kledger (n bigserial PRIMARY KEY, item_id uuid NOT NULL)" >/dev/null
SQL='INSERT INTO kledger (item_id) VALUES ($2)'
# The keyed parts ack one item per transaction: a batched --sql ack claims
# the key's next item itself (docs/design.md 5a, it_lib_ack_next), so only
# without it does a key's chain go through the claim loop's wake-up, which
# --exec, --http and --sql-per-item workers rely on.
KEYED=(--sql-per-item --sql "$SQL")

# ---- 1. 50 keys x 10 items: ten heads in a row per key
oq_sql "INSERT INTO onceq_items (ordering_key, payload)
        SELECT 'key-' || (g % 50), jsonb_build_object('g', g)
        FROM generate_series(1, 500) g" >/dev/null
t0=$(oq_now_ms)
oq_worker_start keyed --poll-interval 10s "${KEYED[@]}"
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
# only the claim loop's connection (application_name onceq-worker): an ack
# that claims a key's next item UPDATEs too
oq_sql "CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS
        \$\$ BEGIN IF current_setting('application_name') = 'onceq-worker'
        THEN PERFORM pg_sleep(0.3); END IF; RETURN NULL; END \$\$;
        CREATE TRIGGER slow_claim BEFORE UPDATE ON onceq_items
        FOR EACH STATEMENT EXECUTE FUNCTION slow_claim()" >/dev/null
oq_sql "INSERT INTO onceq_items (ordering_key, payload)
        SELECT 'k3-' || (g % 5), jsonb_build_object('g', g)
        FROM generate_series(1, 20) g" >/dev/null
t0=$(oq_now_ms)
oq_worker_start settled --poll-interval 10s "${KEYED[@]}"
w=$OQ_LAST_PID
oq_wait_until 8 "20 keyed items whose acks land during slow claims" oq_all_done
oq_log "20 keyed items under slow claims in $(($(oq_now_ms) - t0)) ms"
oq_stop "$w" 15
oq_check "settled worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "20/20"

# ---- 4. one key of 150 items: each round starts as the last item settles
oq_sql "DROP TRIGGER slow_claim ON onceq_items" >/dev/null
chain() {
  oq_sql "TRUNCATE kledger" >/dev/null
  oq_sql "INSERT INTO onceq_items (ordering_key, payload, run_at)
          SELECT 'chain', jsonb_build_object('g', g),
                 now() - interval '1 hour' + g * interval '1 ms'
          FROM generate_series(1, 150) g" >/dev/null
}
chain
t0=$(oq_now_ms)
oq_worker_start chain_drain --drain "${KEYED[@]}"
oq_wait_exit "$OQ_LAST_PID" 30
oq_check "chain --drain exit code" "$OQ_RC" 0
drain_ms=$(($(oq_now_ms) - t0))
oq_check "chain --drain items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
chain
t0=$(oq_now_ms)
oq_worker_start chain_wait --poll-interval 10s "${KEYED[@]}"
w=$OQ_LAST_PID
until oq_all_done; do
  [ $(($(oq_now_ms) - t0)) -lt 30000 ] || oq_fail "chain of 150 not drained in 30 s"
  sleep 0.02
done
wait_ms=$(($(oq_now_ms) - t0))
oq_log "one key of 150: --drain ${drain_ms} ms, waiting worker ${wait_ms} ms"
oq_stop "$w" 15
oq_check "chain worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "chain ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "150/150"
oq_check_le "waiting worker's chain (ms) against 2 x --drain's + 500" \
  "$wait_ms" $((2 * drain_ms + 500))

# ---- 5. plain items settling 60 ms apart: no claim per settle
oq_sql "TRUNCATE kledger" >/dev/null
oq_sql "CREATE TABLE claim_rows (n int NOT NULL);
        CREATE FUNCTION count_claim() RETURNS trigger LANGUAGE plpgsql AS
        \$\$ BEGIN INSERT INTO claim_rows SELECT count(*) FROM n;
        RETURN NULL; END \$\$;
        CREATE TRIGGER count_claim AFTER UPDATE ON onceq_items
        REFERENCING NEW TABLE AS n
        FOR EACH STATEMENT EXECUTE FUNCTION count_claim()" >/dev/null
oq_sql "INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('g', g) FROM generate_series(1, 8) g" >/dev/null
oq_worker_start plain --poll-interval 10s --concurrency 8 --sql \
  'INSERT INTO kledger (item_id) SELECT $2 FROM pg_sleep(($1->>$$g$$)::int * 0.06)'
w=$OQ_LAST_PID
oq_wait_until 8 "8 plain items of 60 to 480 ms" oq_all_done
sleep 0.3
oq_log "claims (rows each): $(oq_sql "SELECT string_agg(n::text, ' ') FROM claim_rows")"
oq_check_le "empty claims while 8 plain items settled" \
  "$(oq_sql 'SELECT count(*) FROM claim_rows WHERE n = 0')" 1
oq_stop "$w" 15
oq_check "plain worker's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows / distinct" \
  "$(oq_sql 'SELECT count(*) || $$/$$ || count(DISTINCT item_id) FROM kledger')" "8/8"
oq_log "PASS"
