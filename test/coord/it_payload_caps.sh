#!/usr/bin/env bash
# it_payload_caps.sh: what the coordinator shows of a payload is capped
# (issue 20, finding 7). A dead item with a 1 MB payload and a small one:
#  - /api/dead (and `onceq list --state dead --json`, the same view) give
#    the first 16 KiB of the big payload as a JSON string with
#    "payload_truncated": true, the small one as its JSON with false;
#  - the dead-letter webhook's body carries the same cut, so one POST
#    stays small;
#  - the page's HTML stays small too;
#  - the cut counts characters, as left() does: a payload of 2-byte
#    characters is cut at 16384 characters, on a character boundary.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup payload_caps

CAP=16384
oq_sql "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
                                max_attempts, last_error, created_at, died_at)
        VALUES ('00000000-0000-4000-8000-000000000001', 'big',
                jsonb_build_object('blob', repeat('x', 1000000)), 0, 3, 3,
                'boom', now(), now() - interval '2 second'),
               ('00000000-0000-4000-8000-000000000002', 'small',
                '{\"n\": 1}', 0, 3, 3, 'boom', now(), now()),
               ('00000000-0000-4000-8000-000000000003', 'utf8',
                jsonb_build_object('s', repeat('é', 20000)), 0, 3, 3,
                'boom', now(), now() - interval '1 second')" >/dev/null

oq_start hook "$(oq_python)" "$(dirname "$0")/webhook_server.py" \
  "$OQ_TMP/port" "$OQ_TMP/requests.jsonl" 0
oq_wait_until 10 "webhook server port" test -s "$OQ_TMP/port"
HPORT=$(cat "$OQ_TMP/port")
touch "$OQ_TMP/requests.jsonl"

oq_coordinator coord --metrics-addr 127.0.0.1:0 --interval 200ms \
  --notify-url "http://127.0.0.1:$HPORT/hook" --notify-timeout 5s
oq_wait_until 15 "the coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/coord.log"
port=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/coord.log" | head -1)
oq_wait_until 20 "all dead items notified" oq_sql_is \
  "SELECT count(*) FROM onceq_dead WHERE notified_at IS NOT NULL" 3

curl -s -o "$OQ_TMP/api_dead.json" "http://127.0.0.1:$port/api/dead"
"$ONCEQ_CLI" --db "$OQ_DSN" --json list --state dead >"$OQ_TMP/cli_dead.json"
curl -s -o "$OQ_TMP/page.html" "http://127.0.0.1:$port/"

# per item: queue, the payload's type and length, the flag
shown() {
  oq_py - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for it in sorted(d["items"], key=lambda i: i["queue"]):
    p = it["payload"]
    kind = "str" if isinstance(p, str) else "json"
    n = len(p) if isinstance(p, str) else len(json.dumps(p))
    print("%s:%s:%d:%s" % (it["queue"], kind, n, it.get("payload_truncated")))
PY
}
oq_check "/api/dead payloads" "$(shown "$OQ_TMP/api_dead.json" | tr '\n' ' ')" \
  "big:str:$CAP:True small:json:8:False utf8:str:$CAP:True "
oq_check "onceq list --state dead --json payloads" \
  "$(shown "$OQ_TMP/cli_dead.json" | tr '\n' ' ')" \
  "big:str:$CAP:True small:json:8:False utf8:str:$CAP:True "
oq_check_le "/api/dead bytes" "$(wc -c <"$OQ_TMP/api_dead.json")" 80000
oq_check_le "status page bytes" "$(wc -c <"$OQ_TMP/page.html")" 200000

hook=$(oq_py - "$OQ_TMP/requests.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    b = r["body"]
    p = b["payload"]
    kind = "str" if isinstance(p, str) else "json"
    n = len(p) if isinstance(p, str) else len(json.dumps(p))
    size = len(json.dumps(b, ensure_ascii=False).encode())  # about the POST
    print("%s:%s:%d:%s:%d" % (b["queue"], kind, n, b.get("payload_truncated"),
                              size < 40000))
PY
)
oq_check "webhook bodies" "$(echo "$hook" | sort | tr '\n' ' ')" \
  "big:str:$CAP:True:1 small:json:8:False:1 utf8:str:$CAP:True:1 "
oq_log "PASS"
