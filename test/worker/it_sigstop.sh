#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_sigstop.sh: a worker frozen past its session expiry. Worker A (--sql
# handler that sleeps 0.5 s inside the ack transaction, heartbeat 200 ms,
# expiry 1600 ms) is SIGSTOPped while it holds claims and has ack
# transactions open. Worker B reaps A's session and completes the items A
# held. On SIGCONT, A's pending acks are rejected (its claim check fails,
# its writes roll back), A registers a new session (same pid, new id) and
# goes on working; the ledger stays exact.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup sigstop

N=40
EXPIRY_MS=1600
SQL='INSERT INTO ledger (item_id, n)
     SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.5)'
FAST=(--heartbeat-interval 200ms --session-expiry "${EXPIRY_MS}ms"
  --poll-interval 200ms)

oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

# A acks one transaction per item: each then waits, open, for its next
# statement while A is stopped, which is the late ack this test is about.
# (A pipelined batch sends COMMIT with its statements, so the server may
# finish it, legitimately, before the reap; it_worker_sql covers batches.)
oq_worker_start A "${FAST[@]}" --concurrency 4 --sql-per-item --sql "$SQL"
wa=$OQ_LAST_PID
a_session() { oq_sql "SELECT id FROM onceq_sessions WHERE pid = $wa"; }
a_registered() { [ -n "$(a_session)" ]; }
oq_wait_until 10 "A's session" a_registered
sid_a=$(a_session)
oq_log "A: pid $wa, session $sid_a"

# A has acked some items and holds claims with ack transactions open
# (idle in transaction or in pg_sleep) right now
a_busy() {
  [ "$(oq_sql 'SELECT count(*) FROM ledger')" -ge 4 ] &&
    [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")" -gt 0 ] &&
    [ "$(oq_sql "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database()
                   AND application_name = 'onceq-worker-exec'
                   AND xact_start IS NOT NULL")" -gt 0 ]
}
oq_wait_until 20 "A to hold claims with open ack transactions" a_busy
kill -STOP "$wa"
t_stop=$(oq_now_ms)
oq_sql "SELECT id FROM onceq_items WHERE claim = '$sid_a' ORDER BY id" >"$OQ_TMP/held"
held=$(wc -l <"$OQ_TMP/held")
open_tx=$(oq_sql "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database()
                    AND application_name = 'onceq-worker-exec'
                    AND xact_start IS NOT NULL")
ledger_at_stop=$(oq_sql 'SELECT count(*) FROM ledger')
oq_log "SIGSTOP A: $held claim(s) held, $open_tx open ack transaction(s), ledger at $ledger_at_stop"
[ "$held" -gt 0 ] || oq_fail "A held no claims when stopped"

oq_worker_start B "${FAST[@]}" --concurrency 8 --sql "$SQL"
wb=$OQ_LAST_PID

# while A is frozen: B reaps A's session and completes the items A held
held_list=$(sed "s/.*/'&'/" "$OQ_TMP/held" | paste -sd, -)
held_done() {
  [ "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid_a'")" = 0 ] &&
    [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE id IN ($held_list)")" = 0 ]
}
oq_wait_until 30 "B to reap A and complete the items A held" held_done
oq_log "A reaped and its items done $(($(oq_now_ms) - t_stop)) ms after SIGSTOP"
oq_check "held items in the ledger, once each" \
  "$(oq_sql "SELECT count(*) FROM ledger WHERE item_id IN ($held_list)")" "$held"
# stay frozen for at least expiry + 2 s
while [ $(($(oq_now_ms) - t_stop)) -lt $((EXPIRY_MS + 2000)) ]; do sleep 0.1; done
oq_check "A still frozen" "$(awk '{print $3}' "/proc/$wa/stat")" T
kill -CONT "$wa"
t_cont=$(oq_now_ms)
oq_log "SIGCONT A after $((t_cont - t_stop)) ms"

rejoined() {
  [ "$(oq_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $wa AND id <> '$sid_a'")" = 1 ]
}
oq_wait_until 20 "A to register a new session" rejoined
oq_log "A registered again $(($(oq_now_ms) - t_cont)) ms after SIGCONT:" \
  "$(oq_sql "SELECT id FROM onceq_sessions WHERE pid = $wa")"
rejected() { grep -q "ack rejected" "$OQ_TMP/A.log"; }
oq_wait_until 10 "A to log a rejected ack" rejected
nrej=$(grep -c "ack rejected" "$OQ_TMP/A.log" || true)
oq_log "A logged $nrej rejected ack(s) (it held $held claims, $open_tx open transactions)"
oq_check_le "rejected acks <= claims held at SIGSTOP" "$nrej" "$held"
# every rejected ack is for an item A held, and it landed once (by B)
grep "ack rejected" "$OQ_TMP/A.log" | sed -n 's/.*item=\([0-9a-f-]*\).*/\1/p' |
  sort -u >"$OQ_TMP/rejected"
oq_check "rejected acks that were for items A held" \
  "$(comm -12 "$OQ_TMP/rejected" "$OQ_TMP/held" | wc -l)" "$(wc -l <"$OQ_TMP/rejected")"

oq_wait_until 60 "every item done" oq_all_done
oq_stop "$wb" 15
oq_check "B's exit code after SIGTERM" "$OQ_RC" 0
# A goes on working under its new session, alone now
oq_check "A alive after SIGCONT" "$(oq_alive "$wa" && echo yes || echo no)" yes
oq_sql "INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', 1000 + g) FROM generate_series(1, 8) g" >/dev/null
oq_wait_until 30 "A to finish 8 more items" oq_all_done
oq_stop "$wa" 15
oq_check "A's exit code after SIGTERM" "$OQ_RC" 0
oq_ledger_exact $((N + 8))
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "session rows" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_log "PASS"
