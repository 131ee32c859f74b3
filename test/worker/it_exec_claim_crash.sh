#!/usr/bin/env bash
# it_exec_claim_crash.sh: a --exec worker's claim survives a server crash.
# Its handler acts outside the database, so the claim must be durable
# before the child starts: PostgreSQL crashes (pg_ctl -m immediate, which
# loses every commit not yet flushed to the WAL) while the item's child
# runs; after the restart the item is still claimed by the worker's
# session, and a second worker started then never starts it. Before, the
# claims committed with synchronous_commit = off: a crash right after a
# claim put its item back as ready, and another worker ran it beside the
# first (chaos_worker_flow, seed 2036850390; docs/design.md section 3).
# Restarts the shared test server, so ctest runs it with RUN_SERIAL; skips
# (77) without ONCEQ_TEST_PGDATA (an external --dsn).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_need_pgctl
oq_setup execcrash

# The WAL writer flushes asynchronous commits every wal_writer_delay
# (200 ms by default): made long here, so that only the claim's own commit
# can make it durable before the crash, and put back however the test ends.
# The trap runs without errexit (the harness sets -e, and `(exit $rc)`
# would end the trap before oq_cleanup stops the workers) and with
# oq_psql_retry, which returns its status instead of failing the test.
writer_delay() {
  oq_psql_retry "$OQ_PSQL" "$OQ_DSN" "ALTER SYSTEM $1" &&
    oq_psql_retry "$OQ_PSQL" "$OQ_DSN" "SELECT pg_reload_conf()"
}
trap 'rc=$?; set +e; writer_delay "RESET wal_writer_delay"; (exit $rc); oq_cleanup' EXIT
writer_delay "SET wal_writer_delay = '10s'" ||
  oq_fail "ALTER SYSTEM SET wal_writer_delay failed: $OQ_PSQL_OUT"

STARTS=$OQ_TMP/starts.txt
printf '#!/bin/sh\ncat >/dev/null\necho "start $1" >>"%s"\nsleep 8\n' \
  "$STARTS" >"$OQ_TMP/slow.sh"
chmod +x "$OQ_TMP/slow.sh"
: >"$STARTS"
oq_sql "INSERT INTO onceq_items (payload) VALUES ('{}')" >/dev/null

# A long heartbeat interval: a heartbeat's commit flushes the WAL, the
# claim's with it; here only the claim's own commit may make it durable.
oq_worker_start A --concurrency 1 --heartbeat-interval 10s \
  --session-expiry 60s --poll-interval 200ms --exec "$OQ_TMP/slow.sh"
wa=$OQ_LAST_PID
# the crash follows the child's start as closely as the test can
for _ in $(seq 1 3000); do [ -s "$STARTS" ] && break; sleep 0.01; done
[ -s "$STARTS" ] || oq_fail "A did not start the item within 30 s"
oq_pg_stop
oq_pg_start
oq_log "crashed and restarted PostgreSQL while A's child ran"
sess=$(oq_sql "SELECT id FROM onceq_sessions WHERE pid = $wa")
[ -n "$sess" ] || oq_fail "A's session row did not survive the crash"
oq_check "the item's claim after the crash" \
  "$(oq_sql "SELECT coalesce(claim::text, 'none') FROM onceq_items")" "$sess"

oq_worker_start B --concurrency 1 --heartbeat-interval 500ms \
  --session-expiry 5s --poll-interval 200ms --exec "$OQ_TMP/slow.sh"
wb=$OQ_LAST_PID
# B polls every 200 ms: 3 s is 15 chances to start the item beside A
sleep 3
oq_check "A still running" "$(oq_alive "$wa" && echo yes || echo no)" yes
oq_check "starts of the item" "$(wc -l <"$STARTS")" 1
oq_wait_until 60 "the item acknowledged" oq_all_done
oq_check "starts of the item after its ack" "$(wc -l <"$STARTS")" 1
oq_stop "$wa" 15
oq_check "A's exit code after SIGTERM" "$OQ_RC" 0
oq_stop "$wb" 15
oq_check "B's exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
