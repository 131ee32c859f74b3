#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in --sql is the statement's, not ours
# it_claim_oom.sh: out of memory in the middle of a claim. The claim
# statement commits, then copying one of its rows fails (the LD_PRELOAD
# shim oq_fail_strdup makes strdup fail once for the row whose payload
# holds a marker): the rows that claim took are claimed by the worker's
# live session, yet it holds none of them (docs/design.md §4a). The worker
# must ask for a reconciliation sweep at once, not leave them until the
# periodic one (once per session expiry, here 60 s).
#
# Checks: every item is acknowledged exactly once (ledger) well within the
# session expiry (within 15 s), the worker logged the claim's out of memory
# and a "reconcile: released" line naming it as the trigger, and its session
# never changed (no reaper freed the rows).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup claimoom

if [ -n "${OQ_SANITIZER:-}" ]; then
  echo "SKIP: an LD_PRELOAD shim cannot run under $OQ_SANITIZER"
  exit 77
fi
[ -f "${OQ_FAIL_STRDUP:-}" ] || oq_fail "OQ_FAIL_STRDUP is not the shim: '${OQ_FAIL_STRDUP:-}'"

N=5
MARKER=oq-claim-oom-marker
# claim order is priority, then run_at: the marked item is the third row
oq_sql "CREATE TABLE ledger (item_id uuid);
        INSERT INTO onceq_items (payload, run_at)
        SELECT CASE WHEN g = 3 THEN jsonb_build_object('m', '$MARKER')
                    ELSE jsonb_build_object('n', g) END,
               now() - (10 - g) * interval '1 second'
        FROM generate_series(1, $N) g" >/dev/null

oq_start W env LD_PRELOAD="$OQ_FAIL_STRDUP" OQ_FAIL_STRDUP_MARKER="$MARKER" \
  OQ_FAIL_STRDUP_TIMES=1 "$ONCEQ_WORKER" --db "$OQ_DSN" \
  --session-expiry 60s --heartbeat-interval 2s --poll-interval 500ms \
  --concurrency 8 --sql 'INSERT INTO ledger VALUES ($2)'
w=$OQ_LAST_PID

oq_wait_until 20 "the worker's session" \
  eval '[ -n "$(oq_session_of "$w")" ]'
sid=$(oq_session_of "$w")
oom() { grep -q 'out of memory' "$OQ_TMP/W.log"; }
oq_wait_until 10 "the claim to run out of memory" oom
oq_log "worker: $(grep -m1 'out of memory' "$OQ_TMP/W.log")"
# well before the periodic sweep (60 s)
oq_wait_until 15 "every item acknowledged" oq_all_done
oq_check "ledger rows" "$(oq_sql 'SELECT count(*) FROM ledger')" "$N"
oq_check "distinct items in the ledger" \
  "$(oq_sql 'SELECT count(DISTINCT item_id) FROM ledger')" "$N"
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
sweep=$(grep -E 'reconcile: released [1-9].*out of memory' "$OQ_TMP/W.log" |
  head -n1 || true)
[ -n "$sweep" ] ||
  oq_fail "no 'reconcile: released N ... out of memory' line in the worker's log"
oq_log "sweep: $sweep"
oq_check "the worker's session never changed" "$(oq_session_of "$w")" "$sid"
oq_stop "$w" 15
oq_check "worker exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
