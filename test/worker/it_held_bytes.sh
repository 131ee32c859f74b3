#!/usr/bin/env bash
# it_held_bytes.sh: onceq-worker bounds the payload bytes it holds, not
# only the items (issue 20, finding 7). 12 items of 300 kB each, 8
# executors, --max-held-mib 1: the claim stops taking items once 1 MiB of
# payload is taken (the item that crosses it is the last one), so the
# session holds 4 of them while their handlers wait, not 12; and it claims
# no more while it holds them. Once the handlers finish, the rest run.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup held_bytes

cat >"$OQ_TMP/wait.sh" <<EOF
#!/bin/sh
cat >/dev/null
while [ ! -e "$OQ_TMP/go" ]; do sleep 0.1; done
exit 0
EOF
chmod +x "$OQ_TMP/wait.sh"

oq_sql "INSERT INTO onceq_items (queue, payload)
        SELECT 'big', jsonb_build_object('n', g, 'blob', repeat('x', 300000))
        FROM generate_series(1, 12) g" >/dev/null
oq_worker_start w --queue big --concurrency 8 --max-held-mib 1 \
  --poll-interval 100ms --exec "$OQ_TMP/wait.sh"
W=$OQ_LAST_PID
claimed() { oq_sql "SELECT count(*) FROM onceq_items WHERE claim IS NOT NULL"; }
oq_wait_until 20 "the worker to claim" oq_sql_is \
  "SELECT count(*) > 0 FROM onceq_items WHERE claim IS NOT NULL" t
sleep 1.5 # several claim turns: it must not take more
oq_check "items the session holds under a 1 MiB budget" "$(claimed)" 4
oq_check "rows claimed by its session" \
  "$(oq_sql "SELECT count(*) FROM onceq_items i JOIN onceq_sessions s
             ON s.id = i.claim WHERE s.pid = $W")" 4
touch "$OQ_TMP/go"
oq_wait_until 60 "all items acknowledged" oq_all_done
oq_stop "$W" 15
oq_check "worker exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
