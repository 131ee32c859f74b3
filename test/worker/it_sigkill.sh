#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_sigkill.sh: kill -9 a worker that holds claims. Worker A (heartbeat
# 200 ms, expiry 1600 ms) and worker B share 200 items whose --sql handler
# sleeps 0.5 s in the ack transaction; A is killed midway. B's reaper
# deletes A's session, which releases A's claims, and B finishes them: the
# ledger is exact (200 rows, 200 distinct), nothing is left, A's session is
# gone. Prints the time from kill -9 to reaped and to all done.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup sigkill

N=200
# The handler sleeps 0.5 s in the ack transaction, so A is always holding
# claims. Under SERIALIZABLE, concurrent acks of one session abort each other
# (40001 on the ack DELETE) and every restart re-runs the handler, so a
# 0.5 s sleep makes B take ~80-100 s for the rest; there the sleep is 0.1 s
# (IT_SIGKILL_SLEEP overrides either).
if [ "${ONCEQ_TEST_ISOLATION:-read committed}" = serializable ]; then
  HANDLER_SLEEP=${IT_SIGKILL_SLEEP:-0.1}
else
  HANDLER_SLEEP=${IT_SIGKILL_SLEEP:-0.5}
fi
SQL='INSERT INTO ledger (item_id, n)
     SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep('"$HANDLER_SLEEP"')'
# --batch 4: acks of a few items each, so that A always holds claims while
# the ledger grows (with the default 64, A's share commits in one go and
# "acked some and holds claims" may never be seen)
FAST=(--heartbeat-interval 200ms --session-expiry 1600ms --poll-interval 200ms
  --batch 4)

oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

oq_log "handler: pg_sleep($HANDLER_SLEEP) + ledger insert"
oq_worker_start A "${FAST[@]}" --concurrency 4 --sql "$SQL"
wa=$OQ_LAST_PID
oq_worker_start B "${FAST[@]}" --concurrency 8 --sql "$SQL"
wb=$OQ_LAST_PID
a_session() { oq_sql "SELECT id FROM onceq_sessions WHERE pid = $wa"; }
a_registered() { [ -n "$(a_session)" ]; }
oq_wait_until 10 "A's session" a_registered
sid_a=$(a_session)
oq_log "A: pid $wa, session $sid_a"

# midway: A has acked some and holds claims right now
midway() {
  [ "$(oq_sql 'SELECT count(*) FROM ledger')" -ge 40 ] &&
    [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")" -gt 0 ]
}
oq_wait_until 40 "ledger >= 40 with claims held by A" midway
kill -KILL "$wa"
t_kill=$(oq_now_ms)
held=$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")
done_at_kill=$(oq_sql 'SELECT count(*) FROM ledger')
oq_log "killed A (-9) with $held claim(s) held; ledger at $done_at_kill"
oq_wait_exit "$wa" 5
oq_check "A's exit status" "$OQ_RC" 137

reaped() { [ "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid_a'")" = 0 ]; }
oq_wait_until 30 "A's session to be reaped" reaped
reap_ms=$(($(oq_now_ms) - t_kill))
oq_metric sigkill_reap "$reap_ms" ms "kill -9 to session reaped, expiry 1600 ms"
oq_check "items still claimed by A once it is reaped" \
  "$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")" 0

oq_wait_until 180 "B to finish every item" oq_all_done
finish_ms=$(($(oq_now_ms) - t_kill))
oq_metric sigkill_all_done "$finish_ms" ms "kill -9 to all $N done, pg_sleep($HANDLER_SLEEP)"
oq_check_le "ms from kill -9 to reaped (loose bound)" "$reap_ms" 10000
oq_check "B still running" "$(oq_alive "$wb" && echo yes || echo no)" yes
oq_stop "$wb" 15
oq_check "B's exit code after SIGTERM" "$OQ_RC" 0
oq_ledger_exact "$N"
oq_check "ledger n values" "$(oq_sql 'SELECT count(DISTINCT n) FROM ledger')" "$N"
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "A's session" "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid_a'")" 0
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_log "PASS"
