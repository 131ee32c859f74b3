#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_sigstop.sh: a worker frozen past its session expiry. Worker A (--sql
# handler that sleeps 0.5 s inside the ack transaction, heartbeat 200 ms,
# expiry 1600 ms) is SIGSTOPped while it holds claims and has ack
# transactions open. Worker B reaps A's session and completes the items A
# held. On SIGCONT, A's pending acks are rejected (its claim check fails,
# its writes roll back), A registers a new session (same pid, new id) and
# goes on working; the ledger stays exact.
source "$(dirname "${BASH_SOURCE[0]}")/it_lib.sh"
it_setup sigstop

N=40
EXPIRY_MS=1600
SQL='INSERT INTO ledger (item_id, n)
     SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.5)'
FAST=(--heartbeat-interval 200ms --session-expiry "${EXPIRY_MS}ms"
  --poll-interval 200ms)

it_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

# A acks one transaction per item: each then waits, open, for its next
# statement while A is stopped, which is the late ack this test is about.
# (A pipelined batch sends COMMIT with its statements, so the server may
# finish it, legitimately, before the reap; it_worker_sql covers batches.)
it_worker_start A "${FAST[@]}" --concurrency 4 --sql-per-item --sql "$SQL"
wa=$IT_LAST_PID
a_session() { it_sql "SELECT id FROM onceq_sessions WHERE pid = $wa"; }
a_registered() { [ -n "$(a_session)" ]; }
it_wait_until 10 "A's session" a_registered
sid_a=$(a_session)
it_log "A: pid $wa, session $sid_a"

# A has acked some items and holds claims with ack transactions open
# (idle in transaction or in pg_sleep) right now
a_busy() {
  [ "$(it_sql 'SELECT count(*) FROM ledger')" -ge 4 ] &&
    [ "$(it_sql "SELECT count(*) FROM onceq_items WHERE claim = '$sid_a'")" -gt 0 ] &&
    [ "$(it_sql "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database()
                   AND application_name = 'onceq-worker-exec'
                   AND xact_start IS NOT NULL")" -gt 0 ]
}
it_wait_until 20 "A to hold claims with open ack transactions" a_busy
kill -STOP "$wa"
t_stop=$(it_now_ms)
it_sql "SELECT id FROM onceq_items WHERE claim = '$sid_a' ORDER BY id" >"$IT_TMP/held"
held=$(wc -l <"$IT_TMP/held")
open_tx=$(it_sql "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database()
                    AND application_name = 'onceq-worker-exec'
                    AND xact_start IS NOT NULL")
ledger_at_stop=$(it_sql 'SELECT count(*) FROM ledger')
it_log "SIGSTOP A: $held claim(s) held, $open_tx open ack transaction(s), ledger at $ledger_at_stop"
[ "$held" -gt 0 ] || it_fail "A held no claims when stopped"

it_worker_start B "${FAST[@]}" --concurrency 8 --sql "$SQL"
wb=$IT_LAST_PID

# while A is frozen: B reaps A's session and completes the items A held
held_list=$(sed "s/.*/'&'/" "$IT_TMP/held" | paste -sd, -)
held_done() {
  [ "$(it_sql "SELECT count(*) FROM onceq_sessions WHERE id = '$sid_a'")" = 0 ] &&
    [ "$(it_sql "SELECT count(*) FROM onceq_items WHERE id IN ($held_list)")" = 0 ]
}
it_wait_until 30 "B to reap A and complete the items A held" held_done
it_log "A reaped and its items done $(($(it_now_ms) - t_stop)) ms after SIGSTOP"
it_check "held items in the ledger, once each" \
  "$(it_sql "SELECT count(*) FROM ledger WHERE item_id IN ($held_list)")" "$held"
# stay frozen for at least expiry + 2 s
while [ $(($(it_now_ms) - t_stop)) -lt $((EXPIRY_MS + 2000)) ]; do sleep 0.1; done
it_check "A still frozen" "$(awk '{print $3}' "/proc/$wa/stat")" T
kill -CONT "$wa"
t_cont=$(it_now_ms)
it_log "SIGCONT A after $((t_cont - t_stop)) ms"

rejoined() {
  [ "$(it_sql "SELECT count(*) FROM onceq_sessions WHERE pid = $wa AND id <> '$sid_a'")" = 1 ]
}
it_wait_until 20 "A to register a new session" rejoined
it_log "A registered again $(($(it_now_ms) - t_cont)) ms after SIGCONT:" \
  "$(it_sql "SELECT id FROM onceq_sessions WHERE pid = $wa")"
rejected() { grep -q "ack rejected" "$IT_TMP/A.log"; }
it_wait_until 10 "A to log a rejected ack" rejected
nrej=$(grep -c "ack rejected" "$IT_TMP/A.log" || true)
it_log "A logged $nrej rejected ack(s) (it held $held claims, $open_tx open transactions)"
it_check_le "rejected acks <= claims held at SIGSTOP" "$nrej" "$held"
# every rejected ack is for an item A held, and it landed once (by B)
grep "ack rejected" "$IT_TMP/A.log" | sed -n 's/.*item=\([0-9a-f-]*\).*/\1/p' |
  sort -u >"$IT_TMP/rejected"
it_check "rejected acks that were for items A held" \
  "$(comm -12 "$IT_TMP/rejected" "$IT_TMP/held" | wc -l)" "$(wc -l <"$IT_TMP/rejected")"

all_done() { [ "$(it_sql 'SELECT count(*) FROM onceq_items')" = 0 ]; }
it_wait_until 60 "every item done" all_done
it_stop "$wb" 15
it_check "B's exit code after SIGTERM" "$IT_RC" 0
# A goes on working under its new session, alone now
it_check "A alive after SIGCONT" "$(it_alive "$wa" && echo yes || echo no)" yes
it_sql "INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', 1000 + g) FROM generate_series(1, 8) g" >/dev/null
it_wait_until 30 "A to finish 8 more items" all_done
it_stop "$wa" 15
it_check "A's exit code after SIGTERM" "$IT_RC" 0
it_ledger_exact $((N + 8))
it_check "dead items" "$(it_sql 'SELECT count(*) FROM onceq_dead')" 0
it_check "session rows" "$(it_sql 'SELECT count(*) FROM onceq_sessions')" 0
it_log "PASS"
