#!/usr/bin/env bash
# it_http_retry.sh: onceq-worker --http against a small HTTP server on
# 127.0.0.1 (Python's http.server, embedded below): a 503 with
# Retry-After: 1 on an item's first request makes the worker come back no
# sooner than 1 s later, and the 200 that follows acknowledges it; a 404
# every time dead-letters the item after max_attempts requests.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup http

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
N=6
REQLOG=$OQ_TMP/requests.txt
PORTFILE=$OQ_TMP/port

# The server: /flaky answers 503 + Retry-After: 1 the first time it sees an
# Idempotency-Key and 200 after; /missing answers 404. Each request is
# logged as "<epoch ms> <path> <key> <Onceq-Attempt> <status> <body>". It
# exits by itself after 120 s, in case nobody stops it.
cat >"$OQ_TMP/server.py" <<'EOF'
import http.server, json, sys, threading, time
log_path, port_path = sys.argv[1], sys.argv[2]
seen, lock = set(), threading.Lock()
logf = open(log_path, "a", buffering=1)

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        t = int(time.time() * 1000)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("Idempotency-Key", "-")
        attempt = self.headers.get("Onceq-Attempt", "-")
        extra = []
        if self.path == "/flaky":
            with lock:
                first = key not in seen
                seen.add(key)
            status = 503 if first else 200
            if first:
                extra.append(("Retry-After", "1"))
        elif self.path == "/missing":
            status = 404
        else:
            status = 400
        try:
            payload = json.dumps(json.loads(body), separators=(",", ":"))
        except Exception:
            payload = "unparseable"
        with lock:
            logf.write("%d %s %s %s %d %s\n" % (t, self.path, key, attempt,
                                                 status, payload))
        msg = b"no such thing here" if status == 404 else b"ok"
        self.send_response(status)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(port_path + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(port_path + ".tmp", port_path)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(120)
EOF
: >"$REQLOG"
"$PY" "$OQ_TMP/server.py" "$REQLOG" "$PORTFILE" >"$OQ_TMP/server.log" 2>&1 &
OQ_PIDS+=($!)
port_ready() { [ -s "$PORTFILE" ]; }
oq_wait_until 10 "the HTTP server's port" port_ready
PORT=$(cat "$PORTFILE")
oq_log "HTTP server on 127.0.0.1:$PORT"

oq_sql "CREATE TABLE expected (id uuid PRIMARY KEY, payload jsonb);
        INSERT INTO onceq_items (queue, payload)
        SELECT 'flaky', jsonb_build_object('n', g) FROM generate_series(1, $N) g;
        INSERT INTO onceq_items (queue, payload, max_attempts)
        VALUES ('missing', '{\"n\": 404}', 3);
        INSERT INTO expected SELECT id, payload FROM onceq_items" >/dev/null
missing_id=$(oq_sql "SELECT id FROM onceq_items WHERE queue = 'missing'")

oq_worker_start flaky --queue flaky --concurrency 3 --poll-interval 200ms \
  --http "http://127.0.0.1:$PORT/flaky"
wf=$OQ_LAST_PID
oq_worker_start missing --queue missing --retry-base 50ms \
  --poll-interval 200ms --http "http://127.0.0.1:$PORT/missing"
wm=$OQ_LAST_PID
all_settled() {
  [ "$(oq_sql 'SELECT count(*) FROM onceq_items')" = 0 ]
}
oq_wait_until 40 "every item acked or dead-lettered" all_settled
oq_stop "$wf" 15
oq_check "flaky worker's exit code" "$OQ_RC" 0
oq_stop "$wm" 15
oq_check "missing worker's exit code" "$OQ_RC" 0
oq_log "requests seen:"
cat "$REQLOG"

# ---- 503 + Retry-After: 1, then 200
oq_check "requests to /flaky" "$(grep -c ' /flaky ' "$REQLOG")" $((2 * N))
oq_check "distinct keys at /flaky" \
  "$(awk '$2 == "/flaky" {print $3}' "$REQLOG" | sort -u | wc -l)" "$N"
oq_check "503s at /flaky" "$(awk '$2 == "/flaky" && $5 == 503' "$REQLOG" | wc -l)" "$N"
oq_check "200s at /flaky" "$(awk '$2 == "/flaky" && $5 == 200' "$REQLOG" | wc -l)" "$N"
# per key: the first request is a 503 with attempt 1, the second a 200 with
# attempt 2, at least 1000 ms later
bad=$(awk '$2 == "/flaky" {
             n[$3]++
             if (n[$3] == 1) { t1[$3] = $1; s1[$3] = $5; a1[$3] = $4 }
             else { t2[$3] = $1; s2[$3] = $5; a2[$3] = $4 } }
           END {
             for (k in n) {
               gap = t2[k] - t1[k]
               printf "key %s gap %d ms\n", k, gap > "/dev/stderr"
               if (n[k] != 2 || s1[k] != 503 || s2[k] != 200 || a1[k] != 1 ||
                   a2[k] != 2 || gap < 1000)
                 print k, n[k], s1[k], s2[k], a1[k], a2[k], gap
             } }' "$REQLOG")
oq_check "keys whose retry broke Retry-After or the order" "$bad" ""
min_gap=$(awk '$2 == "/flaky" { if ($3 in t) { g = $1 - t[$3];
                 if (min == "" || g < min) min = g } else t[$3] = $1 }
               END { print min }' "$REQLOG")
oq_metric http_retry_after_min_gap "$min_gap" ms "503 to retry, Retry-After: 1"
# the keys are the item ids, and the bodies their payloads
{
  echo "CREATE TEMP TABLE seen (id uuid, payload text);"
  echo "COPY seen FROM STDIN;"
  awk '$2 == "/flaky" && $5 == 200 {print $3 "\t" $6}' "$REQLOG"
  echo '\.'
  echo "SELECT count(*) FROM seen s JOIN expected e ON e.id = s.id
         AND e.payload = s.payload::jsonb;"
} >"$OQ_TMP/check.sql"
oq_check "200 requests whose key and body are an item's id and payload" \
  "$(oq_sql <"$OQ_TMP/check.sql")" "$N"
oq_check "onceq_done is off, onceq_dead has only the 404 item" \
  "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE queue = 'flaky'")" 0

# ---- 404 every time: dead after max_attempts = 3
oq_check "requests to /missing" "$(grep -c ' /missing ' "$REQLOG")" 3
oq_check "their key" "$(awk '$2 == "/missing" {print $3}' "$REQLOG" | sort -u)" "$missing_id"
oq_check "their attempts" "$(awk '$2 == "/missing" {print $4}' "$REQLOG" | tr '\n' ' ')" "1 2 3 "
oq_check "dead item" "$(oq_sql 'SELECT id FROM onceq_dead')" "$missing_id"
oq_check "its attempts" "$(oq_sql 'SELECT attempts FROM onceq_dead')" 3
err=$(oq_sql 'SELECT last_error FROM onceq_dead')
oq_log "last_error: $err"
oq_contains "last_error" "$err" "404"
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
oq_log "PASS"
