#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1 in the match string is the claim's, not ours
# it_lost_claim_reply.sh: a claim that committed but whose reply never
# reached the worker. oq_cutproxy, armed at start, forwards the first claim
# statement (its text contains "SET claim = $1::uuid", lib/src/dialect.c),
# waits for the server's full answer, drops it and closes both sockets: the
# rows are claimed by the worker's live session, yet its worker holds none
# of them in memory (docs/design.md §4a). The reconciliation sweep (an
# ambiguous claim is one of its triggers; it also runs at least once per
# session expiry) must release them while the worker keeps running: not at
# exit, not by a reaper (the session stays the same).
#
# A trigger on onceq_items records every change of claim/claimed_at and
# every delete (claim_log, clock_timestamp()), so the test sees the lost
# claim, its release and by whom without racing the worker. Checks:
#  - the cut fired on a claim that took rows ("SELECT k", the claim's
#    outer SELECT, or "UPDATE k"; k >= 1; the lost claim is the first
#    claim statement: the earliest claimed_at);
#  - each of those k rows is released (claim -> NULL, same session still
#    registered) at most EXPIRY_MS + SLACK_MS after it was claimed;
#  - nothing of that claim ran before its release;
#  - every item runs exactly once (the attempt log: one start and one ok
#    end per item), none is dead, the worker's session never changed, and
#    it logged a "reconcile: released" line (the metric
#    onceq_worker_reconciled_total is printed when --metrics-addr answers).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup lostclaim

N=6
HB_MS=500
EXPIRY_MS=4000
SLACK_MS=1000 # release at most one expiry + this after the lost claim
ATT=$OQ_TMP/attempts.log
oq_attempt_script "$OQ_TMP/item.sh" 0.2 "$ATT"
MATCH='SET claim = $1::uuid'
oq_log "expiry $EXPIRY_MS ms, heartbeat $HB_MS ms, release bound" \
  "$EXPIRY_MS + $SLACK_MS ms; match '$MATCH'"

oq_sql "CREATE TABLE claim_log (id uuid, old_claim uuid, new_claim uuid,
                                claimed_at timestamptz, op text,
                                at timestamptz);
        CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS \$\$
        BEGIN
          IF TG_OP = 'DELETE' THEN
            INSERT INTO claim_log VALUES (OLD.id, OLD.claim, NULL,
              OLD.claimed_at, 'delete', clock_timestamp());
            RETURN OLD;
          END IF;
          IF NEW.claim IS DISTINCT FROM OLD.claim
             OR NEW.claimed_at IS DISTINCT FROM OLD.claimed_at THEN
            INSERT INTO claim_log VALUES (NEW.id, OLD.claim, NEW.claim,
              NEW.claimed_at, 'update', clock_timestamp());
          END IF;
          RETURN NEW;
        END \$\$;
        CREATE TRIGGER log_claim AFTER UPDATE OR DELETE ON onceq_items
          FOR EACH ROW EXECUTE FUNCTION log_claim();
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

oq_proxy_start px --match "$MATCH" --arm match
MPORT=$(oq_free_port)
oq_worker_start_on W "$OQ_PROXY_DSN" --heartbeat-interval "${HB_MS}ms" \
  --session-expiry "${EXPIRY_MS}ms" --poll-interval 500ms --concurrency 8 \
  --metrics-addr "127.0.0.1:$MPORT" --exec "$OQ_TMP/item.sh" W
w=$OQ_LAST_PID

cut_fired() { grep -q 'cutproxy: fired cut-after-match' "$OQ_TMP/px.log"; }
oq_wait_until 20 "the proxy to cut after a claim" cut_fired
fired=$(grep 'cutproxy: fired cut-after-match' "$OQ_TMP/px.log" | head -n1)
oq_log "proxy: $fired"
K=$(sed -n 's/.*commit-result=\(UPDATE\|SELECT\) \([0-9]*\).*/\2/p' <<<"$fired")
if [ -z "$K" ] || [ "$K" -lt 1 ]; then
  oq_fail "the cut claim took no rows (proxy: $fired): nothing was lost"
fi
sid=$(oq_session_of "$w")
[ -n "$sid" ] || oq_fail "the worker has no session after the cut"

# the lost claim: the first claim statement (its rows share one claimed_at,
# the earliest)
oq_sql "CREATE VIEW first_claim AS
          SELECT l.id, l.new_claim AS claim, l.claimed_at, l.at
          FROM claim_log l
          WHERE l.old_claim IS NULL AND l.new_claim IS NOT NULL
            AND l.claimed_at = (SELECT min(claimed_at) FROM claim_log
                                WHERE old_claim IS NULL
                                  AND new_claim IS NOT NULL)" >/dev/null
lost_claimed() { [ "$(oq_sql "SELECT count(*) FROM first_claim")" = "$K" ]; }
oq_wait_until 5 "the lost claim's $K rows in claim_log" lost_claimed
oq_check "sessions of the lost claim" \
  "$(oq_sql "SELECT string_agg(DISTINCT claim::text, ',') FROM first_claim")" "$sid"
oq_sql "SELECT id FROM first_claim ORDER BY id" >"$OQ_TMP/lost_ids"
oq_log "lost claim: $K row(s) of session $sid"

# each row of it released (claim -> NULL by an update, not a delete)
released() {
  [ "$(oq_sql "SELECT count(*) FROM first_claim f WHERE EXISTS (
                 SELECT 1 FROM claim_log l WHERE l.id = f.id
                   AND l.old_claim = f.claim AND l.new_claim IS NULL
                   AND l.op = 'update' AND l.at > f.at)")" = "$K" ]
}
oq_wait_until $(((EXPIRY_MS + SLACK_MS) / 1000 + 10)) \
  "the lost claim's rows to be released" released
worst=$(oq_sql "SELECT max(r.ms) FROM (
                  SELECT (extract(epoch FROM min(l.at) - f.at) * 1000)::int8 AS ms
                  FROM first_claim f JOIN claim_log l ON l.id = f.id
                   AND l.old_claim = f.claim AND l.new_claim IS NULL
                   AND l.op = 'update' AND l.at > f.at
                  GROUP BY f.id, f.at) r")
case "$worst" in
'' | *[!0-9-]*) oq_fail "no release time measured: '$worst'" ;;
esac
oq_metric lost_claim_reply_released_after "$worst" ms \
  "bound $EXPIRY_MS + $SLACK_MS (one expiry + slack)"
oq_check_le "release of the lost claim's rows, ms after the claim" "$worst" \
  $((EXPIRY_MS + SLACK_MS))
oq_check "the worker's session still registered at the release" \
  "$(oq_session_of "$w")" "$sid"
oq_check "worker alive" "$(oq_alive "$w" && echo yes || echo no)" yes

oq_wait_until 30 "every item done" oq_all_done
# nothing of the lost claim ran before its release
first_release_ms=$(oq_sql "SELECT (extract(epoch FROM min(l.at)) * 1000)::int8
                           FROM first_claim f JOIN claim_log l ON l.id = f.id
                            AND l.old_claim = f.claim AND l.new_claim IS NULL")
oq_check "attempts of the lost claim's items started before its first release" \
  "$(awk -v t="$first_release_ms" 'FILENAME == ARGV[1] {want[$1] = 1; next}
       $1 == "start" && ($3 in want) && $4 < t' "$OQ_TMP/lost_ids" "$ATT" |
     wc -l | tr -d ' ')" 0
oq_check "attempts (one per item)" "$(oq_attempt_count "$ATT" start)" "$N"
oq_check "items with an attempt" "$(awk '$1 == "start" {print $3}' "$ATT" | sort -u | wc -l | tr -d ' ')" "$N"
oq_check "completed attempts" \
  "$(awk '$1 == "end" && $5 == "ok"' "$ATT" | wc -l | tr -d ' ')" "$N"
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_check "the worker's session never changed" "$(oq_session_of "$w")" "$sid"
sweep=$(grep -E 'reconcile: released [1-9]' "$OQ_TMP/W.log" | head -n1 || true)
[ -n "$sweep" ] || oq_fail "no 'reconcile: released N' line in the worker's log"
oq_log "sweep: $sweep"
rec=$(oq_metric_value "127.0.0.1:$MPORT" onceq_worker_reconciled_total)
oq_log "onceq_worker_reconciled_total: ${rec:-(not served)}"
[ -z "$rec" ] || oq_check_le "onceq_worker_reconciled_total >= the lost rows" "$K" "${rec%.*}"
oq_stop "$w" 15
oq_check "worker exit code after SIGTERM" "$OQ_RC" 0
oq_log "PASS"
