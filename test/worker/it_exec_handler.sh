#!/usr/bin/env bash
# it_exec_handler.sh: onceq-worker --exec through the daemon: the child gets
# the payload on stdin, the item id as its last argument and ONCEQ_ITEM_ID,
# ONCEQ_QUEUE, ONCEQ_ATTEMPT in its environment; exit 0 acknowledges (every
# item once in the effect file), exit 1 is a failed attempt, dead-lettered
# after max_attempts with the tail of the child's stderr in last_error.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup exec

N=40
OUT=$OQ_TMP/effects.txt
FAILS=$OQ_TMP/fail-attempts.txt

cat >"$OQ_TMP/ok.sh" <<EOF
#!/bin/sh
# one line per run: <last arg> <queue> <attempt> <stdin> <ONCEQ_ITEM_ID>
payload=\$(cat)
printf '%s %s %s %s %s\n' "\$1" "\$ONCEQ_QUEUE" "\$ONCEQ_ATTEMPT" "\$payload" \
  "\$ONCEQ_ITEM_ID" >>"$OUT"
exit 0
EOF
cat >"$OQ_TMP/fail.sh" <<EOF
#!/bin/sh
cat >/dev/null
echo "\$1 \$ONCEQ_ATTEMPT" >>"$FAILS"
echo "some noise on stderr first"
echo "exec-boom: cannot frobnicate item \$1 (attempt \$ONCEQ_ATTEMPT)" >&2
exit 1
EOF
chmod +x "$OQ_TMP/ok.sh" "$OQ_TMP/fail.sh"
: >"$OUT"

# ---- 1. exit 0: every item exactly once, with its id, queue, attempt and
# payload
oq_sql "CREATE TABLE expected (id uuid PRIMARY KEY, payload jsonb);
        INSERT INTO onceq_items (queue, payload)
        SELECT 'jobs', jsonb_build_object('n', g, 's', 'x y') FROM generate_series(1, $N) g;
        INSERT INTO expected SELECT id, payload FROM onceq_items" >/dev/null
oq_worker_start ok --drain --queue jobs --concurrency 4 --exec "$OQ_TMP/ok.sh"
oq_wait_exit "$OQ_LAST_PID" 60
oq_check "--drain exit code" "$OQ_RC" 0
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
oq_check "effect lines" "$(wc -l <"$OUT")" "$N"
oq_check "distinct ids in the effect file" \
  "$(awk '{print $1}' "$OUT" | sort -u | wc -l)" "$N"
oq_check "lines whose ONCEQ_ITEM_ID is the last argument" \
  "$(awk '$1 == $NF' "$OUT" | wc -l)" "$N"
oq_check "lines with queue=jobs attempt=1" \
  "$(awk '$2 == "jobs" && $3 == 1' "$OUT" | wc -l)" "$N"
# every line's payload is its item's payload (jsonb text form)
{
  echo "CREATE TEMP TABLE seen (id uuid, payload text);"
  echo "COPY seen FROM STDIN;"
  awk '{id = $1; $1 = $2 = $3 = ""; $NF = ""; sub(/^ +/, ""); sub(/ +$/, "");
        print id "\t" $0}' "$OUT"
  echo '\.'
  echo "SELECT count(*) FROM seen s JOIN expected e ON e.id = s.id
         AND e.payload = s.payload::jsonb;"
} >"$OQ_TMP/check.sql"
oq_check "lines whose stdin was the item's payload" \
  "$(oq_sql <"$OQ_TMP/check.sql")" "$N"

# ---- 2. exit 1: failed attempts, dead after max_attempts = 2
fail_id=$(oq_sql "INSERT INTO onceq_items (queue, payload, max_attempts)
                  VALUES ('failing', '{\"n\": 99}', 2) RETURNING id")
oq_worker_start fail --queue failing --retry-base 50ms --poll-interval 200ms \
  --exec "$OQ_TMP/fail.sh"
w=$OQ_LAST_PID
dead() { [ "$(oq_sql 'SELECT count(*) FROM onceq_dead')" = 1 ]; }
oq_wait_until 30 "the failing item to be dead-lettered" dead
oq_stop "$w" 15
oq_check "worker exit code after SIGTERM" "$OQ_RC" 0
oq_check "dead item" "$(oq_sql 'SELECT id FROM onceq_dead')" "$fail_id"
oq_check "dead item's attempts" "$(oq_sql 'SELECT attempts FROM onceq_dead')" 2
oq_check "runs of the failing command" "$(wc -l <"$FAILS")" 2
oq_check "attempt numbers the command saw" "$(awk '{print $2}' "$FAILS" | tr '\n' ' ')" "1 2 "
err=$(oq_sql 'SELECT last_error FROM onceq_dead')
oq_log "last_error: $err"
oq_contains "last_error (stderr tail)" "$err" \
  "exec-boom: cannot frobnicate item $fail_id (attempt 2)"
oq_check "items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
oq_check "effect lines after the failing run" "$(wc -l <"$OUT")" "$N"
oq_log "PASS"
