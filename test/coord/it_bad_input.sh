#!/usr/bin/env bash
# it_bad_input.sh: bad input to `onceq schedule`, `onceq coordinator` and
# `onceq stats` gives one line on stderr naming the fix, exit 2, and
# changes nothing in the database: a bad cron expression, bad JSON, a bad
# name, a name that exists, an unknown name (alone and with a known one),
# bad flags, a schema that was never migrated; and (issue 20) a session's
# hostname or a queue name with terminal controls reaches `onceq stats`'s
# table and hints escaped, never raw.
source "$(dirname "$0")/../harness/oq_harness.sh"
oq_setup bad_input

"$ONCEQ_CLI" --db "$OQ_DSN" schedule add keep '*/5 * * * *' q '{"a": 1}' >/dev/null ||
  oq_fail "schedule add keep failed"
state() {
  oq_sql "SELECT count(*) || ':' || coalesce(string_agg(name || '|' || cron
            || '|' || queue || '|' || payload::text || '|' || next_run_at::text,
            ',' ORDER BY name), '') FROM onceq_schedules"
}
items() { oq_sql "SELECT count(*) FROM onceq_items"; }
BEFORE=$(state)
oq_log "schedules: $BEFORE"

# expect_usage WHAT NEEDLE ARGS...: exit 2, exactly one stderr line that
# contains NEEDLE, no stdout, schedules and items unchanged.
expect_usage() {
  local what=$1 needle=$2 rc=0
  shift 2
  "$ONCEQ_CLI" --db "$OQ_DSN" "$@" >"$OQ_TMP/out" 2>"$OQ_TMP/err" </dev/null || rc=$?
  oq_check "$what: exit status" "$rc" 2
  oq_check "$what: stderr lines" "$(wc -l <"$OQ_TMP/err" | tr -d ' ')" 1
  oq_contains "$what: message" "$(cat "$OQ_TMP/err")" "$needle"
  oq_check "$what: stdout" "$(cat "$OQ_TMP/out")" ""
  oq_check "$what: schedules unchanged" "$(state)" "$BEFORE"
  oq_check "$what: no items" "$(items)" 0
}

expect_usage "bad cron (minute)" "minute field '61': values must be 0-59" \
  schedule add s1 '61 * * * *' q '{}'
expect_usage "bad cron (4 fields)" "expected 5" schedule add s1 '* * * *' q '{}'
expect_usage "bad cron (never)" "never fires" schedule add s1 '0 0 30 2 *' q '{}'
expect_usage "bad cron (names)" "sun-sat" schedule add s1 '0 0 * * someday' q '{}'
expect_usage "bad JSON payload" "not valid JSON" schedule add s1 '* * * * *' q '{nope'
expect_usage "bad name" "bad NAME" schedule add 'has space' '* * * * *' q '{}'
expect_usage "empty queue" "QUEUE" schedule add s1 '* * * * *' '' '{}'
expect_usage "add with missing arguments" "add takes" schedule add s1 '* * * * *'
expect_usage "existing name" "already exists" schedule add keep '* * * * *' q '{}'
expect_usage "unknown name" "no schedule named nope" schedule rm nope
expect_usage "known + unknown name (all or nothing)" "no schedule named nope" \
  schedule rm keep nope
expect_usage "rm without a name" "rm takes" schedule rm
expect_usage "unknown subcommand" "unknown subcommand" schedule frobnicate
expect_usage "coordinator: bad duration" "--interval abc" coordinator --interval abc
expect_usage "coordinator: unknown option" "unknown option --bogus" coordinator --bogus
expect_usage "coordinator: bad notify URL" "http:// or https://" \
  coordinator --notify-url ftp://example.invalid/
expect_usage "coordinator: expiry too short" "expiry" \
  coordinator --heartbeat-interval 1s --session-expiry 1s
expect_usage "coordinator: bad metrics address" "--metrics-addr" \
  coordinator --metrics-addr nowhere:x
expect_usage "coordinator: bad keep" "or off" coordinator --keep-done forever
expect_usage "stats: bad watch interval" "--watch" stats --watch 10ms
expect_usage "stats: bad sample" "--sample" stats --sample often
expect_usage "stats: unknown argument" "unknown argument" stats --bogus
oq_check "no session left behind" "$(oq_sql 'SELECT count(*) FROM onceq_sessions')" 0
oq_check "no lease" "$(oq_sql 'SELECT count(*) FROM onceq_leases')" 0

# a database without the schema: one line naming `onceq migrate`, exit 2
EMPTY="${OQ_DB}_empty"
oq_admin_sql "DROP DATABASE IF EXISTS $EMPTY WITH (FORCE)" >/dev/null 2>&1
oq_admin_sql "CREATE DATABASE $EMPTY" >/dev/null
for cmd in "coordinator" "stats" "schedule list"; do
  rc=0
  # shellcheck disable=SC2086
  timeout 20 "$ONCEQ_CLI" --db "$OQ_ADMIN_DSN dbname=$EMPTY" $cmd \
    >"$OQ_TMP/out" 2>"$OQ_TMP/err" </dev/null || rc=$?
  oq_check "$cmd without schema: exit status" "$rc" 2
  oq_contains "$cmd without schema: message" "$(cat "$OQ_TMP/err")" "onceq migrate"
done
oq_check "tables created in the empty database" \
  "$("$OQ_PSQL" -X -At -d "$OQ_ADMIN_DSN dbname=$EMPTY" -c \
     "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'onceq_%'")" 0
oq_admin_sql "DROP DATABASE IF EXISTS $EMPTY WITH (FORCE)" >/dev/null 2>&1

# hostnames come from whoever registered the session (any program may
# insert one): ESC and a newline in one, and in a queue name, stay escaped
oq_sql "INSERT INTO onceq_sessions (id, expiry, hostname, pid, queues)
        VALUES ('00000000-0000-4000-8000-0000000000e1', interval '1 hour',
                'ev' || chr(27) || '[2J' || chr(10) || 'FORGED', 4242, 'x');
        INSERT INTO onceq_items (queue)
        VALUES ('q' || chr(27) || '[31m' || chr(10) || 'FAKE')" >/dev/null
rc=0
timeout 20 "$ONCEQ_CLI" --db "$OQ_DSN" stats >"$OQ_TMP/out" 2>"$OQ_TMP/err" \
  </dev/null || rc=$?
oq_log "stats with an evil hostname: exit $rc: $(head -c 2000 "$OQ_TMP/out" | od -c | grep -c '033' || true) ESC line(s)"
oq_check "stats with an evil hostname: exit status" "$rc" 0
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$OQ_TMP/out"; then
  oq_fail "stats printed a raw control character: $(LC_ALL=C grep -n $'[\x01-\x08\x0b-\x1f\x7f]' "$OQ_TMP/out" | od -c | head -5)"
fi
if grep -q '^FORGED\|^FAKE' "$OQ_TMP/out"; then
  oq_fail "a newline in a hostname or queue name forged a line: $(grep -n '^FORGED\|^FAKE' "$OQ_TMP/out")"
fi
oq_contains "stats: the hostname, escaped" "$(cat "$OQ_TMP/out")" 'ev\x1B[2J\nFO'
oq_sql "DELETE FROM onceq_items; DELETE FROM onceq_sessions" >/dev/null
oq_log "PASS"
