#!/usr/bin/env bash
# it_blocked_keys.sh: blocked ordering keys (a key whose head item has
# failed and waits, as `onceq keys --blocked` lists them) are counted per
# queue by the coordinator: the gauge onceq_queue_blocked_keys, the status
# page's queue row and /api/stats (`onceq --json stats`'s shape). Queue
# ord: keys a (ready head), b and c (failed heads: blocked), d (a failed
# item behind a ready head: not blocked), e (a failed head that is
# running: not blocked); queue calm: one key, nothing failed. A cancelled
# head unblocks its key and the gauge follows.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup blocked_keys

S=00000000-0000-4000-8000-0000000000b1
oq_sql "INSERT INTO onceq_sessions (id, expiry, hostname, pid, queues)
        VALUES ('$S', interval '1 hour', 'w', 4242, 'ord');
        INSERT INTO onceq_items (queue, ordering_key)
          SELECT 'ord', k FROM (VALUES ('a'), ('b'), ('c'), ('d'), ('e')) v(k),
          generate_series(1, 3) g ORDER BY k, g;
        INSERT INTO onceq_items (queue, ordering_key) VALUES ('calm', 'z');
        UPDATE onceq_items SET attempts = 1, last_error = 'boom',
          run_at = now() + interval '10 minutes'
          WHERE id IN (SELECT DISTINCT ON (ordering_key) id FROM onceq_items
                       WHERE ordering_key IN ('b', 'c', 'e')
                       ORDER BY ordering_key, enqueue_seq);
        UPDATE onceq_items SET attempts = 1, last_error = 'boom'
          WHERE id = (SELECT id FROM onceq_items WHERE ordering_key = 'd'
                      ORDER BY enqueue_seq DESC LIMIT 1);
        UPDATE onceq_items SET claim = '$S', claimed_at = now(),
          run_at = now()
          WHERE id = (SELECT id FROM onceq_items WHERE ordering_key = 'e'
                      ORDER BY enqueue_seq LIMIT 1)" >/dev/null

oq_coordinator coord --metrics-addr 127.0.0.1:0 --interval 200ms
oq_wait_until 15 "the coordinator serves" \
  grep -q 'metrics on .* (port [0-9]*)' "$OQ_TMP/coord.log"
port=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$OQ_TMP/coord.log" | head -1)
oq_wait_until 15 "the coordinator leads" oq_sql_is \
  "SELECT count(*) FROM onceq_leases" 1
gauge_is() { [ "$(oq_metric_value "127.0.0.1:$port" "$1")" = "$2" ]; }
oq_wait_until 15 "onceq_queue_blocked_keys{queue=\"ord\"} is 2" \
  gauge_is 'onceq_queue_blocked_keys{queue="ord"}' 2
oq_check "calm has no blocked key" \
  "$(oq_metric_value "127.0.0.1:$port" 'onceq_queue_blocked_keys{queue="calm"}')" 0
curl -s "http://127.0.0.1:$port/metrics" >"$OQ_TMP/metrics.txt"
oq_check "the gauge has HELP and TYPE" \
  "$(grep -c '^# \(HELP\|TYPE\) onceq_queue_blocked_keys ' "$OQ_TMP/metrics.txt")" 2

curl -s "http://127.0.0.1:$port/" >"$OQ_TMP/page.html"
oq_check "the status page marks ord's blocked keys" \
  "$(grep -o '<span class="blocked"[^>]*>[^<]*</span>' "$OQ_TMP/page.html")" \
  '<span class="blocked" title="ordering keys whose head item failed and waits (onceq keys --blocked)">2 blocked keys</span>'
curl -s "http://127.0.0.1:$port/api/stats" >"$OQ_TMP/stats.json"
oq_check "/api/stats blocked_keys" \
  "$(oq_jget "$OQ_TMP/stats.json" '[(q["queue"], q["blocked_keys"]) for q in d["queues"]]')" \
  "[('calm', 0), ('ord', 2)]"

oq_sql "DELETE FROM onceq_items WHERE id = (SELECT id FROM onceq_items
        WHERE ordering_key = 'b' ORDER BY enqueue_seq LIMIT 1)" >/dev/null
oq_wait_until 15 "the gauge follows a removed head" \
  gauge_is 'onceq_queue_blocked_keys{queue="ord"}' 1
echo "PASS it_blocked_keys"
