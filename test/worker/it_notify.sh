#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_notify.sh: LISTEN/NOTIFY wakes an idle worker. With --poll-interval
# 60s, a committed enqueue (a plain psql INSERT) starts running well before
# the next poll: the handler's clock_timestamp() minus the item's
# created_at (both the server's clock, read inside the ack transaction)
# must be < 2 s; it is printed. A rolled-back enqueue neither wakes the
# worker (its claim connection runs no new query) nor runs anything.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup notify

SQL='INSERT INTO ledger (item_id, created_at, started_at)
     SELECT $2, created_at, clock_timestamp() FROM onceq_items WHERE id = $2'
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, created_at timestamptz,
                             started_at timestamptz NOT NULL)" >/dev/null

oq_worker_start idle --poll-interval 60s --sql "$SQL"
w=$OQ_LAST_PID
# the claim loop's connection (application_name onceq-worker): the start of
# its last query tells when it last claimed
claim_conn_query_start() {
  oq_sql "SELECT coalesce(max(query_start)::text, '') FROM pg_stat_activity
          WHERE datname = current_database()
            AND application_name = 'onceq-worker'"
}
registered() {
  [ "$(oq_session_count_for_pid "$w")" = 1 ] && [ -n "$(claim_conn_query_start)" ]
}
oq_wait_until 10 "the worker to register" registered
# let it finish its first (empty) claim and go idle on LISTEN
sleep 1

lat_max=0
for round in 1 2 3; do
  id=$(oq_sql "INSERT INTO onceq_items (payload) VALUES ('{\"round\": $round}')
               RETURNING id")
  ran() { [ "$(oq_sql "SELECT count(*) FROM ledger WHERE item_id = '$id'")" = 1 ]; }
  # bounded at 5 s, well under the next poll (45-60 s after the last claim)
  oq_wait_until 5 "round $round's item to run" ran
  lat=$(oq_sql "SELECT round(extract(epoch FROM started_at - created_at) * 1000)
                FROM ledger WHERE item_id = '$id'")
  oq_metric "notify_wakeup_latency_round$round" "$lat" ms \
    "enqueue to handler start, --poll-interval 60s"
  [ "$lat" -gt "$lat_max" ] && lat_max=$lat
done
oq_check_le "worst enqueue-to-start latency (ms)" "$lat_max" 2000
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0

# ---- a rolled-back enqueue: no wake-up, nothing runs
sleep 0.3 # the claim that followed the last item is over
qs_before=$(claim_conn_query_start)
oq_sql "BEGIN;
        INSERT INTO onceq_items (payload) VALUES ('{\"rolled\": \"back\"}');
        ROLLBACK" >/dev/null
sleep 1.5
qs_after=$(claim_conn_query_start)
oq_log "claim connection's last query start: before $qs_before, after $qs_after"
oq_check "claim queries after a rolled-back enqueue (last query start)" \
  "$qs_after" "$qs_before"
oq_check "ledger rows" "$(oq_sql 'SELECT count(*) FROM ledger')" 3
oq_check "items" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
# The window above proves "no wake-up" only if no poll could fall in it:
# the next poll comes 45-60 s after the last claim (qs_before; 60 s, not
# 10: on a loaded machine the window took over 7.5 s).
oq_check_le "seconds from the last claim to the end of the window (< 45 s poll)" \
  "$(oq_sql "SELECT ceil(extract(epoch FROM now() - '$qs_before'::timestamptz))")" 44
oq_check "worker alive" "$(oq_alive "$w" && echo yes || echo no)" yes
oq_stop "$w" 10
oq_check "exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
