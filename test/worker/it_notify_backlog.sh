#!/usr/bin/env bash
# shellcheck disable=SC2016 # $$ bodies are for the server
# it_notify_backlog.sh: a saturated worker keeps reading its LISTEN
# connection (issue 20, finding 5). PostgreSQL keeps one NOTIFY queue for
# the whole server, freed only behind its slowest listener; a listening
# backend whose client does not read blocks on its socket once the socket
# buffers are full, and the queue then grows with every notification sent
# anywhere until enqueues fail ("too many notifications in the NOTIFY
# queue"). The worker read its listener only when it waited for items,
# never while a backlog kept it busy.
#
# The worker (--sql 'SELECT pg_sleep(0.05)', --concurrency 2: about 40
# items/s) starts on a backlog of 2,000 items, so it stays saturated for
# the whole test. A producer enqueues with plain INSERTs, one transaction
# each, 5,000 of them: an item for the worker and one for a neighbour queue
# nobody serves. The enqueue trigger sends NOTIFY onceq with the queue's
# name, and the worker's listener receives both; the neighbour's name is
# 4,000 characters (`onceq push` caps names at 1,000 bytes, a plain INSERT
# does not), so each notification is 4 KB and a few thousand fill the
# socket buffers (about 4 MB here) as hours of short ones would.
# pg_notification_queue_usage() (a fraction of the queue's 8 GB) is
# sampled every 100 transactions by the producer itself (paced to about
# 2,000 a second) and once more 1 s after it ends: it must stay flat (below
# 0.0002 throughout, about 200 pages of 8 kB, and 0.00005 at the end; with
# the worker not reading it climbs past 0.001 and stays there). The backlog must still
# be there at the end (the worker was saturated throughout).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup notify_backlog

oq_sql "CREATE TABLE usage_samples (at_tx int, usage float8 NOT NULL)" >/dev/null
oq_sql "INSERT INTO onceq_items (payload)
        SELECT '{}' FROM generate_series(1, 2000)" >/dev/null

oq_worker_start busy --concurrency 2 --sql 'SELECT pg_sleep(0.05)'
w=$OQ_LAST_PID
busy() { [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim IS NOT NULL")" -gt 0 ]; }
oq_wait_until 15 "the worker to claim" busy

# The producer is the test's load, not the code under test: read committed
# whatever the pass's isolation, so a serialization failure cannot cut the
# loop short.
t0=$(oq_now_ms)
oq_sql >/dev/null <<'EOF'
SET default_transaction_isolation = 'read committed';
DO $$
DECLARE
  neighbour text := 'neighbour_' || repeat('n', 4000);
BEGIN
  FOR i IN 1..5000 LOOP
    INSERT INTO onceq_items (payload) VALUES ('{}');
    INSERT INTO onceq_items (queue, payload) VALUES (neighbour, '{}');
    IF i % 100 = 0 THEN
      INSERT INTO usage_samples VALUES (i, pg_notification_queue_usage());
    END IF;
    IF i % 10 = 0 THEN
      PERFORM pg_sleep(0.005); -- at most about 2,000 a second (8 MB/s)
    END IF;
    COMMIT;
  END LOOP;
END
$$;
EOF
oq_log "producer: 5000 transactions in $(($(oq_now_ms) - t0)) ms"
sleep 1
oq_sql "INSERT INTO usage_samples VALUES (NULL, pg_notification_queue_usage())" >/dev/null
oq_sql "SELECT coalesce(at_tx::text, 'end') || ': ' || usage
        FROM usage_samples ORDER BY at_tx NULLS LAST" >"$OQ_TMP/usage.txt"
oq_log "usage samples (transactions: fraction of the queue):" \
  "$(tr '\n' ' ' <"$OQ_TMP/usage.txt")"
max=$(oq_sql "SELECT max(usage) FROM usage_samples")
oq_metric notify_queue_usage_max "$max" fraction "saturated worker, 5000 enqueues"
# in millionths, so the integer check prints both sides; 200 leaves room
# for a turn of the worker's loop delayed by a loaded machine (the socket
# buffers hold about half a second of this producer)
oq_check_le "pg_notification_queue_usage() x 1e6 while producing, at most" \
  "$(oq_sql "SELECT ceil(max(usage) * 1e6)::int FROM usage_samples")" 200
oq_check_le "pg_notification_queue_usage() x 1e6 at the end, at most" \
  "$(oq_sql "SELECT ceil(usage * 1e6)::int FROM usage_samples
             WHERE at_tx IS NULL")" 50
oq_check_le "items still waiting for the worker (it stayed saturated), at least 1" \
  1 "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'default' AND claim IS NULL")"
oq_check "worker alive" "$(oq_alive "$w" && echo yes || echo no)" yes
oq_stop "$w" 15
oq_check "exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
