#!/usr/bin/env bash
# it_schedule.sh: a due schedule fires exactly once per occurrence across a
# leader change. The schedule '* * * * *' is set 200 minutes behind, so the
# leader has ~200 occurrences to catch up (10 per pass); the leader is
# killed with SIGKILL part-way, and the other coordinator takes over and
# finishes. A BEFORE INSERT trigger copies every schedule item insert into a
# ledger (even one the unique key then turns away), and the test keeps
# deleting the items as acks would, so a second firing cannot hide: the
# ledger must hold each minute exactly once, with no gap, and both leaders
# must have fired. (schedule_race.c races four firers on one schedule.)
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup schedule

FLAGS=(--interval 200ms --heartbeat-interval 200ms --session-expiry 1600ms
       --keep-done off --keep-dead off)

out=$("$ONCEQ_CLI" --db "$OQ_DSN" schedule add tick '* * * * *' ticks '{"k": 1}' 2>&1) ||
  oq_fail "schedule add: $out"
oq_contains "schedule add output" "$out" "added schedule tick"
oq_contains "schedule list" "$("$ONCEQ_CLI" --db "$OQ_DSN" schedule list)" "tick"

# BEFORE INSERT: the ledger gets a row for every INSERT attempt that
# commits, even one that ON CONFLICT (unique_key) then skips; so a second
# firing of an occurrence shows up whether or not its item still exists.
oq_sql "CREATE TABLE ledger (key TEXT NOT NULL, queue TEXT NOT NULL,
                             payload JSONB NOT NULL,
                             at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
        CREATE FUNCTION ledger_add() RETURNS trigger LANGUAGE plpgsql AS \$\$
        BEGIN
          INSERT INTO ledger (key, queue, payload)
            VALUES (NEW.unique_key, NEW.queue, NEW.payload);
          RETURN NEW;
        END \$\$;
        CREATE TRIGGER ledger_add BEFORE INSERT ON onceq_items FOR EACH ROW
          WHEN (NEW.unique_key LIKE 'schedule:%') EXECUTE FUNCTION ledger_add()"
T0=$(oq_sql "SELECT extract(epoch FROM date_trunc('minute', now()))::int8 - 200 * 60")
oq_sql "UPDATE onceq_schedules SET next_run_at = to_timestamp($T0) WHERE name = 'tick'"

oq_coordinator a "${FLAGS[@]}"
A=$OQ_LAST_PID
oq_coordinator b "${FLAGS[@]}"
B=$OQ_LAST_PID
oq_wait_until 10 "a coordinator leads" \
  oq_sql_is "SELECT count(*) FROM onceq_leases" 1
LEADER=$(oq_leader_pid)
if [ "$LEADER" = "$A" ]; then OTHER=$B; else OTHER=$A; fi
oq_log "leader $LEADER, follower $OTHER"

# let the leader fire some occurrences (deleting them as they come), then
# kill it mid-catch-up
drain() { oq_sql "DELETE FROM onceq_items WHERE unique_key LIKE 'schedule:%'" >/dev/null; }
n=0
while [ "$(oq_sql 'SELECT count(*) FROM ledger')" -lt 30 ] && [ $n -lt 200 ]; do
  drain
  sleep 0.05
  n=$((n + 1))
done
kill -KILL "$LEADER"
KILLED_AT=$(oq_sql "SELECT now()")
fired_before=$(oq_sql 'SELECT count(*) FROM ledger')
oq_log "killed the leader after $fired_before occurrence(s)"
oq_check_le "the first leader fired some" 1 "$fired_before"
oq_check_le "... but not all (it was killed mid-catch-up)" "$fired_before" 190

# the other one takes over and catches up: next_run_at in the future
caught_up() {
  drain
  oq_sql_is "SELECT (next_run_at > now())::int FROM onceq_schedules WHERE name = 'tick'" 1
}
oq_wait_until 60 "the schedule caught up" caught_up
oq_check "new leader" "$(oq_leader_pid)" "$OTHER"
# stop it, so that a minute turning over meanwhile cannot add an
# occurrence between the reads below
kill -TERM "$OTHER"
oq_wait_exit "$OTHER" 5
oq_check "exit status of the new leader" "$OQ_RC" 0
drain

NEXT=$(oq_sql "SELECT extract(epoch FROM next_run_at)::int8 FROM onceq_schedules WHERE name = 'tick'")
WANT=$(((NEXT - T0) / 60))
oq_log "occurrences $T0 .. $((NEXT - 60)): $WANT"
oq_check_le "at least 200 occurrences due" 200 "$WANT"
oq_check "ledger rows (one per occurrence)" "$(oq_sql 'SELECT count(*) FROM ledger')" "$WANT"
oq_check "distinct occurrences" "$(oq_sql 'SELECT count(DISTINCT key) FROM ledger')" "$WANT"
oq_check "occurrences fired twice" \
  "$(oq_sql 'SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) > 1) d')" 0
# exactly the minutes T0, T0+60, ..., NEXT-60
oq_check "occurrences missing" \
  "$(oq_sql "SELECT count(*) FROM generate_series($T0, $NEXT - 60, 60) t
             WHERE NOT EXISTS (SELECT 1 FROM ledger
                               WHERE key = 'schedule:tick:' || t)")" 0
oq_check "fired after the kill (by the new leader)" \
  "$(oq_sql "SELECT (count(*) > 0)::int FROM ledger WHERE at > '$KILLED_AT'")" 1
oq_check "last_run_at = the last occurrence" \
  "$(oq_sql "SELECT extract(epoch FROM last_run_at)::int8 FROM onceq_schedules WHERE name = 'tick'")" \
  $((NEXT - 60))
oq_check "items with the schedule's queue and payload" \
  "$(oq_sql "SELECT count(*) FROM ledger WHERE queue = 'ticks' AND payload = '{\"k\": 1}'")" "$WANT"

# a fresh coordinator fires what is due now (a new minute, perhaps) and
# nothing twice
oq_coordinator c "${FLAGS[@]}"
C=$OQ_LAST_PID
oq_wait_until 10 "coordinator c leads" oq_leader_is "$C"
sleep 0.6
kill -TERM "$C"
oq_wait_exit "$C" 5
NEXT=$(oq_sql "SELECT extract(epoch FROM next_run_at)::int8 FROM onceq_schedules WHERE name = 'tick'")
oq_check "ledger after another coordinator ran" \
  "$(oq_sql "SELECT count(*) || '/' || count(DISTINCT key) FROM ledger")" \
  "$(((NEXT - T0) / 60))/$(((NEXT - T0) / 60))"

# rm
out=$("$ONCEQ_CLI" --db "$OQ_DSN" schedule rm tick 2>&1) || oq_fail "schedule rm: $out"
oq_check "schedules left" "$(oq_sql 'SELECT count(*) FROM onceq_schedules')" 0
oq_log "PASS"
