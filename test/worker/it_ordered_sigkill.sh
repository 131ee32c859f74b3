#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_ordered_sigkill.sh: ordering keys under kill -9 (issue 23 item 5).
# 30 keys x 8 items; workers A and B drain them with a --sql handler that
# writes a ledger row (key, enqueue_seq, a commit serial) in the ack
# transaction after a short sleep; A is killed midway while it holds
# claims. B's reaper releases A's heads, B finishes: the ledger is exact
# (0 duplicates, 0 lost) and, within every key, acknowledgements committed
# in enqueue order (the ledger's serial order is the enqueue_seq order).
# A head that A was running when it died is run again by B (its effects
# in A's uncommitted transaction were rolled back): that is the one
# overlap the protocol allows, and it is not visible in the ledger.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup ordered_sigkill

KEYS=30
PER=8
N=$((KEYS * PER))
SQL='INSERT INTO kledger (item_id, okey, seq)
     SELECT i.id, i.ordering_key, i.enqueue_seq FROM onceq_items i,
     pg_sleep(0.05) WHERE i.id = $2::uuid'
FAST=(--heartbeat-interval 200ms --session-expiry 1600ms --poll-interval 200ms
  --batch 4)

oq_sql "CREATE TABLE kledger (n bigserial PRIMARY KEY, item_id uuid NOT NULL,
          okey text NOT NULL, seq bigint NOT NULL);
        INSERT INTO onceq_items (ordering_key, payload)
        SELECT 'key-' || k, jsonb_build_object('k', k, 'g', g)
        FROM generate_series(1, $PER) g, generate_series(1, $KEYS) k
        ORDER BY g, k" >/dev/null

oq_worker_start A "${FAST[@]}" --concurrency 4 --sql "$SQL"
wa=$OQ_LAST_PID
oq_worker_start B "${FAST[@]}" --concurrency 4 --sql "$SQL"
wb=$OQ_LAST_PID
a_session() { oq_sql "SELECT id FROM onceq_sessions WHERE pid = $wa"; }
a_registered() { [ -n "$(a_session)" ]; }
oq_wait_until 10 "A's session" a_registered
sid_a=$(a_session)

midway() {
  [ "$(oq_sql 'SELECT count(*) FROM kledger')" -ge 30 ] &&
    [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")" -gt 0 ]
}
oq_wait_until 40 "ledger >= 30 with claims held by A" midway
kill -KILL "$wa"
held=$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")
oq_log "killed A (-9) holding $held head(s)"
oq_wait_exit "$wa" 5
oq_check "A's exit status" "$OQ_RC" 137
# while A's session lives, the keys whose heads it held stay blocked
oq_check "no item of a key held by A is claimed by B" \
  "$(oq_sql "SELECT count(*) FROM onceq_items a JOIN onceq_items b
             ON a.ordering_key = b.ordering_key AND a.id <> b.id
             WHERE a.claim = '$sid_a' AND b.claim IS NOT NULL")" 0

oq_wait_until 120 "B to finish every item" oq_all_done
oq_stop "$wb" 15
oq_check "B's exit code after SIGTERM" "$OQ_RC" 0
oq_check "ledger rows (0 duplicates)" "$(oq_sql 'SELECT count(*) FROM kledger')" "$N"
oq_check "distinct items (0 lost)" \
  "$(oq_sql 'SELECT count(DISTINCT item_id) FROM kledger')" "$N"
oq_check "acks out of enqueue order within a key" \
  "$(oq_sql 'SELECT count(*) FROM kledger a JOIN kledger b
             ON a.okey = b.okey AND a.n < b.n AND a.seq > b.seq')" 0
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_log "PASS"
