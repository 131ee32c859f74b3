#!/usr/bin/env bash
# it_retention.sh: the leader deletes onceq_done rows older than
# --keep-done and onceq_dead rows older than --keep-dead, in batches of
# 1000, and nothing younger. While notifications are on, old dead rows not
# notified yet are kept. `off` keeps everything.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup retention

FLAGS=(--interval 200ms --heartbeat-interval 200ms --session-expiry 1600ms)

# done: 2500 rows 2 h old (3 batches), 7 rows 10 min old, 3 rows 59 min old
# dead: 1500 rows 3 h old, 4 rows 30 min old, 2 rows 1h59m old
oq_sql "INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'q', 1, now() - interval '3 hours',
                 now() - interval '2 hours' FROM generate_series(1, 2500);
        INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'q', 1, now() - interval '1 hour',
                 now() - interval '10 minutes' FROM generate_series(1, 7);
        INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'q', 1, now() - interval '1 hour',
                 now() - interval '59 minutes' FROM generate_series(1, 3);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at, died_at)
          SELECT gen_random_uuid(), 'q', '{}', 0, 1, 1,
                 now() - interval '4 hours', now() - interval '3 hours'
          FROM generate_series(1, 1500);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at, died_at)
          SELECT gen_random_uuid(), 'q', '{}', 0, 1, 1,
                 now() - interval '1 hour', now() - interval '30 minutes'
          FROM generate_series(1, 4);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at, died_at)
          SELECT gen_random_uuid(), 'q', '{}', 0, 1, 1,
                 now() - interval '3 hours', now() - interval '119 minutes'
          FROM generate_series(1, 2)"

# ---- off: nothing is deleted ------------------------------------------------
oq_coordinator off "${FLAGS[@]}" --keep-done off --keep-dead off
OFF=$OQ_LAST_PID
oq_wait_until 10 "coordinator leads" oq_leader_is "$OFF"
sleep 1
oq_check "done rows with retention off" "$(oq_sql 'SELECT count(*) FROM onceq_done')" 2510
oq_check "dead rows with retention off" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 1506
kill -TERM "$OFF"
oq_wait_exit "$OFF" 5

# ---- --keep-done 1h --keep-dead 2h ---------------------------------------
oq_coordinator keep "${FLAGS[@]}" --keep-done 1h --keep-dead 2h
KEEP=$OQ_LAST_PID
oq_wait_until 20 "old done rows deleted" oq_sql_is "SELECT count(*) FROM onceq_done" 10
oq_wait_until 20 "old dead rows deleted" oq_sql_is "SELECT count(*) FROM onceq_dead" 6
sleep 1 # more passes: the young rows stay
oq_check "done rows left (all younger than 1 h)" \
  "$(oq_sql "SELECT count(*) FROM onceq_done WHERE done_at > now() - interval '1 hour'")/$(oq_sql 'SELECT count(*) FROM onceq_done')" "10/10"
oq_check "dead rows left (all younger than 2 h)" \
  "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE died_at > now() - interval '2 hours'")/$(oq_sql 'SELECT count(*) FROM onceq_dead')" "6/6"
oq_contains "batched deletes logged" "$(cat "$OQ_TMP/keep.log")" "retention: deleted"
kill -TERM "$KEEP"
oq_wait_exit "$KEEP" 5

# ---- notifications on: unnotified old dead rows stay ------------------------
# 3 old unnotified + 2 old notified; the receiver is unreachable (port 9 on
# 127.0.0.1 refuses), so nothing gets notified meanwhile
oq_sql "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at, died_at)
          SELECT gen_random_uuid(), 'n', '{}', 0, 1, 1,
                 now() - interval '4 hours', now() - interval '3 hours'
          FROM generate_series(1, 3);
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at, died_at, notified_at,
                                notify_status)
          SELECT gen_random_uuid(), 'n', '{}', 0, 1, 1,
                 now() - interval '4 hours', now() - interval '3 hours',
                 now() - interval '2 hours', 200
          FROM generate_series(1, 2)"
oq_coordinator notify "${FLAGS[@]}" --keep-done 1h --keep-dead 2h \
  --notify-url http://127.0.0.1:9/hook --notify-timeout 1s
NOTIFY=$OQ_LAST_PID
oq_wait_until 20 "old notified dead rows deleted" \
  oq_sql_is "SELECT count(*) FROM onceq_dead WHERE queue = 'n'" 3
sleep 1
oq_check "old unnotified dead rows kept" \
  "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE queue = 'n' AND notified_at IS NULL")" 3
oq_check "young dead rows kept" "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE queue = 'q'")" 6
oq_contains "notification failure logged" "$(cat "$OQ_TMP/notify.log")" "retrying in"
kill -TERM "$NOTIFY"
oq_wait_exit "$NOTIFY" 5
oq_check "exit status" "$OQ_RC" 0
oq_log "PASS"
