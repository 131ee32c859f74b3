#!/usr/bin/env bash
# it_exec_handler.sh: onceq-worker --exec through the daemon: the child gets
# the payload on stdin, the item id as its last argument and ONCEQ_ITEM_ID,
# ONCEQ_QUEUE, ONCEQ_ATTEMPT in its environment; exit 0 acknowledges (every
# item once in the effect file), exit 1 is a failed attempt, dead-lettered
# after max_attempts with the tail of the child's stderr in last_error.
# Case 3 (issue 20): the child's environment is the documented one, never
# the worker's database URL, password or status token, in what it sees,
# in its kept result or in last_error; --env NAME / --env NAME=VALUE add.
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

# ---- 3. the handler environment (docs/worker.md "Handler environment")
# The child writes its environment to a file (all of it: the tails are cut
# at 4 KiB), to stdout (the kept result of item K) and to stderr (the
# last_error of item F, whose payload makes it fail).
cat >"$OQ_TMP/env.sh" <<EOF
#!/bin/sh
payload=\$(cat)
env >"$OQ_TMP/env-\$1.txt"
env
env >&2
case "\$payload" in *fail*) exit 1 ;; esac
EOF
chmod +x "$OQ_TMP/env.sh"
# env_run NAME ARGS...: items K and F through a worker whose environment
# holds every secret the worker may read; sets K and F (their ids)
env_run() {
  local name=$1
  shift
  oq_sql "DELETE FROM onceq_dead; DELETE FROM onceq_results" >/dev/null
  K=$(oq_sql "INSERT INTO onceq_items (queue, payload, keep_result)
              VALUES ('envq', '{}', true) RETURNING id")
  F=$(oq_sql "INSERT INTO onceq_items (queue, payload, max_attempts)
              VALUES ('envq', '{\"fail\": 1}', 1) RETURNING id")
  ONCEQ_DATABASE_URL="postgresql://u:oqdburl-secret@127.0.0.1:1/x" \
    DATABASE_URL="postgresql://u:dburl-secret@127.0.0.1:1/x" \
    PGPASSWORD=pgpassword-secret ONCEQ_STATUS_TOKEN=status-token-secret \
    PGSSLPASSWORD=pgsslpassword-secret OQT_UNRELATED=unrelated-value \
    OQT_ASKED=asked-value LC_TIME=C TZ=UTC \
    oq_worker_start "$name" --drain --queue envq "$@"
  oq_wait_exit "$OQ_LAST_PID" 30
  oq_check "$name: --drain exit code" "$OQ_RC" 0
  oq_check "$name: items left" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0
  oq_check "$name: dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 1
}
# no_secrets WHAT TEXT: none of the worker's secrets (nor a variable nobody
# asked for) is in TEXT
no_secrets() {
  local s
  for s in oqdburl-secret dburl-secret pgpassword-secret status-token-secret \
    pgsslpassword-secret unrelated-value ONCEQ_DATABASE_URL= DATABASE_URL= \
    PGPASSWORD= ONCEQ_STATUS_TOKEN= PGSSLPASSWORD=; do
    case "$2" in
    *"$s"*) oq_fail "$1 holds '$s' from the worker's environment: $2" ;;
    esac
  done
  oq_log "ok: $1 holds none of the worker's secrets"
}
env_run env1 --exec "$OQ_TMP/env.sh"
result=$(oq_sql "SELECT result FROM onceq_results WHERE item_id = '$K'")
err=$(oq_sql "SELECT last_error FROM onceq_dead WHERE id = '$F'")
no_secrets "the kept result" "$result"
no_secrets "last_error" "$err"
oq_contains "the kept result" "$result" "ONCEQ_ITEM_ID=$K"
oq_contains "last_error" "$err" "ONCEQ_ITEM_ID=$F"
for id in "$K" "$F"; do
  seen=$(cat "$OQ_TMP/env-$id.txt")
  no_secrets "the environment of $id" "$seen"
  oq_contains "the environment of $id" "$seen" "PATH=$PATH"
  oq_contains "the environment of $id" "$seen" "ONCEQ_ITEM_ID=$id"
  oq_contains "the environment of $id" "$seen" "ONCEQ_QUEUE=envq"
  oq_contains "the environment of $id" "$seen" "ONCEQ_ATTEMPT=1"
  oq_contains "the environment of $id" "$seen" "LC_TIME=C"
  oq_contains "the environment of $id" "$seen" "TZ=UTC"
done

# --env NAME copies the worker's value, --env NAME=VALUE sets one (and
# replaces a base variable); a value given on the command line is not
# logged, an unset NAME is
env_run env2 --env OQT_ASKED --env OQT_SET=set-value --env OQT_NOT_SET \
  --env PATH=/usr/bin:/bin --exec "$OQ_TMP/env.sh"
seen=$(cat "$OQ_TMP/env-$K.txt")
no_secrets "the environment with --env" "$seen"
oq_contains "the environment with --env" "$seen" "OQT_ASKED=asked-value"
oq_contains "the environment with --env" "$seen" "OQT_SET=set-value"
oq_contains "the environment with --env" "$seen" "PATH=/usr/bin:/bin"
case "$seen" in
*OQT_NOT_SET*) oq_fail "--env of an unset name set it: $seen" ;;
esac
oq_check "PATH lines (--env replaces the base one)" \
  "$(grep -c '^PATH=' "$OQ_TMP/env-$K.txt")" 1
# (the item's own failure line quotes the child's stderr: not the worker's)
log=$(grep -v 'dead-lettered: exit status 1' "$OQ_TMP/env2.log")
case "$log" in
*set-value*) oq_fail "the worker logged an --env value: $log" ;;
esac
oq_contains "the worker's log" "$log" "--env OQT_NOT_SET: not set"

# an explicit --env of a credential wins, with a warning that names it
# (not its value)
env_run env3 --env PGPASSWORD --exec "$OQ_TMP/env.sh"
oq_contains "the environment with --env PGPASSWORD" \
  "$(cat "$OQ_TMP/env-$K.txt")" "PGPASSWORD=pgpassword-secret"
log=$(grep -v 'dead-lettered: exit status 1' "$OQ_TMP/env3.log")
oq_contains "the worker's log" "$log" "--env PGPASSWORD hands"
case "$log" in
*pgpassword-secret*) oq_fail "the worker logged PGPASSWORD's value: $log" ;;
esac
oq_log "PASS"
