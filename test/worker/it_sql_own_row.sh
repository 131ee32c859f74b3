#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$4 in --sql statements are for the server
# it_sql_own_row.sh: a --sql statement that deletes or unclaims its own
# onceq_items row (issue 20, finding 3). The claim-checked DELETE then finds
# no row while, after the rollback, the item is still ours. It once counted
# as a lost claim: the job was dropped unsettled, the sweep released it with
# attempts - 1, the next claim added 1, so the item ran again every sweep
# and never dead-lettered. Now it is a failed attempt: with max_attempts 3
# the item is in onceq_dead after 3 attempts, its last_error naming
# onceq_items; the same in batched mode (the default) and --sql-per-item,
# for a DELETE and for an UPDATE of the row. In a batch only the offending
# item fails: the others commit, one ledger row each. Each wait is bounded
# (15 s): without the fix the attempts never move and the wait ends there.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup own_row

oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL)" >/dev/null

# run_case LABEL MODE SQL [ITEMS]: ITEMS (2) items of max_attempts 3 on
# queue LABEL, one worker in MODE (batch: the default, batched acks;
# per-item: --sql-per-item) running SQL; wait until none is left, stop it.
run_case() {
  local label=$1 mode=$2 sql=$3 items=${4:-2} w flags=()
  [ "$mode" = per-item ] && flags+=(--sql-per-item)
  oq_sql "INSERT INTO onceq_items (queue, payload, max_attempts)
          SELECT '$label', jsonb_build_object('n', g), 3
          FROM generate_series(1, $items) g" >/dev/null
  oq_worker_start "$label" --queue "$label" --concurrency 4 "${flags[@]}" \
    --retry-base 50ms --poll-interval 100ms --heartbeat-interval 1s \
    --session-expiry 4s --sql "$sql"
  w=$OQ_LAST_PID
  local deadline=$(($(oq_now_ms) + 15000))
  while [ "$(oq_sql "SELECT count(*) FROM onceq_items WHERE queue = '$label'")" != 0 ]; do
    [ "$(oq_now_ms)" -lt "$deadline" ] ||
      oq_fail "$label: items still queued after 15 s (attempts claim last_error): $(oq_sql \
        "SELECT attempts || ' ' || coalesce(claim::text, '-') || ' ' ||
                coalesce(last_error, '-') FROM onceq_items WHERE queue = '$label'")"
    sleep 0.1
  done
  oq_stop "$w" 15
  oq_check "$label: worker exit code after SIGTERM" "$OQ_RC" 0
  if grep -q 'claim lost' "$OQ_TMP/$label.log"; then
    oq_fail "$label: logged a lost claim: $(grep -m1 'claim lost' "$OQ_TMP/$label.log")"
  fi
}

# check_dead LABEL N: N dead items of queue LABEL, each after 3 attempts,
# with a last_error that names onceq_items
check_dead() {
  local label=$1 n=$2
  oq_check "$label: dead items after 3 attempts" \
    "$(oq_sql "SELECT count(*) FROM onceq_dead WHERE queue = '$label'
               AND attempts = 3")" "$n"
  oq_contains "$label: last_error" \
    "$(oq_sql "SELECT last_error FROM onceq_dead WHERE queue = '$label' LIMIT 1")" \
    "touched its own onceq_items row"
}

DEL='DELETE FROM onceq_items WHERE id = $2'
UPD='UPDATE onceq_items SET claim = NULL, claimed_at = NULL WHERE id = $2'

run_case del_batch batch "$DEL"
check_dead del_batch 2
run_case del_single per-item "$DEL"
check_dead del_single 2
run_case upd_batch batch "$UPD"
check_dead upd_batch 2
run_case upd_single per-item "$UPD"
check_dead upd_single 2

# A batch where only n = 2 touches its own row: it fails; the other 5
# commit their ledger rows.
run_case mixed batch \
  'WITH d AS (DELETE FROM onceq_items WHERE id = $2 AND $1->>'"'n'"' = '"'2'"'
   RETURNING 1) INSERT INTO ledger (item_id) SELECT $2 FROM (SELECT count(*)
   FROM d) c' 6
check_dead mixed 1
oq_check "mixed: ledger rows (the 5 good items, once each)" \
  "$(oq_sql "SELECT count(*) || '/' || count(DISTINCT item_id) FROM ledger")" "5/5"
oq_log "PASS"
