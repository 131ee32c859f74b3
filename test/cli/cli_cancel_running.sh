#!/usr/bin/env bash
# shellcheck disable=SC2016 # backquotes and $2 in single quotes are text
# cli_cancel_running: cancelling an item while its worker runs it. The
# worker's --sql handler writes a ledger row inside the ack transaction,
# after a 3 s sleep; `onceq cancel` deletes the item in the meantime. The
# ack must then be rejected: no ledger row, no item left, the worker says
# so, and it goes on working (a second item is acknowledged normally).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cli_lib.sh
. "$here/cli_lib.sh"
cli_setup cancel_running
t=$CLI_TMP
[ -x "${ONCEQ_WORKER:-}" ] || cli_fail "ONCEQ_WORKER is not executable"

q "CREATE TABLE ledger (item_id uuid NOT NULL, at timestamptz DEFAULT now())"
id=$("$ONCEQ_CLI" push --queue slow '{"job": "cancel me"}')
"$ONCEQ_WORKER" --queue slow --concurrency 1 \
  --sql 'INSERT INTO ledger (item_id) SELECT $2 FROM pg_sleep(3)' \
  >"$t/worker.log" 2>&1 </dev/null &
wpid=$!
CLI_PIDS+=("$wpid")

# wait (bounded) until onceq shows the item running
state=""
for _ in $(seq 1 100); do
  "$ONCEQ_CLI" --json show "$id" >"$t/show.json" 2>"$t/show.err" || true
  state=$(jget "$t/show.json" 'd["state"]' 2>/dev/null || true)
  [ "$state" = running ] && break
  sleep 0.1
done
cli_check "the item is running" "$state" running
cli_check "show names the worker's session" "$(jget "$t/show.json" 'd["session"]')" \
  "$(q "SELECT id FROM onceq_sessions WHERE pid = $wpid")"
run_onceq "$t/lr.out" "$t/lr.err" list --state running
cli_check "list --state running shows it" \
  "$(tail -n +2 "$t/lr.out" | cut -c1-36)" "$id"

run_onceq "$t/cancel.out" "$t/cancel.err" cancel "$id"
cli_check "cancel exit" "$RC" 0
cli_check "cancel says it was running" "$(cat "$t/cancel.out")" \
  "cancelled $id (was running)
1 item cancelled; 1 was running: its worker's ack will be rejected"
run_onceq "$t/cj.out" "$t/cj.err" --json cancel "$id"
cli_check "a second cancel: the item is gone" "$RC" 2
cli_check "the item is gone at once" "$(q 'SELECT count(*) FROM onceq_items')" 0

# the handler finishes its sleep, then its ack must be rejected
for _ in $(seq 1 300); do
  grep -q "ack rejected" "$t/worker.log" && break
  sleep 0.1
done
grep -q "item=$id .*ack rejected" "$t/worker.log" ||
  cli_fail "the worker did not report the rejected ack"
cli_log "ok: the worker's ack was rejected"
cli_check "no ledger row: the cancelled item was never acknowledged" \
  "$(q 'SELECT count(*) FROM ledger')" 0
cli_check "no item left" "$(q 'SELECT count(*) FROM onceq_items')" 0
cli_check "nothing dead" "$(q 'SELECT count(*) FROM onceq_dead')" 0

# the worker goes on: the next item is acknowledged exactly once
id2=$("$ONCEQ_CLI" push --queue slow '{"job": "keep me"}')
for _ in $(seq 1 300); do
  [ "$(q 'SELECT count(*) FROM onceq_items')" = 0 ] && break
  sleep 0.1
done
cli_check "the next item's ledger row" \
  "$(q "SELECT count(*), min(item_id::text) FROM ledger")" "1|$id2"
cli_check "no item left after it" "$(q 'SELECT count(*) FROM onceq_items')" 0
kill -TERM "$wpid"
n=0
while cli_alive "$wpid" && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
wrc=0
wait "$wpid" || wrc=$?
cli_check "the worker drained and exited" "$wrc" 0
echo "PASS cli_cancel_running"
