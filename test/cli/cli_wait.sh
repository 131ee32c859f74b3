#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in single quotes is SQL, not shell
# cli_wait: `onceq push --wait` and `onceq wait` against real workers:
#  - acknowledged: exit 0, the kept result on stdout: the --sql
#    statement's first row as JSON (per item and batched), --exec stdout,
#    the --http response body; a result written into onceq_results by an
#    ack is printed as is; --json shape;
#  - dead-lettered: exit 3, the last error on stderr (and in --json);
#  - cancelled while waiting: exit 4;
#  - still pending at --timeout: exit 5, within the timeout plus slack;
#  - an id that is no item: exit 2; several ids: one line each;
#  - an --sql worker's ack whose handler fails (rolled back) is not
#    reported: the waiter times out, no result row.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup wait --url
t=$OQ_TMP
[ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"

# 1. push --wait, then an --sql worker acknowledges it
"$ONCEQ_CLI" push --queue w1 --wait --timeout 20s '{"n": 1}' \
  >"$t/w1.out" 2>"$t/w1.err" &
wp=$!
sleep 0.5
"$ONCEQ_WORKER" --queue w1 --drain --sql-per-item --sql 'SELECT $2' \
  >"$t/worker1.log" 2>&1
rc=0
wait "$wp" || rc=$?
oq_check "push --wait exit when acknowledged" "$rc" 0
oq_check "result rows for w1 (written by the ack)" \
  "$(oq_q "SELECT count(*) FROM onceq_results WHERE queue = 'w1' AND outcome = 'done'")" 1
# the --sql statement's first row, as JSON, is the result
w1id=$(oq_q "SELECT item_id FROM onceq_results WHERE queue = 'w1'")
oq_check "push --wait prints the --sql result (the first row as JSON)" \
  "$(cat "$t/w1.out")" "{\"?column?\": \"$w1id\"}"
# an --exec handler's stdout is the result
"$ONCEQ_CLI" push --queue wx --wait --timeout 20s '{"x": 7}' \
  >"$t/wx.out" 2>"$t/wx.err" &
wp=$!
sleep 0.5
"$ONCEQ_WORKER" --queue wx --drain --exec sh -c 'cat; echo " from exec"' \
  >"$t/workerx.log" 2>&1
rc=0
wait "$wp" || rc=$?
oq_check "push --wait exit for an --exec item" "$rc" 0
oq_check "push --wait prints the --exec stdout" "$(cat "$t/wx.out")" \
  '{"x": 7} from exec'
# an --http handler's response body is the result: a server on 127.0.0.1
# answers 200 with the request body wrapped in an object
cat >"$t/echo.py" <<'EOF'
import http.server, os, sys, threading, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        msg = b'{"echo": ' + body + b', "key": "' + \
            self.headers.get("Idempotency-Key", "-").encode() + b'"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(120)  # stops by itself if nobody does
EOF
oq_start echo "$(oq_python)" "$t/echo.py" "$t/echo.port"
echo_ready() { [ -s "$t/echo.port" ]; }
oq_wait_until 10 "the HTTP server's port" echo_ready
"$ONCEQ_CLI" push --queue wh --wait --timeout 20s '{"h": 5}' \
  >"$t/wh.out" 2>"$t/wh.err" &
wp=$!
sleep 0.5
"$ONCEQ_WORKER" --queue wh --drain --http "http://127.0.0.1:$(cat "$t/echo.port")/" \
  >"$t/workerh.log" 2>&1
rc=0
wait "$wp" || rc=$?
oq_check "push --wait exit for an --http item" "$rc" 0
whid=$(oq_q "SELECT item_id FROM onceq_results WHERE queue = 'wh'")
oq_check "push --wait prints the --http response body" "$(cat "$t/wh.out")" \
  "{\"echo\": {\"h\": 5}, \"key\": \"$whid\"}"
# past the worker's 4 KiB an --exec stdout keeps its tail and an --http body
# its head, and the cut shows: truncated in --json (docs/design.md §4c).
# push_wait_drain Q PAYLOAD WORKER_ARGS...: `onceq --json push --wait` of
# PAYLOAD on queue Q (output in $t/Q.out), a --drain worker on Q with
# WORKER_ARGS, then the push's exit status in PW_RC.
push_wait_drain() {
  local q=$1 payload=$2 wp
  shift 2
  "$ONCEQ_CLI" --json push --queue "$q" --wait --timeout 20s "$payload" \
    >"$t/$q.out" 2>"$t/$q.err" &
  wp=$!
  sleep 0.5
  "$ONCEQ_WORKER" --queue "$q" --drain "$@" >"$t/worker-$q.log" 2>&1
  PW_RC=0
  wait "$wp" || PW_RC=$?
}
push_wait_drain wxl '{"x": 8}' --exec sh -c 'head -c 10000 /dev/zero | tr "\\0" a; echo END'
oq_check "push --wait exit for a long --exec stdout" "$PW_RC" 0
oq_check "a cut --exec stdout is truncated" "$(oq_jget "$t/wxl.out" 'd["truncated"]')" True
oq_check "a cut --exec stdout keeps its last 4096 bytes" \
  "$(oq_jget "$t/wxl.out" '(len(d["result"]), d["result"][-4:])')" "(4096, 'END\n')"
push_wait_drain wxs '{"x": 9}' --exec sh -c 'head -c 4096 /dev/zero | tr "\\0" b'
oq_check "push --wait exit for an --exec stdout of 4096 bytes" "$PW_RC" 0
oq_check "an --exec stdout of exactly 4096 bytes is whole" \
  "$(oq_jget "$t/wxs.out" '(len(d["result"]), d["truncated"])')" "(4096, False)"
push_wait_drain whl "{\"pad\": \"$(head -c 6000 /dev/zero | tr '\0' p)\"}" \
  --http "http://127.0.0.1:$(cat "$t/echo.port")/"
oq_check "push --wait exit for a long --http body" "$PW_RC" 0
oq_check "a cut --http body is truncated" \
  "$(oq_jget "$t/whl.out" '(len(d["result"]), d["result"][:9], d["truncated"])')" \
  "(4096, '{\"echo\": ', True)"

# the batched --sql ack (the default) is reported acknowledged too
"$ONCEQ_CLI" push --queue w1b --wait --timeout 20s '{"n": 1}' \
  >"$t/w1b.out" 2>"$t/w1b.err" &
wp=$!
sleep 0.5
"$ONCEQ_WORKER" --queue w1b --drain --sql 'SELECT $2' >"$t/worker1b.log" 2>&1
rc=0
wait "$wp" || rc=$?
oq_check "push --wait exit when acknowledged in a batch" "$rc" 0
w1bid=$(oq_q "SELECT item_id FROM onceq_results WHERE queue = 'w1b'")
oq_check "push --wait prints the batched --sql result (the first row as JSON)" \
  "$(cat "$t/w1b.out")" "{\"?column?\": \"$w1bid\"}"

# 2. a result kept by an ack is printed as is (onceq wait ID, and --json)
id=$("$ONCEQ_CLI" push --queue w2 '{"n": 2}')
oq_q "UPDATE onceq_items SET keep_result = true WHERE id = '$id'" >/dev/null
sid=$(oq_q "INSERT INTO onceq_sessions (expiry) VALUES ('1 hour') RETURNING id")
oq_q "UPDATE onceq_items SET claim = '$sid', claimed_at = now() WHERE id = '$id'" >/dev/null
oq_q "WITH d AS (DELETE FROM onceq_items WHERE id = '$id' AND claim = '$sid'
     RETURNING id, queue)
   INSERT INTO onceq_results (item_id, queue, outcome, result)
   SELECT id, queue, 'done', E'line 1\n<b>line 2</b>' FROM d" >/dev/null
oq_run_cli "$t/w2.out" "$t/w2.err" wait --timeout 5s "$id"
oq_check "wait exit (done)" "$OQ_RC" 0
oq_check "wait prints the result" "$(cat "$t/w2.out")" "$(printf 'line 1\n<b>line 2</b>')"
oq_run_cli "$t/w2j.out" "$t/w2j.err" --json wait "$id"
oq_json_ok "wait --json" "$t/w2j.out"
oq_check "json state" "$(oq_jget "$t/w2j.out" 'd["state"]')" done
oq_check "json result" "$(oq_jget "$t/w2j.out" 'd["result"]')" "$(printf 'line 1\n<b>line 2</b>')"
oq_check "json truncated" "$(oq_jget "$t/w2j.out" 'd["truncated"]')" False

# 3. dead-lettered: exit 3 with the last error
"$ONCEQ_CLI" push --queue w3 --max-attempts 1 --wait --timeout 20s '{"n": 3}' \
  >"$t/w3.out" 2>"$t/w3.err" &
wp=$!
sleep 0.5
"$ONCEQ_WORKER" --queue w3 --drain --sql 'SELECT 1 / 0' >"$t/worker3.log" 2>&1 ||
  true # --drain exits 1 when every attempt failed
rc=0
wait "$wp" || rc=$?
oq_check "push --wait exit when dead" "$rc" 3
oq_match "stderr names the death" "$(cat "$t/w3.err")" \
  'is dead after 1 attempt\(s\): .*division by zero'

# 4. cancelled while waiting: exit 4
id=$("$ONCEQ_CLI" push --queue w4 '{"n": 4}')
"$ONCEQ_CLI" --json wait --timeout 20s "$id" >"$t/w4.out" 2>"$t/w4.err" &
wp=$!
sleep 0.5
"$ONCEQ_CLI" cancel "$id" >/dev/null
rc=0
wait "$wp" || rc=$?
oq_check "wait exit when cancelled" "$rc" 4
oq_check "json state (cancelled)" "$(oq_jget "$t/w4.out" 'd["state"]')" cancelled
oq_check "json error (cancelled, no attempt failed)" "$(oq_jget "$t/w4.out" 'd["error"]')" None
# an item that failed an attempt before its cancel: the waiter gets that error
id=$("$ONCEQ_CLI" push --queue w4e '{"n": 4}')
oq_q "UPDATE onceq_items SET attempts = 1, last_error = 'exit status 3: disk <full>'
     WHERE id = '$id'" >/dev/null
"$ONCEQ_CLI" wait --timeout 20s "$id" >"$t/w4e.out" 2>"$t/w4e.err" &
wp=$!
sleep 0.5
"$ONCEQ_CLI" cancel "$id" >/dev/null
rc=0
wait "$wp" || rc=$?
oq_check "wait exit when cancelled after a failure" "$rc" 4
oq_check "stderr: cancelled with its last error" "$(cat "$t/w4e.err")" \
  "onceq: wait: $id was cancelled (\`onceq cancel\`); its last error: exit status 3: disk <full>"
oq_run_cli "$t/w4ej.out" "$t/w4ej.err" --json wait "$id"
oq_check "json error (cancelled after a failure)" "$(oq_jget "$t/w4ej.out" 'd["error"]')" \
  'exit status 3: disk <full>'

# 5. timeout: exit 5, on time
id=$("$ONCEQ_CLI" push --queue w5 '{"n": 5}')
t0=$(date +%s%N)
oq_run_cli "$t/w5.out" "$t/w5.err" wait --timeout 700ms "$id"
ms=$((($(date +%s%N) - t0) / 1000000))
oq_check "wait exit on timeout" "$OQ_RC" 5
[ "$ms" -ge 700 ] && [ "$ms" -le 5000 ] ||
  oq_fail "timeout took ${ms} ms, want 700..5000"
oq_log "ok: timed out after ${ms} ms"
oq_match "stderr says pending" "$(cat "$t/w5.err")" 'still pending after'

# 6. no such item: exit 2; several ids: a line each (done + pending)
oq_run_cli "$t/w6.out" "$t/w6.err" wait 00000000-0000-0000-0000-000000000000
oq_check "wait exit (no such item)" "$OQ_RC" 2
done_id=$(oq_q "SELECT item_id FROM onceq_results WHERE queue = 'w2'")
oq_run_cli "$t/w7.out" "$t/w7.err" wait --timeout 300ms "$done_id" "$id"
oq_check "wait exit (one pending of two)" "$OQ_RC" 5
oq_check "lines for two ids" "$(wc -l <"$t/w7.out" | tr -d ' ')" 2
oq_match "first line" "$(head -1 "$t/w7.out")" "^$done_id	done	line 1\\\\n<b>line 2</b>\$"

# 7. a failing --sql handler rolls its ack back: never reported
id=$("$ONCEQ_CLI" push --queue w8 --max-attempts 100 '{"n": 8}')
"$ONCEQ_CLI" wait --timeout 3s "$id" >"$t/w8.out" 2>"$t/w8.err" &
wp=$!
sleep 0.3
timeout 2 "$ONCEQ_WORKER" --queue w8 --retry-base 100ms \
  --sql 'SELECT 1 / (CASE WHEN $4 < 3 THEN 0 ELSE 0 END)' \
  >"$t/worker8.log" 2>&1 || true
rc=0
wait "$wp" || rc=$?
oq_check "wait exit while every ack rolls back" "$rc" 5
oq_check "no result row for w8" \
  "$(oq_q "SELECT count(*) FROM onceq_results WHERE item_id = '$id'")" 0
oq_check "the item is still live" \
  "$(oq_q "SELECT count(*) FROM onceq_items WHERE id = '$id'")" 1

oq_log "PASS"
