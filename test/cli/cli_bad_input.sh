#!/usr/bin/env bash
# shellcheck disable=SC2016 # backquotes and $2 in single quotes are text
# cli_bad_input: bad commands, options, JSON and ids. Each one exits 2 with
# one line on stderr that names the problem (and nothing on stdout), and the
# database is exactly as before.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup bad_input --url
t=$OQ_TMP

live=$("$ONCEQ_CLI" push --queue q '{"live": true}')
oq_q "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
     max_attempts, last_error, created_at)
   VALUES ('00000000-0000-4000-8000-0000000000dd', 'q', '{}', 0, 1, 1, 'e',
           now())"
unknown=00000000-0000-4000-8000-000000000404
before=$(oq_snapshot)

# bad WANT_REGEX ARGS...: onceq ARGS exits 2, prints one stderr line that
# matches WANT_REGEX and nothing on stdout, and changes nothing.
bad() {
  local want=$1
  shift
  oq_run_cli "$t/out" "$t/err" "$@"
  oq_check "onceq $* exit" "$OQ_RC" 2
  oq_check "onceq $*: stderr lines" "$(wc -l <"$t/err")" 1
  oq_match "onceq $*: the line" "$(cat "$t/err")" "$want"
  oq_check "onceq $*: stdout" "$(cat "$t/out")" ""
  oq_check "onceq $*: database unchanged" "$(oq_snapshot)" "$before"
}

bad '^onceq: unknown command frobnicate; see `onceq --help`$' frobnicate
bad '^onceq: no command given; see `onceq --help`$'
bad "^onceq: push: PAYLOAD_JSON is not valid JSON \(expected ',' or '}' at column 7\); quote it for the shell, e.g. '\{\"order\": 42\}'; nothing inserted$" \
  push '{"a":1'
bad "^onceq: push: PAYLOAD_JSON is not valid JSON \(expected a value at column 1\)" \
  push 'hello'
bad '^onceq: push: one PAYLOAD_JSON at a time' push '{}' '{}'
bad '^onceq: push: --priority must be an integer from -2147483648 to 2147483647 \(got high\); see `onceq push --help`$' \
  push --priority high '{}'
bad '^onceq: push: --delay must be a duration like 250ms, 5s, 2m or 1h \(got 5\)' \
  push --delay 5 '{}'
bad '^onceq: push: give --delay or --run-at, not both' \
  push --delay 5s --run-at 2030-01-01T00:00:00Z '{}'
bad '^onceq: push: --run-at tomorrowish is not a usable timestamp; write it like 2030-01-01T09:00:00Z \(ISO 8601, from 1970 to 100 years ahead\); nothing inserted$' \
  push --run-at tomorrowish '{}'
bad '^onceq: push: --max-attempts must be a number >= 1' \
  push --max-attempts 0 '{}'
bad '^onceq: push: unknown option --colour' push --colour '{}'
bad '^onceq: push: --atomic, --unique-key-field, --ordering-key-field and --batch are for bulk' \
  push --atomic '{}'
bad "^onceq: show: no item $unknown \(not live, not dead, not in the done history\)$" \
  show "$unknown"
bad '^onceq: show: no item 12345: an item id is a UUID like ' show 12345
bad "^onceq: cancel: no item $unknown; nothing cancelled$" cancel "$unknown"
bad "^onceq: cancel: no item $unknown; nothing cancelled$" \
  cancel "$live" "$unknown"
bad '^onceq: cancel: 00000000-0000-4000-8000-0000000000dd is dead, not live' \
  cancel 00000000-0000-4000-8000-0000000000dd
bad '^onceq: cancel: no item nope: an item id is a UUID' cancel "$live" nope
bad "^onceq: retry: no item $unknown; nothing retried$" retry "$unknown"
bad "^onceq: retry: $live is live, not dead; nothing retried$" retry "$live"
bad '^onceq: retry: give IDs or --all-dead, not both' \
  retry --all-dead 00000000-0000-4000-8000-0000000000dd
bad '^onceq: retry: --queue goes with --all-dead' \
  retry --queue q 00000000-0000-4000-8000-0000000000dd
bad '^onceq: list: --state must be ready, scheduled, running or dead \(got later\)' \
  list --state later
bad '^onceq: list: --limit must be a number from 1 to ' list --limit 0
bad '^onceq: sessions: unknown argument --all' sessions --all
bad '^onceq: reap: unknown argument now' reap now

# Bulk bad input with --atomic: exit 2, nothing inserted; the report names
# the line (one line per bad line, then the summary).
oq_run_cli "$t/out" "$t/err" push --atomic <<'EOF'
{"ok": 1}
{"ok": 2
EOF
oq_check "bulk --atomic bad line exit" "$OQ_RC" 2
oq_check "bulk --atomic report" "$(sed 's/ ([0-9.]*s)$//' "$t/err")" \
  "onceq: push: line 2: invalid JSON: expected ',' or '}' at column 9
onceq: push: rejected lines 1-2 (1 bad line, the first is line 2; --atomic inserts nothing); 0 new items"
oq_check "bulk --atomic: database unchanged" "$(oq_snapshot)" "$before"

# A database that is not there: one line naming the fix, exit 2 for
# configuration problems.
oq_run_cli "$t/out" "$t/err" --db "${ONCEQ_TEST_DSN} dbname=no_such_db_$$" list
oq_check "missing database exit" "$OQ_RC" 2
oq_check "missing database: one line" "$(wc -l <"$t/err")" 1
oq_match "missing database: names it" "$(cat "$t/err")" "^onceq: list: .*no_such_db_$$"
# A database without the onceq tables: every command says to migrate.
empty="cli_bad_input_empty_$$"
OQ_EXTRA_DBS+=("$empty")
psql "$OQ_ADMIN_DSN" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $empty" ||
  oq_fail "cannot create $empty"
for cmd in list sessions reap "show $unknown" "cancel $unknown" \
  "retry --all-dead" "push {}"; do
  # shellcheck disable=SC2086 # cmd is several words on purpose
  oq_run_cli "$t/out" "$t/err" --db "$OQ_ADMIN_DSN dbname=$empty" $cmd
  oq_check "unmigrated: $cmd exit" "$OQ_RC" 2
  oq_check "unmigrated: $cmd: one line" "$(wc -l <"$t/err")" 1
  oq_match "unmigrated: $cmd names the fix" "$(cat "$t/err")" \
    '^onceq: [a-z]+: the onceq tables are missing in this database; run `onceq migrate` first'
done
oq_run_cli "$t/out" "$t/err" --db "$OQ_ADMIN_DSN dbname=$empty" push <<<'{"a": 1}'
oq_check "unmigrated: bulk push exit" "$OQ_RC" 2
oq_check "unmigrated: bulk push says so before reading" "$(cat "$t/err")" \
  'onceq: push: the onceq tables are missing in this database; run `onceq migrate` first; nothing read or inserted'
echo "PASS cli_bad_input"
