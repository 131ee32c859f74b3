#!/usr/bin/env bash
# shellcheck disable=SC2016 # backquotes and $2 in single quotes are text
# cli_cancel_running: cancelling an item while its worker runs it. The
# worker's --sql handler writes a ledger row inside the ack transaction,
# after an 8 s sleep (room for the checks below on a loaded machine);
# `onceq cancel` deletes the item in the meantime. The ack must then be
# rejected: no ledger row, no item left, the worker says
# so, and it goes on working (a second item is acknowledged normally).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup cancel_running --url
t=$OQ_TMP
[ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"

oq_q "CREATE TABLE ledger (item_id uuid NOT NULL, at timestamptz DEFAULT now())"
id=$("$ONCEQ_CLI" push --queue slow '{"job": "cancel me"}')
"$ONCEQ_WORKER" --queue slow --concurrency 1 \
  --sql 'INSERT INTO ledger (item_id) SELECT $2 FROM pg_sleep(8)' \
  >"$t/worker.log" 2>&1 </dev/null &
wpid=$!
OQ_PIDS+=("$wpid")

# wait (bounded) until onceq shows the item running
state=""
for _ in $(seq 1 100); do
  "$ONCEQ_CLI" --json show "$id" >"$t/show.json" 2>"$t/show.err" || true
  state=$(oq_jget "$t/show.json" 'd["state"]' 2>/dev/null || true)
  [ "$state" = running ] && break
  sleep 0.1
done
oq_check "the item is running" "$state" running
oq_check "show names the worker's session" "$(oq_jget "$t/show.json" 'd["session"]')" \
  "$(oq_q "SELECT id FROM onceq_sessions WHERE pid = $wpid")"
oq_run_cli "$t/lr.out" "$t/lr.err" list --state running
oq_check "list --state running shows it" \
  "$(tail -n +2 "$t/lr.out" | cut -c1-36)" "$id"

oq_run_cli "$t/cancel.out" "$t/cancel.err" cancel "$id"
oq_check "cancel exit" "$OQ_RC" 0
oq_check "cancel says it was running" "$(cat "$t/cancel.out")" \
  "cancelled $id (was running)
1 item cancelled; 1 was running: its worker's ack will be rejected"
oq_run_cli "$t/cj.out" "$t/cj.err" --json cancel "$id"
oq_check "a second cancel: the item is gone" "$OQ_RC" 2
oq_check "the item is gone at once" "$(oq_q 'SELECT count(*) FROM onceq_items')" 0

# the handler finishes its sleep, then its ack must be rejected
for _ in $(seq 1 300); do
  grep -q "ack rejected" "$t/worker.log" && break
  sleep 0.1
done
grep -q "item=$id .*ack rejected" "$t/worker.log" ||
  oq_fail "the worker did not report the rejected ack"
oq_log "ok: the worker's ack was rejected"
oq_check "no ledger row: the cancelled item was never acknowledged" \
  "$(oq_q 'SELECT count(*) FROM ledger')" 0
oq_check "no item left" "$(oq_q 'SELECT count(*) FROM onceq_items')" 0
oq_check "nothing dead" "$(oq_q 'SELECT count(*) FROM onceq_dead')" 0

# the worker goes on: the next item is acknowledged exactly once
id2=$("$ONCEQ_CLI" push --queue slow '{"job": "keep me"}')
for _ in $(seq 1 300); do
  [ "$(oq_q 'SELECT count(*) FROM onceq_items')" = 0 ] && break
  sleep 0.1
done
oq_check "the next item's ledger row" \
  "$(oq_q "SELECT count(*), min(item_id::text) FROM ledger")" "1|$id2"
oq_check "no item left after it" "$(oq_q 'SELECT count(*) FROM onceq_items')" 0
kill -TERM "$wpid"
n=0
while oq_alive "$wpid" && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
wrc=0
wait "$wpid" || wrc=$?
oq_check "the worker drained and exited" "$wrc" 0
echo "PASS cli_cancel_running"
