#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1..$5 and backquotes in single quotes are text
# badinput.sh: the bad-input catalogue (issue 14). Each case is a mistake a
# new user makes with onceq or onceq-worker; each asserts
#   - the exit code (docs/cli.md "Exit codes": 2 bad usage or configuration,
#     1 the environment: server unreachable, interrupted),
#   - exactly one line on stderr naming the problem (a regex), nothing on
#     stdout,
#   - no password in that line,
#   - the database afterwards: exactly as before (nothing inserted, no
#     session or claim left), or for the runtime cases the item accounted
#     for (dead-lettered with its real error, nothing claimed).
# Problems are collected so that one run reports every failing case.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup badinput --url
t=$OQ_TMP
[ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"

SECRET=Pw5eCrEt
PROBLEMS=()
NCASES=0
oq_q "CREATE TABLE ledger (id uuid, n int)"
before=$(oq_snapshot)

# run_case KIND NAME OQ_RC WANT_REGEX ARGS...: run onceq (KIND cli) or
# onceq-worker (KIND worker) with ARGS (at most 20 s) and check the rules
# above against the snapshot taken before.
run_case() {
  local kind=$1 name=$2 want_rc=$3 want=$4 bin rc=0 text lines
  shift 4
  NCASES=$((NCASES + 1))
  bin=$ONCEQ_CLI
  [ "$kind" = worker ] && bin=$ONCEQ_WORKER
  timeout 20 "$bin" "$@" >"$t/out" 2>"$t/err" </dev/null || rc=$?
  text=$(cat "$t/err")
  lines=$(wc -l <"$t/err")
  oq_log "case $NCASES ($kind) $name: exit $rc: $text"
  [ "$rc" = "$want_rc" ] || PROBLEMS+=("$name: exit code $rc, want $want_rc")
  [ "$lines" = 1 ] || PROBLEMS+=("$name: $lines stderr lines, want 1: $(head -c 300 "$t/err")")
  grep -Eq -- "$want" <<<"$text" || PROBLEMS+=("$name: stderr '$text' does not match /$want/")
  case "$text" in
  *"$SECRET"*) PROBLEMS+=("$name: the password shows in stderr") ;;
  esac
  [ ! -s "$t/out" ] || PROBLEMS+=("$name: printed on stdout: $(head -c 200 "$t/out")")
  local now
  now=$(oq_snapshot)
  [ "$now" = "$before" ] || PROBLEMS+=("$name: the database changed: $before -> $now")
}
cli_case() { run_case cli "$@"; }
worker_case() { run_case worker "$@"; }

W_URL="postgresql://u:$SECRET@127.0.0.1:1/x"

# ---- connection hints name the right fix --------------------------------------
cli_case "onceq port=notaport" 2 'invalid integer value "notaport".*fix that option in --db' \
  --db "host=127.0.0.1 port=notaport" list
cli_case "onceq with a role that does not exist" 2 \
  'role "onceq_no_such_role" does not exist; create the role or fix user=' \
  --db "$OQ_ADMIN_DSN user=onceq_no_such_role" list
worker_case "worker port=notaport" 2 'fix that option in --db' \
  --db "host=127.0.0.1 port=notaport" --sql 'select 1'

# ---- passwords never in usage errors (issue 14, bad 3) ----------------------
worker_case "worker --db=URL with a password (unreachable)" 1 '127\.0\.0\.1' \
  "--db=$W_URL" --sql 'select 1'
worker_case "worker --dbx=URL: unknown option" 2 '^onceq-worker: unknown option --dbx;' \
  "--dbx=$W_URL" --sql 'select 1'
worker_case "worker URL given positionally" 2 \
  'unexpected argument postgresql://u:\*\*\*@127\.0\.0\.1:1/x' "$W_URL" --sql 'select 1'
worker_case "worker conninfo given positionally" 2 \
  'unexpected argument host=127\.0\.0\.1 password=\*\*\*' \
  "host=127.0.0.1 password=$SECRET" --sql 'select 1'
cli_case "onceq --database=URL list" 2 \
  '^onceq: unknown option --database=postgresql://u:\*\*\*@127\.0\.0\.1:1/x; see `onceq --help`$' \
  "--database=$W_URL" list
cli_case "onceq URL given as the command" 2 \
  '^onceq: unknown command postgresql://u:\*\*\*@.*\(the database goes in --db URL\)' \
  "$W_URL" list
cli_case "onceq list URL" 2 '^onceq: list: unknown argument postgresql://u:\*\*\*@' \
  list "$W_URL"
cli_case "onceq push --bogus=URL" 2 '^onceq: push: unknown option --bogus=postgresql://u:\*\*\*@' \
  push "--bogus=$W_URL" '{}'
cli_case "onceq --db=URL with a password (unreachable)" 1 \
  '^onceq: list: cannot connect to postgresql://u:\*\*\*@127\.0\.0\.1:1/x' \
  "--db=$W_URL" list

# ---- one exit-code rule for every binary (docs/cli.md "Exit codes") ----------
# 2: what the user gave is wrong (flags, conninfo, a role or database that
# does not exist, the schema); 1: the environment failed (server down or
# unreachable, password refused, interrupted).
worker_case "worker --exec, server unreachable" 1 \
  '^onceq-worker: cannot connect to .*check that the server is running' \
  --db "host=127.0.0.1 port=1 connect_timeout=2" --exec /bin/true
worker_case "worker --http, server unreachable" 1 '^onceq-worker: cannot connect to' \
  --db "host=127.0.0.1 port=1 connect_timeout=2" --http http://127.0.0.1:9/hook
cli_case "onceq push, server unreachable" 1 '^onceq: push: cannot connect to' \
  --db "host=127.0.0.1 port=1 connect_timeout=2" push '{}'
worker_case "worker, database does not exist" 2 \
  'database "onceq_no_such_db" does not exist; create the database' \
  --db "$OQ_ADMIN_DSN dbname=onceq_no_such_db" --exec /bin/true
worker_case "worker, role does not exist" 2 \
  'role "onceq_no_such_role" does not exist; create the role' \
  --db "$OQ_ADMIN_DSN user=onceq_no_such_role" --sql 'select 1'
cli_case "coordinator port=notaport" 2 '^onceq: coordinator: .*fix that option in --db' \
  --db "host=127.0.0.1 port=notaport" coordinator --log-level error

# ---- a single-value flag given twice is refused, not last-wins ---------------
cli_case "push --queue a --queue=b" 2 \
  '^onceq: push: --queue is given twice; give it once' push --queue a --queue=b '{}'
cli_case "push --priority twice (bulk)" 2 '^onceq: push: --priority is given twice' \
  push --priority 1 --priority 2
cli_case "list --limit 1 --limit=2" 2 '^onceq: list: --limit is given twice' \
  list --limit 1 --limit=2
cli_case "wait --timeout twice" 2 '^onceq: wait: --timeout is given twice' \
  wait --timeout 1s --timeout 2s 00000000-0000-0000-0000-000000000000
# onceq-worker keeps last-wins on purpose (documented in docs/worker.md):
# the systemd unit's ONCEQ_WORKER_OPTS overrides the unit's own defaults.
# Each value given is still checked.
worker_case "worker --shutdown-timeout 30s --shutdown-timeout=0s (last wins, checked)" 2 \
  '^onceq-worker: --shutdown-timeout 0s: expected a duration above zero' \
  --shutdown-timeout 30s --shutdown-timeout=0s --exec /bin/true
cli_case "coordinator --interval twice" 2 \
  '^onceq: coordinator: --interval is given twice; give it once' \
  coordinator --interval 1s --interval=2s
cli_case "onceq --db twice (global)" 2 \
  '^onceq: --db is given twice; give it once' \
  --db "$W_URL" "--db=$OQ_ADMIN_DSN" list

# ---- schedules that can never fire are refused at creation -------------------
cli_case "schedule add '0 0 30 2 *' (February 30)" 2 \
  "^onceq: schedule: cron '0 0 30 2 \\*' never fires" \
  schedule add feb30 '0 0 30 2 *' q '{}'
cli_case "schedule add '0 0 31 4,6,9,11 *' (31st of 30-day months)" 2 \
  'never fires' schedule add apr31 '0 0 31 4,6,9,11 *' q '{}'

# ---- JSON nested too deep: our own limit, one line, the line named ----------
deep=$(head -c 100000 /dev/zero | tr '\0' '[')
cli_case "push PAYLOAD of 100000 '['" 2 \
  '^onceq: push: PAYLOAD_JSON is not valid JSON \(nested deeper than 1000 levels at column 1001\)' \
  push "$deep"
cli_case "push PAYLOAD nested 1001 levels (valid JSON)" 2 'nested deeper than 1000 levels' \
  push "$(head -c 1001 /dev/zero | tr '\0' '[')$(head -c 1001 /dev/zero | tr '\0' ']')"

# bulk_case NAME RC FIRST_REGEX SUMMARY_REGEX FILE ARGS...: onceq push ARGS
# < FILE: exit RC, two stderr lines (the bad line, then the summary),
# nothing on stdout, the database unchanged.
bulk_case() {
  local name=$1 want_rc=$2 first=$3 last=$4 file=$5 rc=0
  shift 5
  NCASES=$((NCASES + 1))
  timeout 20 "$ONCEQ_CLI" push "$@" <"$file" >"$t/out" 2>"$t/err" || rc=$?
  oq_log "case $NCASES (bulk) $name: exit $rc: $(cat "$t/err")"
  [ "$rc" = "$want_rc" ] || PROBLEMS+=("$name: exit code $rc, want $want_rc")
  [ "$(wc -l <"$t/err")" = 2 ] ||
    PROBLEMS+=("$name: $(wc -l <"$t/err") stderr lines, want 2: $(head -c 300 "$t/err")")
  grep -Eq -- "$first" <<<"$(head -n 1 "$t/err")" ||
    PROBLEMS+=("$name: first line '$(head -n 1 "$t/err")' does not match /$first/")
  grep -Eq -- "$last" <<<"$(tail -n 1 "$t/err")" ||
    PROBLEMS+=("$name: summary '$(tail -n 1 "$t/err")' does not match /$last/")
  [ ! -s "$t/out" ] || PROBLEMS+=("$name: printed on stdout: $(head -c 200 "$t/out")")
  [ "$(oq_snapshot)" = "$before" ] || PROBLEMS+=("$name: the database changed")
}
{ echo '{"n": 1}'; echo '{"n": 2}'; echo "$deep"; } >"$t/deep.jsonl"
bulk_case "bulk push, line 3 is 100000 '['" 1 \
  '^onceq: push: line 3: invalid JSON: nested deeper than 1000 levels at column 1001$' \
  '^onceq: push: rejected lines 1-3 \(line 3: invalid JSON\); 0 new items' "$t/deep.jsonl"
bulk_case "bulk push --atomic, line 3 is 100000 '['" 2 \
  '^onceq: push: line 3: invalid JSON: nested deeper than 1000 levels' \
  'rejected lines 1-3 \(1 bad line, the first is line 3; --atomic inserts nothing\)' \
  "$t/deep.jsonl" --atomic

# ---- --unique-key-field longer than the index takes: the line, the limit -----
# 3000 random letters: incompressible, so PostgreSQL's btree refuses the
# entry (at most 2704 bytes); push refuses any key over 1000 bytes itself.
longkey=$(head -c 6000 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z' | cut -c1-3000)
{ echo '{"k": "a"}'; echo "{\"k\": \"$longkey\"}"; echo '{"k": "b"}'; } >"$t/longkey.jsonl"
bulk_case "bulk push, line 2's unique key is 3000 bytes" 1 \
  '^onceq: push: line 2: field "k" is 3000 bytes long; a unique key is at most 1000 bytes \(--unique-key-field\)$' \
  'rejected lines 1-3 \(line 2: unique key too long\)' "$t/longkey.jsonl" --unique-key-field k
bulk_case "bulk push --atomic, line 2's unique key is 3000 bytes" 2 \
  '^onceq: push: line 2: field "k" is 3000 bytes long' 'the first is line 2; --atomic' \
  "$t/longkey.jsonl" --unique-key-field k --atomic
{ echo '{"k": 1}'; echo "{\"k\": $(head -c 4000 /dev/urandom | od -An -tu1 | tr -dc '1-9' | cut -c1-1200)}"; } >"$t/longnum.jsonl"
bulk_case "bulk push, line 2's unique key is a 1200-digit number" 1 \
  '^onceq: push: line 2: field "k" is 1200 bytes long' 'rejected lines 1-2' \
  "$t/longnum.jsonl" --unique-key-field k

# ---- --ordering-key-field: too long or empty on a line ---------------------
{ echo '{"k": "a"}'; echo "{\"k\": \"$longkey\"}"; echo '{"k": "b"}'; } >"$t/longokey.jsonl"
bulk_case "bulk push, line 2's ordering key is 3000 bytes" 1 \
  '^onceq: push: line 2: field "k" is 3000 bytes long; an ordering key is at most 1000 bytes \(--ordering-key-field\)$' \
  'rejected lines 1-3 \(line 2: ordering key too long\)' "$t/longokey.jsonl" --ordering-key-field k
{ echo '{"k": "a"}'; echo '{"k": ""}'; } >"$t/emptyokey.jsonl"
bulk_case "bulk push, line 2's ordering key is empty" 1 \
  '^onceq: push: line 2: an empty ordering key in field "k" \(--ordering-key-field needs a string or a number on every line\)$' \
  'rejected lines 1-2 \(line 2: no usable ordering key field\)' "$t/emptyokey.jsonl" --ordering-key-field k

# ---- a line only the server refuses is named by its own number -------------
# A CHECK an operator added to onceq_items refuses line 5 of 8: bisection
# runs the real insert (rolled back), so the report names line 5, not the
# batch's first line.
oq_q "ALTER TABLE onceq_items ADD CONSTRAINT badinput_no_poison
     CHECK (NOT payload ? 'poison')"
for i in 1 2 3 4 5 6 7 8; do
  if [ "$i" = 5 ]; then echo '{"poison": true}'; else echo "{\"n\": $i}"; fi
done >"$t/poison.jsonl"
bulk_case "bulk push, the server refuses line 5 (a CHECK)" 1 \
  '^onceq: push: line 5: rejected by the server: .*badinput_no_poison' \
  'rejected lines 1-8 \(line 5: rejected by the server\)' "$t/poison.jsonl"
bulk_case "bulk push --atomic, the server refuses line 5 (a CHECK)" 2 \
  '^onceq: push: line 5: rejected by the server: .*badinput_no_poison' \
  'line 5: rejected by the server; --atomic inserts nothing' "$t/poison.jsonl" --atomic
oq_q "ALTER TABLE onceq_items DROP CONSTRAINT badinput_no_poison"

# ---- push --run-at that can never run (issue 14, bad 4) ---------------------
for ts in infinity -infinity tomorrow epoch now '4000-01-01 BC' 2030-13-01 \
  1960-01-01 2200-01-01 99999-01-01; do
  cli_case "push --run-at '$ts'" 2 \
    "^onceq: push: --run-at $ts is not a usable timestamp; write it like 2030-01-01T09:00:00Z" \
    push --run-at "$ts" '{}'
done
cli_case "push --run-at=infinity (bulk from stdin)" 2 \
  '^onceq: push: --run-at infinity is not a usable timestamp' push --run-at=infinity

# ---- zero durations: one rule for both daemons -------------------------------
for flag in --heartbeat-interval --session-expiry --poll-interval --timeout \
  --kill-grace --shutdown-timeout --retry-base --orphan-after; do
  worker_case "worker $flag 0s" 2 "^onceq-worker: $flag 0s: expected a duration above zero" \
    "$flag" 0s --sql 'select 1'
done
worker_case "worker --poll-interval=0ms" 2 'poll-interval 0ms: expected a duration above zero' \
  --poll-interval=0ms --sql 'select 1'
cli_case "coordinator --status-token of 300 characters" 2 \
  '^onceq: coordinator: the status page token .* is 300 characters; use at most 255$' \
  coordinator --metrics-addr 127.0.0.1:0 --status-token "$(head -c 300 /dev/zero | tr '\0' t)"
cli_case "coordinator --session-expiry 0s" 2 '^onceq: coordinator: --session-expiry 0s' \
  coordinator --session-expiry 0s
cli_case "coordinator --heartbeat-interval=0s" 2 '^onceq: coordinator: --heartbeat-interval 0s' \
  coordinator --heartbeat-interval=0s

# ---- a value echoed in a usage error is escaped (one line, no ESC) ----------
cli_case "list --state with a newline" 2 \
  '^onceq: list: --state must be .*\(got x\\nFORGED\); see' list --state $'x\nFORGED'
cli_case "schedule add NAME with an escape sequence" 2 \
  "^onceq: schedule: bad NAME 'sch\\\\x1B\\[1mX'" schedule add $'sch\033[1mX' '* * * * *' q '{}'
worker_case "worker --concurrency with a newline" 2 \
  '^onceq-worker: --concurrency 1\\nFORGED must be a whole number' \
  --concurrency $'1\nFORGED' --sql 'select 1'
cli_case "coordinator --log-level with an escape sequence" 2 \
  '^onceq: coordinator: --log-level x\\x1B\[2J is unknown' \
  coordinator --log-level $'x\033[2J'

# ---- worker flags --------------------------------------------------------------
worker_case "worker --drain=yes" 2 '^onceq-worker: --drain takes no value' \
  --drain=yes --sql 'select 1'
worker_case "worker --concurrency=0" 2 '^onceq-worker: --concurrency 0 must be' \
  --concurrency=0 --sql 'select 1'
worker_case "worker --log-level verbose" 2 '^onceq-worker: --log-level verbose is unknown' \
  --log-level verbose --sql 'select 1'
worker_case "worker --exec then --sql= (two handlers)" 2 'more than one handler' \
  --exec /bin/true --sql='select 1'
# --env (issue 20): a bad name is named with the fix, its value never echoed
worker_case "worker --env 1ABC" 2 \
  '^onceq-worker: --env 1ABC: a variable name is letters, digits and _, not starting with a digit; write --env NAME or --env NAME=VALUE$' \
  --env 1ABC --exec /bin/true
worker_case "worker --env 'MY-TOKEN=<secret>'" 2 \
  '^onceq-worker: --env MY-TOKEN: a variable name is letters' \
  --env "MY-TOKEN=$SECRET" --exec /bin/true
worker_case "worker --env=' X=<secret>'" 2 '^onceq-worker: --env  X: a variable name' \
  --env=" X=$SECRET" --exec /bin/true
worker_case "worker --env =value" 2 '^onceq-worker: --env =\.\.\.: a variable name' \
  --env "=$SECRET" --exec /bin/true
worker_case "worker --env ''" 2 '^onceq-worker: --env =\.\.\.: a variable name' \
  --env '' --exec /bin/true
worker_case "worker --env ONCEQ_ITEM_ID=x" 2 \
  '^onceq-worker: --env ONCEQ_ITEM_ID: the worker sets ONCEQ_ITEM_ID for each item; choose another name$' \
  --env ONCEQ_ITEM_ID=x --exec /bin/true
worker_case "worker --env ONCEQ_ATTEMPT" 2 '^onceq-worker: --env ONCEQ_ATTEMPT: the worker sets' \
  --env ONCEQ_ATTEMPT --exec /bin/true
worker_case "worker --env with --sql" 2 \
  '^onceq-worker: --env A passes a variable to --exec children; --http and --sql start none' \
  --env A=1 --sql 'select 1'
worker_case "worker --env with no value" 2 '^onceq-worker: --env needs a value' --env
worker_case "worker --env with --http" 2 \
  '^onceq-worker: --env A passes a variable to --exec children' --env A --http http://127.0.0.1:1/

# ---- --sql checked at start-up: PREPARE, never run ---------------------------
worker_case "--sql empty" 2 '^onceq-worker: --sql is empty; give one statement' --sql ''
worker_case "--sql only a comment" 2 '^onceq-worker: --sql is empty' --sql ' -- nothing'
worker_case "--sql begin" 2 'must not control the transaction \(begin\)' --sql 'begin'
worker_case "--sql COMMIT;" 2 'must not control the transaction \(COMMIT\)' --sql 'COMMIT;'
worker_case "--sql rollback" 2 'must not control the transaction \(rollback\)' --sql 'rollback'
worker_case "--sql two statements" 2 'rejected by the server: cannot insert multiple commands' \
  --sql 'insert into ledger values ($2, 1); select 2'
worker_case "--sql does not parse" 2 'rejected by the server: syntax error at or near "selec" \(SQLSTATE 42601\)' \
  --sql 'selec 1'
worker_case "--sql uses \$5 (issue 14, bad 1)" 2 '^onceq-worker: --sql uses \$5; only \$1\.\.\$4 exist' \
  --sql 'insert into ledger values ($2, $5::int)'
worker_case "--sql uses \$5 untyped" 2 '(uses \$5|parameter \$5)' \
  --sql 'insert into ledger values ($2, $5)'
# COPY streams rows over the connection: inside the ack transaction libpq
# waits for a copy that never ends (the worker spun, its item claimed).
worker_case "--sql copy ... to stdout" 2 '^onceq-worker: --sql must not be a COPY' \
  --sql 'copy ledger to stdout'
worker_case "--sql COPY ... FROM STDIN" 2 '^onceq-worker: --sql must not be a COPY' \
  --sql ' /* load */ COPY ledger FROM STDIN'
worker_case "--sql COMMIT after a nested comment" 2 \
  '^onceq-worker: --sql must not control the transaction \(COMMIT\)' \
  --sql '/* /* */ */ COMMIT'
worker_case "--sql PREPARE TRANSACTION" 2 \
  '^onceq-worker: --sql must not control the transaction \(PREPARE TRANSACTION\)' \
  --sql "PREPARE TRANSACTION 'x'"
worker_case "--sql SET search_path" 2 \
  '^onceq-worker: --sql must not change a session setting \(SET\).*use SET LOCAL' \
  --sql 'set search_path = public, evil'
worker_case "--sql SET statement_timeout" 2 'must not change a session setting \(SET\)' \
  --sql 'SET statement_timeout = 1'
worker_case "--sql LISTEN" 2 '^onceq-worker: --sql must not LISTEN' --sql 'listen ch'
worker_case "--sql DEALLOCATE ALL" 2 '^onceq-worker: --sql must not DEALLOCATE' \
  --sql 'deallocate all'
worker_case "--sql names a missing table" 2 'relation "nosuch" does not exist \(SQLSTATE 42P01\)' \
  --sql 'insert into nosuch values ($1)'
worker_case "--sql \$1 used as the wrong type" 2 'rejected by the server: .*(operator|integer|jsonb)' \
  --sql 'insert into ledger values ($2, $1 + 1)'

# ---- --exec and --http checked at start-up -----------------------------------
printf '#!/bin/sh\nexit 0\n' >"$t/noexec.sh"
chmod 644 "$t/noexec.sh"
worker_case "--exec missing path" 2 '^onceq-worker: --exec /nonexistent/job: no such file' \
  --exec /nonexistent/job
worker_case "--exec not in PATH" 2 'onceq-no-such-command-xyz: command not found in PATH' \
  --exec onceq-no-such-command-xyz arg
worker_case "--exec a directory" 2 "--exec $t is a directory" --exec "$t"
if [ "$(id -u)" = 0 ] || [ ! -x "$t/noexec.sh" ]; then
  worker_case "--exec not executable" 2 'is not an executable file; make it one \(chmod \+x\)' \
    --exec "$t/noexec.sh"
fi
worker_case "--http port 99999" 2 '^onceq-worker: --http URL is not usable: .*[Pp]ort' \
  --http http://127.0.0.1:99999/hook
worker_case "--http port 0 with credentials" 2 'port 0' \
  --http "http://u:$SECRET@127.0.0.1:0/hook"
worker_case "--http no host" 2 '^onceq-worker: --http URL is not usable' --http 'http://'
worker_case "--http bad IPv6" 2 '^onceq-worker: --http URL is not usable' --http 'http://[::1/x'
worker_case "--http ftp URL" 2 'is not an http:// or https:// URL' --http 'ftp://example.com/'

# ---- more flags: empty --db, ranges, the coordinator's webhook URL ----------
worker_case "worker --db ''" 2 '^onceq-worker: --db is empty; give a database URL' \
  --db '' --exec /bin/true
cli_case "onceq --db= list" 2 '^onceq: --db is empty; give a database URL' --db= list
cli_case "push --priority 2147483648" 2 \
  '^onceq: push: --priority must be an integer from -2147483648 to 2147483647 \(got 2147483648\)' \
  push --priority 2147483648 '{}'
cli_case "push --queue of 9000 bytes (over NOTIFY's limit)" 2 \
  '^onceq: push: --queue is 9000 bytes long; a queue name is at most 1000 bytes' \
  push --queue "$(head -c 9000 /dev/zero | tr '\0' q)" '{}'
cli_case "push --unique-key of 9000 bytes (over the index limit)" 2 \
  '^onceq: push: --unique-key is 9000 bytes long; a key is at most 1000 bytes' \
  push --unique-key "$(head -c 9000 /dev/zero | tr '\0' k)" '{}'
cli_case "push --ordering-key ''" 2 \
  '^onceq: push: --ordering-key needs a key \(an empty key is not one\)' \
  push --ordering-key '' '{}'
cli_case "push --ordering-key of 9000 bytes (over the index limit)" 2 \
  '^onceq: push: --ordering-key is 9000 bytes long; a key is at most 1000 bytes' \
  push --ordering-key "$(head -c 9000 /dev/zero | tr '\0' k)" '{}'
cli_case "push --ordering-key-field with one PAYLOAD" 2 \
  '^onceq: push: --atomic, --unique-key-field, --ordering-key-field and --batch are for bulk pushes from stdin' \
  push --ordering-key-field k '{}'
cli_case "coordinator --notify-url port 99999 with credentials" 2 \
  '^onceq: coordinator: --notify-url URL is not usable: .*[Pp]ort' \
  coordinator --notify-url "http://u:$SECRET@127.0.0.1:99999/hook"
cli_case "coordinator --notify-url not http" 2 '^onceq: coordinator: .*notify-url' \
  coordinator --notify-url "ftp://u:$SECRET@example.com/"

# ---- a schema newer than the binary (every binary refuses it) -----------------
oq_q "INSERT INTO onceq_migrations (version, name) VALUES (999, 'from_the_future')"
before=$(oq_snapshot)
NEWER='is version 999, newer than this build of onceq knows'
cli_case "newer schema: onceq migrate" 2 "^onceq: migrate: .*$NEWER" migrate
cli_case "newer schema: onceq migrate --status" 2 "^onceq: migrate: .*$NEWER" migrate --status
cli_case "newer schema: onceq list" 2 "^onceq: list: .*$NEWER" list
cli_case "newer schema: onceq push" 2 "^onceq: push: .*$NEWER" push '{}'
cli_case "newer schema: onceq coordinator" 2 "$NEWER" coordinator --log-level error
worker_case "newer schema: onceq-worker" 2 "^onceq-worker: .*$NEWER" --drain --exec /bin/true
oq_q "DELETE FROM onceq_migrations WHERE version = 999"
before=$(oq_snapshot)

# ---- a running daemon's argv never shows a URL password (ps) -----------------
# cmdline_case NAME BIN ARGS...: start BIN in the background, wait for its
# session row, read /proc/PID/cmdline, stop it with SIGTERM.
cmdline_case() {
  local name=$1 bin=$2 pid n=0 cmdline
  shift 2
  NCASES=$((NCASES + 1))
  "$bin" "$@" >"$t/cmdline.log" 2>&1 </dev/null &
  pid=$!
  OQ_PIDS+=("$pid")
  while [ "$(oq_q "SELECT count(*) FROM onceq_sessions")" = 0 ] && [ $n -lt 100 ] &&
    kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    n=$((n + 1))
  done
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  oq_log "case $NCASES $name: cmdline: $cmdline"
  [ -n "$cmdline" ] || PROBLEMS+=("$name: the daemon was not running: $(head -c 300 "$t/cmdline.log")")
  case "$cmdline" in
  *"$SECRET"*) PROBLEMS+=("$name: the password shows in /proc/PID/cmdline: $cmdline") ;;
  esac
  if grep -q "$SECRET" "$t/cmdline.log"; then
    PROBLEMS+=("$name: the password shows in the log")
  fi
  oq_q "DELETE FROM onceq_sessions" >/dev/null
}
cmdline_case "worker --http URL with a password, in ps" "$ONCEQ_WORKER" \
  --queue cmdline --http "http://hook:$SECRET@127.0.0.1:9/hook"
cmdline_case "worker --http=URL with a password, in ps" "$ONCEQ_WORKER" \
  --queue cmdline "--http=http://hook:$SECRET@127.0.0.1:9/hook"
cmdline_case "coordinator --notify-url with a password, in ps" "$ONCEQ_CLI" \
  coordinator --notify-url "https://hook:$SECRET@127.0.0.1:9/dead"
# --db's password (the server trusts 127.0.0.1 here, so it is not checked)
cmdline_case "worker --db with password=, in ps" "$ONCEQ_WORKER" \
  --db "$OQ_DSN password=$SECRET" --queue cmdline --exec /bin/true
cmdline_case "coordinator --db=conninfo with password=, in ps" "$ONCEQ_CLI" \
  "--db=$OQ_DSN password=$SECRET" coordinator
# issue 20 (secrets 2): every credential, not only a key named "password":
# sslpassword (libpq accepts it without an SSL key), a web URL's query
# values and a Slack-style token path, in ps and in the daemon's log
cmdline_case "worker --db with sslpassword=, in ps and the start line" \
  "$ONCEQ_WORKER" --db "$OQ_DSN sslpassword=$SECRET" --queue cmdline \
  --exec /bin/true
cmdline_case "worker --http URL with ?token=, in ps" "$ONCEQ_WORKER" \
  --queue cmdline --http "http://127.0.0.1:9/x?token=$SECRET"
cmdline_case "worker --http Slack-style token path, in ps" "$ONCEQ_WORKER" \
  --queue cmdline --http "https://127.0.0.1:9/services/T000/B000/$SECRET"
cmdline_case "coordinator --notify-url with ?code=, in ps and logs" \
  "$ONCEQ_CLI" coordinator --notify-url "https://127.0.0.1:9/dead?code=$SECRET"
cmdline_case "coordinator --notify-url Slack-style token path, in ps and logs" \
  "$ONCEQ_CLI" coordinator \
  --notify-url "https://127.0.0.1:9/services/T000/B000/$SECRET"
before=$(oq_snapshot)

# ---- control characters in a queue name never reach the terminal raw ---------
NCASES=$((NCASES + 1))
evil=$'evil\033[2J\nFORGED'
id=$("$ONCEQ_CLI" push --queue "$evil" '{"k": "v\n"}')
"$ONCEQ_CLI" show "$id" >"$t/show.out" 2>&1 || PROBLEMS+=("evil queue: onceq show failed: $(head -c 300 "$t/show.out")")
"$ONCEQ_CLI" stats >"$t/stats.out" 2>&1 || PROBLEMS+=("evil queue: onceq stats failed: $(head -c 300 "$t/stats.out")")
for f in show stats; do
  if grep -q $'\033' "$t/$f.out"; then
    PROBLEMS+=("evil queue: an escape sequence reached the terminal in onceq $f")
  fi
  if grep -q '^FORGED' "$t/$f.out"; then
    PROBLEMS+=("evil queue: a newline in the queue name split a line of onceq $f")
  fi
done
grep -q 'queue: *evil\\x1B\[2J\\nFORGED' "$t/show.out" ||
  PROBLEMS+=("evil queue: onceq show does not name the queue escaped: $(grep queue: "$t/show.out")")
"$ONCEQ_CLI" cancel "$id" >/dev/null 2>&1 || PROBLEMS+=("evil queue: cancel failed")
oq_log "case $NCASES: control characters in a queue name: show and stats escape them"

# ---- a unique key with control characters, echoed in push's "exists" note ---
NCASES=$((NCASES + 1))
ekey=$'k\033[2J\nFORGED'
id=$("$ONCEQ_CLI" push --unique-key "$ekey" '{}')
"$ONCEQ_CLI" push --unique-key "$ekey" '{}' >/dev/null 2>"$t/exists.err" ||
  PROBLEMS+=("evil unique key: the second push failed: $(head -c 300 "$t/exists.err")")
[ "$(wc -l <"$t/exists.err")" = 1 ] ||
  PROBLEMS+=("evil unique key: the exists note is $(wc -l <"$t/exists.err") lines, want 1")
grep -q $'\033' "$t/exists.err" && PROBLEMS+=("evil unique key: an escape sequence reached the terminal")
grep -q 'unique key "k\\x1B\[2J\\nFORGED" is held by live item' "$t/exists.err" ||
  PROBLEMS+=("evil unique key: the note does not name the key escaped: $(cat "$t/exists.err")")
"$ONCEQ_CLI" cancel "$id" >/dev/null 2>&1 || PROBLEMS+=("evil unique key: cancel failed")
oq_log "case $NCASES: control characters in a unique key: $(cat "$t/exists.err")"

# ---- runtime: a failing --http keeps its URL's token out of last_error -------
# (issue 20, secrets 2): connection refused on 127.0.0.1:9; the dead row's
# error names the URL masked, and neither it nor the log shows the token.
NCASES=$((NCASES + 1))
id=$("$ONCEQ_CLI" push --queue httpsecret --max-attempts 1 '{}')
rc=0
timeout 30 "$ONCEQ_WORKER" --queue httpsecret --drain --retry-base 50ms \
  --http "http://127.0.0.1:9/x?token=$SECRET" >"$t/httpsecret.log" 2>&1 \
  </dev/null || rc=$?
err=$(oq_q "SELECT last_error FROM onceq_dead WHERE id = '$id'")
oq_log "case $NCASES: --http token, worker exit $rc, last_error: $err"
case "$err" in
*"$SECRET"*) PROBLEMS+=("--http token: last_error shows it: $err") ;;
*'POST http://127.0.0.1:9/x?token=***'*) ;;
*) PROBLEMS+=("--http token: last_error '$err' does not name the masked URL") ;;
esac
if grep -q "$SECRET" "$t/httpsecret.log"; then
  PROBLEMS+=("--http token: the worker's log shows it: $(grep "$SECRET" "$t/httpsecret.log" | head -2)")
fi
oq_q "DELETE FROM onceq_dead WHERE id = '$id'" >/dev/null
oq_q "DELETE FROM onceq_sessions" >/dev/null

# ---- runtime: an --exec handler's stderr is not UTF-8 (issue 14, bad 2) --------
# The failure is recorded with its real message (invalid bytes as '?'), the
# item is dead-lettered at once (--max-attempts 1), nothing stays claimed;
# a newline in stderr cannot forge a log line.
NCASES=$((NCASES + 1))
cat >"$t/latin1.sh" <<'SH'
#!/bin/sh
cat >/dev/null
printf 'Fehler: Datei M\374ller.txt fehlt\nFORGED 2026-01-01T00:00:00.000Z error \033[31mred\n' >&2
exit 3
SH
chmod 755 "$t/latin1.sh"
id=$("$ONCEQ_CLI" push --queue latin1 --max-attempts 1 '{"file": "x"}')
rc=0
timeout 30 "$ONCEQ_WORKER" --queue latin1 --drain --retry-base 50ms \
  --exec "$t/latin1.sh" >"$t/latin1.log" 2>&1 </dev/null || rc=$?
oq_log "latin1 worker exit $rc"
[ "$rc" != 124 ] || PROBLEMS+=("latin-1 stderr: the worker did not finish its drain within 30 s")
[ "$rc" = 1 ] || [ "$rc" = 124 ] ||
  PROBLEMS+=("latin-1 stderr: a --drain whose every attempt failed exited $rc, want 1")
err=$(oq_q "SELECT last_error FROM onceq_dead WHERE id = '$id'")
case "$err" in
*'exit status 3'*'Fehler: Datei M?ller.txt fehlt'*)
  oq_log "ok: dead row error: $(printf '%q' "$err")" ;;
*) PROBLEMS+=("latin-1 stderr: dead row's last_error is '$err', want the exit status and 'M?ller'") ;;
esac
left=$(oq_q "SELECT count(*) FROM onceq_items WHERE id = '$id'")
[ "$left" = 0 ] || PROBLEMS+=("latin-1 stderr: the item is still in onceq_items ($left)")
sessions=$(oq_q "SELECT count(*) FROM onceq_sessions")
[ "$sessions" = 0 ] || PROBLEMS+=("latin-1 stderr: $sessions session row(s) left")
if grep -q '^FORGED' "$t/latin1.log"; then
  PROBLEMS+=("latin-1 stderr: a newline in stderr forged a log line: $(grep '^FORGED' "$t/latin1.log")")
fi
if grep -q $'\033' "$t/latin1.log"; then
  PROBLEMS+=("latin-1 stderr: an escape sequence reached the text log")
fi
if ! LC_ALL=C.UTF-8 iconv -f UTF-8 -t UTF-8 "$t/latin1.log" >/dev/null 2>&1; then
  PROBLEMS+=("latin-1 stderr: the text log is not valid UTF-8")
fi

# ---- runtime: the schema goes away under a --drain worker ---------------------
# It says so once, naming `onceq migrate`, and exits 2 instead of warning
# every second forever.
NCASES=$((NCASES + 1))
id=$("$ONCEQ_CLI" push --queue gone '{"x": 1}')
rc=0
timeout 30 "$ONCEQ_WORKER" --queue gone --drain --concurrency 1 \
  --poll-interval 100ms --exec sh -c 'cat >/dev/null; sleep 1' \
  >"$t/gone.log" 2>&1 </dev/null &
gpid=$!
for _ in $(seq 1 100); do
  [ "$(oq_q "SELECT count(*) FROM onceq_items WHERE id = '$id' AND claim IS NOT NULL")" = 1 ] && break
  sleep 0.1
done
oq_q "ALTER TABLE onceq_items RENAME TO onceq_items_away" >/dev/null
wait "$gpid" || rc=$?
oq_q "ALTER TABLE onceq_items_away RENAME TO onceq_items" >/dev/null
[ "$rc" = 2 ] ||
  PROBLEMS+=("schema gone under --drain: exit $rc, want 2: $(tail -n 3 "$t/gone.log")")
grep -q 'onceq migrate' "$t/gone.log" ||
  PROBLEMS+=("schema gone under --drain: no line naming onceq migrate")
oq_log "case $NCASES: schema gone under --drain: exit $rc"
oq_q "DELETE FROM onceq_items WHERE queue = 'gone'" >/dev/null

# ---- an interrupted push says so: committed lines, where to resume ----------
before=$(oq_snapshot)
# push_interrupted NAME SIGNAL WANT_REGEX ARGS...: five lines go in (the
# idle flush commits them), then SIGNAL; exit 1, the line says what was
# committed and from which line the input was never read.
push_interrupted() {
  local name=$1 sig=$2 want=$3 pid rc=0 n=0
  shift 3
  NCASES=$((NCASES + 1))
  rm -f "$t/in.fifo"
  mkfifo "$t/in.fifo"
  "$ONCEQ_CLI" push --queue intr "$@" <"$t/in.fifo" >"$t/intr.out" 2>"$t/intr.err" &
  pid=$!
  OQ_PIDS+=("$pid")
  exec 7>"$t/in.fifo"
  printf '{"n": %d}\n' 1 2 3 4 5 >&7
  if [[ " $* " != *" --atomic "* ]]; then
    while [ "$(oq_q "SELECT count(*) FROM onceq_items WHERE queue = 'intr'")" != 5 ] &&
      [ $n -lt 100 ]; do
      sleep 0.1
      n=$((n + 1))
    done
  else
    sleep 1 # --atomic reads on until the end: give it the five lines
  fi
  kill -"$sig" "$pid"
  wait "$pid" || rc=$?
  exec 7>&-
  oq_log "case $NCASES $name: exit $rc: $(cat "$t/intr.err")"
  [ "$rc" = 1 ] || PROBLEMS+=("$name: exit code $rc, want 1")
  grep -Eq -- "$want" "$t/intr.err" ||
    PROBLEMS+=("$name: stderr '$(cat "$t/intr.err")' does not match /$want/")
  oq_q "DELETE FROM onceq_items WHERE queue = 'intr'" >/dev/null
}
push_interrupted "push interrupted by SIGINT" INT \
  '^onceq: push: interrupted by SIGINT: 5 lines committed \(5 new items\); input from line 6 on was never read; resume with `tail -n \+6`$'
push_interrupted "push interrupted by SIGTERM" TERM \
  '^onceq: push: interrupted by SIGTERM: 5 lines committed'
push_interrupted "push --atomic interrupted by SIGINT" INT \
  '^onceq: push: interrupted by SIGINT: nothing committed \(--atomic inserts all or nothing\); .*input from line 6 on was never read' \
  --atomic
[ "$(oq_snapshot)" = "$before" ] || PROBLEMS+=("interrupted pushes: the database is not as before")

# ---- a schedule that can never fire: the leader names it once ---------------
# Written past `onceq schedule add` (straight into the table, as an older
# onceq or a hand-made row would): one warning naming it, not one a pass.
NCASES=$((NCASES + 1))
oq_q "INSERT INTO onceq_schedules (name, cron, queue, next_run_at)
     VALUES ('feb30', '0 0 30 2 *', 'never', now() - interval '1 minute')" >/dev/null
timeout 30 "$ONCEQ_CLI" coordinator --interval 200ms >"$t/coord.log" 2>&1 </dev/null &
cpid=$!
OQ_PIDS+=("$cpid")
sleep 3 # 15 passes at 200 ms
kill -TERM "$cpid" 2>/dev/null || true
wait "$cpid" || true
nwarn=$(grep -c 'feb30' "$t/coord.log" || true)
oq_log "case $NCASES: never-firing schedule: $nwarn line(s) naming it: $(grep feb30 "$t/coord.log" | head -3 || true)"
[ "$nwarn" = 1 ] ||
  PROBLEMS+=("never-firing schedule: $nwarn log lines name feb30, want 1: $(grep -i 'schedule\|fire' "$t/coord.log" | head -3 || true)")
grep -q "schedule feb30: cron '0 0 30 2 \*' never fires" "$t/coord.log" ||
  PROBLEMS+=("never-firing schedule: no warning naming the schedule and its cron")
npass=$(grep -c 'leader' "$t/coord.log" || true)
oq_log "coordinator log lines with 'leader': $npass"
oq_q "DELETE FROM onceq_schedules" >/dev/null
oq_q "DELETE FROM onceq_sessions" >/dev/null

if [ ${#PROBLEMS[@]} -gt 0 ]; then
  oq_fail "$NCASES cases, ${#PROBLEMS[@]} problem(s):$(printf '\n  - %s' "${PROBLEMS[@]}")"
fi
oq_log "ok: all $NCASES bad-input cases"
oq_log "PASS"
