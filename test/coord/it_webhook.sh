#!/usr/bin/env bash
# it_webhook.sh: dead-job notifications. A local receiver on 127.0.0.1
# (webhook_server.py) answers 500 to the first request, 422 to an item it
# rejects, 200 otherwise. Checks: each dead item gets exactly one 2xx, the
# 500 is retried (with backoff) for the same item under the same
# Idempotency-Key, which names the death: "<item id>.<died_at in
# microseconds since the epoch>", and the body is its JSON;
# notified_at/notify_status are recorded; nothing is sent again afterwards
# (also by a restarted coordinator); a new dead item is sent once; the
# rejected one is marked 422 and not retried; an item brought back by
# `onceq retry` that dies again is delivered once more, under a new key.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup webhook

# 5 dead items, oldest first: d1 .. d5; d3 is the one the receiver rejects
oq_sql "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, last_error, created_at, died_at)
        SELECT ('00000000-0000-4000-8000-00000000000' || i)::uuid, 'mail',
               CASE WHEN i = 3 THEN '{\"reject\": true}'::jsonb
                    ELSE jsonb_build_object('n', i) END,
               0, 3, 3, 'boom ' || i, now() - interval '1 hour',
               now() - (10 - i) * interval '1 second'
        FROM generate_series(1, 5) i"

oq_start hook "$(oq_python)" "$(dirname "$0")/webhook_server.py" \
  "$OQ_TMP/port" "$OQ_TMP/requests.jsonl" 1
HOOK=$OQ_LAST_PID
oq_wait_until 10 "webhook server port" test -s "$OQ_TMP/port"
PORT=$(cat "$OQ_TMP/port")
touch "$OQ_TMP/requests.jsonl"

FLAGS=(--interval 200ms --heartbeat-interval 200ms --session-expiry 1600ms
       --notify-url "http://127.0.0.1:$PORT/hook" --notify-timeout 5s)
oq_coordinator c1 "${FLAGS[@]}"
C1=$OQ_LAST_PID
oq_wait_until 20 "all 5 dead items notified" oq_sql_is \
  "SELECT count(*) FROM onceq_dead WHERE notified_at IS NOT NULL" 5

# summary: per key, the statuses in order; totals
summary() {
  oq_py - "$OQ_TMP/requests.jsonl" <<'EOF'
import json, sys, collections, datetime
reqs = [json.loads(l) for l in open(sys.argv[1])]
def us(ts):  # died_at as JSON text -> microseconds since the epoch
    d = datetime.datetime.fromisoformat(ts)
    e = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (d - e) // datetime.timedelta(microseconds=1)
by = collections.OrderedDict()
keys = collections.OrderedDict()
for r in reqs:
    b = r["body"]
    assert b is not None, "body is not JSON"
    want = "%s.%d" % (b["id"], us(b["died_at"]))
    assert r["key"] == want, "Idempotency-Key %s != <id>.<died_at us> %s" % (r["key"], want)
    assert r["content_type"] == "application/json", r["content_type"]
    assert b["event"] == "dead" and b["queue"] == "mail", b
    by.setdefault(b["id"], []).append(r["status"])
    keys.setdefault(b["id"], [])
    if r["key"] not in keys[b["id"]]:
        keys[b["id"]].append(r["key"])
n = lambda k: int(k[-1])
print("requests=%d" % len(reqs))
print("first=%s:%s" % (n(reqs[0]["body"]["id"]), reqs[0]["status"]))
for k, st in sorted(by.items(), key=lambda kv: kv[0]):
    print("d%d=%s" % (n(k), ",".join(map(str, st))))
    print("keys_d%d=%d" % (n(k), len(keys[k])))
d1 = [r["body"] for r in reqs if n(r["body"]["id"]) == 1][-1]
print("d1_body=%s/%s/%s" % (d1["payload"], d1["last_error"], d1["attempts"]))
EOF
}
s=$(summary) || oq_fail "bad requests: $(cat "$OQ_TMP/requests.jsonl")"
oq_log "requests:"$'\n'"$s"
line() { printf '%s\n' "$s" | grep "^$1" || true; }
oq_check "first request: the oldest item, answered 500" "$(line first=)" "first=1:500"
oq_check "d1: 500 then retried, 200" "$(line d1=)" "d1=500,200"
oq_check "d2 once" "$(line d2=)" "d2=200"
oq_check "d3 rejected once (422), not retried" "$(line d3=)" "d3=422"
oq_check "d4 once" "$(line d4=)" "d4=200"
oq_check "d5 once" "$(line d5=)" "d5=200"
oq_check "requests in all" "$(line requests=)" "requests=6"
oq_check "d1 body" "$(line d1_body=)" "d1_body={'n': 1}/boom 1/3"
oq_check "notify_status per item" \
  "$(oq_sql "SELECT string_agg(notify_status::text, ',' ORDER BY id) FROM onceq_dead")" \
  "200,200,422,200,200"
oq_contains "retry logged with backoff" "$(cat "$OQ_TMP/c1.log")" "answered HTTP 500; retrying in"

# nothing is sent again: neither by c1 nor by a fresh coordinator
sleep 1
kill -TERM "$C1"
oq_wait_exit "$C1" 5
oq_coordinator c2 "${FLAGS[@]}"
C2=$OQ_LAST_PID
oq_wait_until 10 "c2 leads" oq_leader_is "$C2"
sleep 1
oq_check "requests after a quiet second and a restart" \
  "$(wc -l <"$OQ_TMP/requests.jsonl" | tr -d ' ')" 6

# a new dead item: sent exactly once
oq_sql "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, created_at)
        VALUES ('00000000-0000-4000-8000-000000000006', 'mail', '{\"n\": 6}',
                0, 1, 1, now())"
oq_wait_until 10 "d6 notified" oq_sql_is \
  "SELECT count(*) FROM onceq_dead WHERE notified_at IS NOT NULL" 6
sleep 1
s=$(summary) || oq_fail "bad requests: $(cat "$OQ_TMP/requests.jsonl")"
oq_check "d6 once" "$(line d6=)" "d6=200"
oq_check "requests in all" "$(line requests=)" "requests=7"
oq_check "d1: one key for its first death (the 500 and its retry)" \
  "$(line keys_d1=)" "keys_d1=1"

# d1 is retried (`onceq retry`) and dies again: a new death, sent once more
# under a new key (a receiver that keeps the keys it has seen would drop a
# reused one). The second death is written the way the worker dead-letters
# (the item row moves to onceq_dead in one statement, died_at = now()).
out=$("$ONCEQ_CLI" --db "$OQ_DSN" retry 00000000-0000-4000-8000-000000000001 2>&1) ||
  oq_fail "onceq retry failed: $out"
oq_check "d1 back in onceq_items" \
  "$(oq_sql "SELECT count(*) FROM onceq_items
             WHERE id = '00000000-0000-4000-8000-000000000001'")" 1
oq_sql "WITH m AS (DELETE FROM onceq_items
                   WHERE id = '00000000-0000-4000-8000-000000000001'
                   RETURNING *)
        INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, last_error, created_at, died_at)
        SELECT id, queue, payload, priority, 3, max_attempts, 'boom again',
               created_at, now()
        FROM m" >/dev/null
oq_wait_until 10 "d1's second death notified" oq_sql_is \
  "SELECT count(*) FROM onceq_dead WHERE notified_at IS NOT NULL" 6
sleep 1
s=$(summary) || oq_fail "bad requests: $(cat "$OQ_TMP/requests.jsonl")"
oq_log "requests:"$'\n'"$s"
oq_check "d1: 500, 200, then 200 for its second death" "$(line d1=)" "d1=500,200,200"
oq_check "d1: a new key for its second death" "$(line keys_d1=)" "keys_d1=2"
oq_check "d1 body of the second death" "$(line d1_body=)" "d1_body={'n': 1}/boom again/3"
oq_check "requests in all" "$(line requests=)" "requests=8"
kill -TERM "$C2"
oq_wait_exit "$C2" 5
oq_check "c2 exit status" "$OQ_RC" 0
oq_log "PASS"
