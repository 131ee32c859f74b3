#!/usr/bin/env bash
# it_results_retention.sh: `onceq coordinator --keep-results D` deletes kept
# outcomes (onceq_results, issue 11) finished more than D ago and no
# others; `--keep-results off` keeps them all.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup results_retention

oq_sql "INSERT INTO onceq_results (item_id, queue, outcome, finished_at)
          SELECT gen_random_uuid(), 'old', 'done', now() - interval '2 hours'
          FROM generate_series(1, 1500);
        INSERT INTO onceq_results (item_id, queue, outcome)
          SELECT gen_random_uuid(), 'new', 'cancelled'
          FROM generate_series(1, 3)" >/dev/null

oq_coordinator off --keep-results off --interval 200ms
oq_wait_until 15 "the coordinator leads" oq_sql_is \
  "SELECT count(*) FROM onceq_leases" 1
sleep 1
oq_check "--keep-results off keeps old rows" \
  "$(oq_sql "SELECT count(*) FROM onceq_results WHERE queue = 'old'")" 1500
kill "$OQ_LAST_PID"
oq_wait_exit "$OQ_LAST_PID" 10

oq_coordinator keep --keep-results 1h --interval 200ms
oq_wait_until 15 "rows older than 1h deleted (in batches of 1000)" oq_sql_is \
  "SELECT count(*) FROM onceq_results WHERE queue = 'old'" 0
oq_check "newer rows kept" \
  "$(oq_sql "SELECT count(*) FROM onceq_results WHERE queue = 'new'")" 3
oq_contains "logged" "$(cat "$OQ_TMP/keep.log")" \
  "retention: deleted"
oq_log "PASS"
