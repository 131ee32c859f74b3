#!/usr/bin/env bash
# status_page_bench.sh: how long the coordinator takes to render its status
# page (issue 11) at scale: 50 queues, 500 live sessions (partitioned, 64
# parts), 1000 dead letters. A benchmark line, not a test (no pass/fail).
#
#   ONCEQ_TEST_DSN='host=127.0.0.1 port=5432 user=postgres' \
#     test/bench/status_page_bench.sh [BUILD_DIR]     (default build/default)
#
# It creates and drops a scratch database on that server, starts
# `onceq coordinator --metrics-addr 127.0.0.1:0`, warms the page once, then
# times 10 GETs of / (and one of each /api/*) with curl. Prints one line:
#   status page: 50 queues, 500 sessions, 1000 dead: median 61 ms ...
set -euo pipefail
build=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/default}
onceq=$build/cli/onceq
[ -x "$onceq" ] || { echo "no $onceq; build first" >&2; exit 2; }
admin=${ONCEQ_TEST_DSN:?set ONCEQ_TEST_DSN to an admin conninfo}
db=status_bench_$$
dsn="$admin dbname=$db"
tmp=$(mktemp -d)
cpid=""
cleanup() {
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null
  psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
"$onceq" --db "$dsn" migrate >/dev/null
psql "$dsn" -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
INSERT INTO onceq_sessions (id, expiry, hostname, pid, queues, partitioned)
  SELECT gen_random_uuid(), interval '1 hour', 'host-' || (g % 40), 1000 + g,
         'queue-' || (g % 50), true
  FROM generate_series(1, 500) g;
INSERT INTO onceq_settings (key, value) VALUES ('partitions', '64');
INSERT INTO onceq_session_parts (part, session_id)
  SELECT p, (SELECT id FROM onceq_sessions ORDER BY id OFFSET p LIMIT 1)
  FROM generate_series(0, 63) p;
INSERT INTO onceq_items (queue, payload)
  SELECT 'queue-' || (g % 50), jsonb_build_object('n', g)
  FROM generate_series(1, 5000) g;
INSERT INTO onceq_items (queue, claim, claimed_at, attempts)
  SELECT 'queue-' || (g % 50), (SELECT id FROM onceq_sessions ORDER BY id
         OFFSET (g % 500) LIMIT 1), now(), 1
  FROM generate_series(1, 500) g;
INSERT INTO onceq_dead (id, queue, payload, priority, attempts, max_attempts,
                        last_error, created_at, died_at)
  SELECT gen_random_uuid(), 'queue-' || (g % 50),
         jsonb_build_object('n', g, 'text', repeat('x', 200)), 0, 5, 5,
         'exit status 1: <b>error</b> ' || repeat('detail ', 60), now(),
         now() - g * interval '1 second'
  FROM generate_series(1, 1000) g;
ANALYZE;
SQL
"$onceq" --db "$dsn" coordinator --metrics-addr 127.0.0.1:0 --interval 1s \
  >"$tmp/coord.log" 2>&1 &
cpid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*metrics on .* (port \([0-9]*\)).*/\1/p' "$tmp/coord.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/coord.log" >&2; exit 1; }
url=http://127.0.0.1:$port
curl -sf -o /dev/null "$url/" # warm: connection, plans
times=()
for _ in $(seq 1 10); do
  times+=("$(curl -sf -o "$tmp/page.html" -w '%{time_total}' "$url/")")
done
api=""
for ep in stats sessions dead parts; do
  api+=" /api/$ep $(curl -sf -o /dev/null -w '%{time_total}' "$url/api/$ep" |
    awk '{printf "%.0f", $1 * 1000}') ms,"
done
printf '%s\n' "${times[@]}" | sort -n | awk -v kib="$(($(stat -c %s "$tmp/page.html") / 1024))" \
  -v api="${api%,}" '{t[NR] = $1 * 1000} END {
  printf "status page: 50 queues, 500 sessions, 1000 dead: median %.0f ms " \
         "(min %.0f, max %.0f over %d GETs, %d KiB);%s\n",
         t[int((NR + 1) / 2)], t[1], t[NR], NR, kib, api}'
