#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_pgbouncer.sh: onceq-worker --sql through pgbouncer (the Debian
# package). Transaction pooling with 2 server connections for two workers
# of 4 executors each, with different statements: both drain, every item's
# effect is its own worker's statement exactly once (a prepared statement
# name shared between processes would run one worker's statement for the
# other's item, or fail with 26000/42P05), and the worker says once that it
# found a pooler; --sql-per-item, --exec and --http workers drain through
# it too, and a worker with ONCEQ_LISTEN_DATABASE_URL (--listen-db) is woken
# by NOTIFY on its direct connection. Then the two --sql workers through
# session pooling.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup pgbouncer

N=300
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, tag text NOT NULL,
                             queue text NOT NULL,
                             server_pid int NOT NULL DEFAULT pg_backend_pid())" >/dev/null

# drain MODE: N items in each of queues qa and qb, one worker each through
# the pooler, --drain; exactly-once and the right statement per item
drain() {
  local mode=$1 a b t0
  oq_sql "TRUNCATE ledger;
          INSERT INTO onceq_items (queue, payload)
          SELECT q, jsonb_build_object('n', g)
          FROM generate_series(1, $N) g, unnest('{qa,qb}'::text[]) q" >/dev/null
  t0=$(oq_now_ms)
  oq_worker_start "a_$mode" --db "$OQ_PGB_DSN" --drain --queue qa \
    --concurrency 4 --poll-interval 200ms \
    --sql 'INSERT INTO ledger (item_id, tag, queue) VALUES ($2, '"'a'"', $3)'
  a=$OQ_LAST_PID
  oq_worker_start "b_$mode" --db "$OQ_PGB_DSN" --drain --queue qb \
    --concurrency 4 --poll-interval 200ms \
    --sql 'INSERT INTO ledger (queue, tag, item_id) SELECT $3, '"'b'"', $2'
  b=$OQ_LAST_PID
  oq_wait_exit "$a" 60
  oq_check "worker a exit code ($mode pooling)" "$OQ_RC" 0
  oq_wait_exit "$b" 60
  oq_check "worker b exit code ($mode pooling)" "$OQ_RC" 0
  oq_log "$mode pooling: drained $((2 * N)) items in $(($(oq_now_ms) - t0)) ms"
  oq_ledger_exact $((2 * N))
  oq_check "items run by the other worker's statement ($mode pooling)" \
    "$(oq_sql "SELECT count(*) FROM ledger
               WHERE tag <> CASE queue WHEN 'qa' THEN 'a' ELSE 'b' END")" 0
  oq_check "sessions left ($mode pooling)" \
    "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
}

# ---- 1. transaction pooling, 2 server connections
oq_pgbouncer_start pgb_tx transaction 2
drain tx
oq_check "pooler lines of worker a (one)" \
  "$(grep -c 'through a connection pooler' "$OQ_TMP/a_tx.log" || true)" 1
# 8 executors' connections (and 2 claim loops) shared 2 server backends
oq_check_le "server backends that wrote the ledger" \
  "$(oq_sql 'SELECT count(DISTINCT server_pid) FROM ledger')" 2

# ---- 2. the other ack paths through transaction pooling: --sql-per-item,
# --exec, --http
oq_sql "TRUNCATE ledger;
        INSERT INTO onceq_items (queue, payload)
        SELECT q, jsonb_build_object('n', g)
        FROM generate_series(1, 40) g, unnest('{qs,qe,qh}'::text[]) q" >/dev/null
oq_worker_start per_item_tx --db "$OQ_PGB_DSN" --drain --queue qs \
  --poll-interval 200ms --sql-per-item \
  --sql 'INSERT INTO ledger (item_id, tag, queue) VALUES ($2, '"'s'"', $3)'
oq_wait_exit "$OQ_LAST_PID" 60
oq_check "--sql-per-item worker exit code (tx pooling)" "$OQ_RC" 0
oq_check "--sql-per-item ledger (distinct/rows)" \
  "$(oq_sql "SELECT count(DISTINCT item_id) || '/' || count(*) FROM ledger")" 40/40
oq_check "--sql-per-item items left" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qs'")" 0
oq_worker_start exec_tx --db "$OQ_PGB_DSN" --drain --queue qe \
  --poll-interval 200ms --exec /bin/true
oq_wait_exit "$OQ_LAST_PID" 60
oq_check "--exec worker exit code (tx pooling)" "$OQ_RC" 0
oq_check "--exec items left" "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qe'")" 0
# a POST sink on 127.0.0.1 that logs each Idempotency-Key
cat >"$OQ_TMP/sink.py" <<'PY'
import http.server, sys, threading
out = open(sys.argv[1], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        out.write(self.headers.get("Idempotency-Key", "-") + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[2], "w").write(str(s.server_address[1]))
threading.Timer(110, s.shutdown).start()
s.serve_forever()
PY
oq_start sink python3 "$OQ_TMP/sink.py" "$OQ_TMP/keys" "$OQ_TMP/sink.port"
oq_wait_until 10 "the HTTP sink listening" test -s "$OQ_TMP/sink.port"
oq_worker_start http_tx --db "$OQ_PGB_DSN" --drain --queue qh \
  --poll-interval 200ms --http "http://127.0.0.1:$(cat "$OQ_TMP/sink.port")/"
oq_wait_exit "$OQ_LAST_PID" 60
oq_check "--http worker exit code (tx pooling)" "$OQ_RC" 0
oq_check "--http items left" "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = 'qh'")" 0
oq_check "--http items posted" "$(sort -u "$OQ_TMP/keys" | wc -l)" 40

# ---- 3. --listen-db: an idle worker through the pooler polls every 10 s,
# but LISTENs on a direct connection (here from ONCEQ_LISTEN_DATABASE_URL),
# so an item pushed now is done in well under the poll interval
ONCEQ_LISTEN_DATABASE_URL=$OQ_DSN oq_worker_start listen_tx --db "$OQ_PGB_DSN" \
  --queue ql --poll-interval 10s \
  --sql 'INSERT INTO ledger (item_id, tag, queue) VALUES ($2, '"'l'"', $3)'
L=$OQ_LAST_PID
listening() {
  [ "$(oq_sql "SELECT count(*) FROM pg_stat_activity
               WHERE application_name = 'onceq-worker-listen'
                 AND datname = current_database()")" -ge 1 ]
}
oq_wait_until 10 "the worker's direct LISTEN connection" listening
sleep 0.5 # past its first poll
t0=$(oq_now_ms)
oq_sql "INSERT INTO onceq_items (queue, payload) VALUES ('ql', '{}')" >/dev/null
woken() { [ "$(oq_sql "SELECT count(*) FROM ledger WHERE queue = 'ql'")" = 1 ]; }
oq_wait_until 8 "the item done by a NOTIFY wake-up (not the 10 s poll)" woken
oq_log "pushed to done through --listen-db: $(($(oq_now_ms) - t0)) ms"
oq_check "--listen-db in the pooler line" \
  "$(grep -c 'through a connection pooler.*through --listen-db' "$OQ_TMP/listen_tx.log" || true)" 1
oq_stop "$L"
oq_check "--listen-db worker exit code" "$OQ_RC" 0
oq_pgbouncer_stop

# ---- 4. session pooling (a server connection per client connection)
oq_pgbouncer_start pgb_session session 40
drain session
oq_pgbouncer_stop
