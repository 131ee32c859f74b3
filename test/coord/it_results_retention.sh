#!/usr/bin/env bash
# it_results_retention.sh: `onceq coordinator --keep-results D` deletes kept
# outcomes (onceq_results, issue 11) finished more than D ago and no
# others; `--keep-results off` keeps them all.
source "$(dirname "$0")/coord_lib.sh"
co_setup results_retention

co_sql "INSERT INTO onceq_results (item_id, queue, outcome, finished_at)
          SELECT gen_random_uuid(), 'old', 'done', now() - interval '2 hours'
          FROM generate_series(1, 1500);
        INSERT INTO onceq_results (item_id, queue, outcome)
          SELECT gen_random_uuid(), 'new', 'cancelled'
          FROM generate_series(1, 3)" >/dev/null

co_coordinator off --keep-results off --interval 200ms
co_wait_until 15 "the coordinator leads" co_sql_is \
  "SELECT count(*) FROM onceq_leases" 1
sleep 1
co_check "--keep-results off keeps old rows" \
  "$(co_sql "SELECT count(*) FROM onceq_results WHERE queue = 'old'")" 1500
kill "$CO_LAST_PID"
co_wait_exit "$CO_LAST_PID" 10

co_coordinator keep --keep-results 1h --interval 200ms
co_wait_until 15 "rows older than 1h deleted (in batches of 1000)" co_sql_is \
  "SELECT count(*) FROM onceq_results WHERE queue = 'old'" 0
co_check "newer rows kept" \
  "$(co_sql "SELECT count(*) FROM onceq_results WHERE queue = 'new'")" 3
co_contains "logged" "$(cat "$CO_TMP/keep.log")" \
  "retention: deleted"
co_log "PASS"
