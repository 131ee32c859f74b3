#!/usr/bin/env bash
# it_webhook_slow.sh: a slow webhook receiver does not stall the leader's
# other duties (issue 20, minor finding: webhooks on the main loop). 30
# dead items wait for a receiver that takes 0.3 s per answer (9 s for
# all). While it works through them, done rows 2 h old (--keep-done 1h)
# must be deleted within 3 s: each pass spends at most about one
# --interval on webhooks and leaves the rest for the next pass. Then every
# item is delivered exactly once, oldest first, across the passes.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup webhook_slow

oq_sql "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, last_error, created_at, died_at)
        SELECT ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid,
               'mail', jsonb_build_object('n', i), 0, 3, 3, 'boom',
               now() - interval '1 hour', now() - (100 - i) * interval '1 second'
        FROM generate_series(1, 30) i" >/dev/null

oq_start hook "$(oq_python)" "$(dirname "$0")/webhook_server.py" \
  "$OQ_TMP/port" "$OQ_TMP/requests.jsonl" 0 0.3
oq_wait_until 10 "webhook server port" test -s "$OQ_TMP/port"
PORT=$(cat "$OQ_TMP/port")
touch "$OQ_TMP/requests.jsonl"

oq_coordinator c1 --interval 200ms --heartbeat-interval 200ms \
  --session-expiry 1600ms --keep-done 1h \
  --notify-url "http://127.0.0.1:$PORT/hook" --notify-timeout 5s
oq_wait_until 20 "the first webhook answered" test -s "$OQ_TMP/requests.jsonl"

oq_sql "INSERT INTO onceq_done (item_id, queue, attempts, created_at, done_at)
          SELECT gen_random_uuid(), 'q', 1, now() - interval '3 hours',
                 now() - interval '2 hours' FROM generate_series(1, 5)" >/dev/null
t0=$(oq_now_ms)
oq_wait_until 3 "retention ran while the webhook is slow" oq_sql_is \
  "SELECT count(*) FROM onceq_done" 0
sent=$(wc -l <"$OQ_TMP/requests.jsonl" | tr -d ' ')
oq_log "retention after $(($(oq_now_ms) - t0)) ms, $sent webhook(s) sent by then"
[ "$sent" -lt 30 ] || oq_fail "all 30 webhooks went out before retention ran"

oq_wait_until 40 "all 30 dead items notified" oq_sql_is \
  "SELECT count(*) FROM onceq_dead WHERE notified_at IS NOT NULL" 30
order=$(oq_py - "$OQ_TMP/requests.jsonl" <<'EOF2'
import json, sys
ns = [json.loads(l)["body"]["payload"]["n"] for l in open(sys.argv[1])]
print("ordered" if ns == list(range(1, 31)) else "got %s" % ns)
EOF2
)
oq_check "each item once, oldest first" "$order" "ordered"
oq_log "ok"
