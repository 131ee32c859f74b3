#!/usr/bin/env bash
# run_examples.sh: run the examples and commands of the README and of the
# manual in docs/*.md, one ctest test per mode, so that every command in the
# documentation is run by a test.
#
# Usage: test/readme/run_examples.sh MODE
#   coverage  every fenced block in README.md and docs/*.md is marked
#             readme-test (and is run by a mode below) or readme-skip (with
#             the reason); every marked block extracts and its name is used
#             once across all the files; README.md has at most 250
#             lines; every relative link resolves (file and heading); the
#             error-code table (docs/c-api.md) matches err.h and err.c;
#             every public function has a "Blocks:" line
#   psql      the SQL examples through the README's psql command
#   python    the psycopg 3 example (ONCEQ_TEST_PYTHON or /usr/bin/python3)
#   node      the node-postgres example (npm ci into test/readme/node first)
#   c_api     the README's short C example and the complete one of
#             docs/c-api.md, built against the static library
#   worker    the onceq-worker command (ONCEQ_WORKER_BIN)
#   install   cmake --install into a staging dir, then the documented
#             pkg-config and compile commands against the installed files
#
# The examples are extracted from README.md and docs/*.md at test time
# (extract.sh; a block is found by its marker's unique name, whichever file
# it is in); this script holds no copy of them. Every database mode creates a fresh database
# on the harness server (ONCEQ_TEST_DSN, an admin key=value conninfo),
# migrates it with the README's `onceq migrate` commands, runs the example
# with DATABASE_URL pointing at it, and checks the database with psql.
#
# Set by test/readme/readme.cmake: ONCEQ_BIN (the onceq binary),
# ONCEQ_STATIC_LIB, ONCEQ_INCLUDE_DIR (+ ONCEQ_GEN_INCLUDE_DIR, the generated
# onceq/version.h), ONCEQ_CC, ONCEQ_SANITIZER,
# ONCEQ_BUILD_DIR, ONCEQ_CMAKE. Exit 0 passed, 1 failed, 77 skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# Every documentation file whose fenced blocks are marked and tested.
docs=("$root/README.md" "$root"/docs/*.md)
mode=${1:-}

fail() {
  echo "FAIL readme_$mode: $*" >&2
  exit 1
}
skip() {
  echo "SKIP readme_$mode: $*" >&2
  exit 77
}
note() { echo "--- $*"; }

# ---------------------------------------------------------------- helpers

# doc_of NAME: the one documentation file (README.md or docs/*.md) that
# holds the marker <!-- readme-test: NAME -->.
doc_of() {
  local f found=()
  for f in "${docs[@]}"; do
    grep -Eq "^[[:space:]]*<!-- readme-test: $1 -->[[:space:]]*\$" "$f" &&
      found+=("$f")
  done
  [ "${#found[@]}" -eq 1 ] || fail "readme-test block '$1' is in ${#found[@]} files" \
    "(${found[*]#"$root/"}); it must be in exactly one of README.md, docs/*.md"
  printf '%s\n' "${found[0]}"
}

# block NAME: extract the block after <!-- readme-test: NAME --> (in README.md
# or docs/*.md) into $work/NAME and print it, so a failing run shows exactly
# what it ran.
block() {
  local doc
  doc=$(doc_of "$1") || exit 1
  "$here/extract.sh" "$doc" "$1" "$work/$1" ||
    fail "cannot extract block '$1' of ${doc#"$root/"}"
  note "block $1 (${doc#"$root/"}):"
  sed 's/^/    | /' "$work/$1"
}

# Percent-encode one URL component.
urlencode() {
  local s=$1 out='' c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
    [A-Za-z0-9._~-]) out+=$c ;;
    *) out+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  printf '%s' "$out"
}

# dsn_to_url CONNINFO DBNAME: the postgresql:// URL of DBNAME on the server
# that the key=value CONNINFO names. A URL works for libpq, psycopg and
# node-postgres alike (node-postgres does not read key=value strings).
dsn_to_url() {
  local dsn=$1 db=$2 kv k v host='' port='' user='' password='' query=''
  case $dsn in
  *"'"* | *'"'*) fail "ONCEQ_TEST_DSN with quoted values is not supported" ;;
  esac
  for kv in $dsn; do
    k=${kv%%=*}
    v=${kv#*=}
    case $k in
    host | hostaddr) host=$v ;;
    port) port=$v ;;
    user) user=$v ;;
    password) password=$v ;;
    dbname) ;;
    *) query+="&$k=$(urlencode "$v")" ;;
    esac
  done
  local auth=''
  if [ -n "$user" ]; then
    auth=$(urlencode "$user")
    [ -z "$password" ] || auth+=":$(urlencode "$password")"
    auth+='@'
  fi
  local hostpart=$host
  if [ "${host#/}" != "$host" ]; then # a Unix socket directory
    query+="&host=$(urlencode "$host")"
    hostpart=''
  fi
  [ -z "$port" ] || hostpart+=":$port"
  query=${query#&}
  printf 'postgresql://%s%s/%s%s' "$auth" "$hostpart" "$(urlencode "$db")" \
    "${query:+?$query}"
}

# q SQL: run SQL on the test database and print the result, unaligned.
q() {
  psql "$DATABASE_URL" -X -A -t -q -v ON_ERROR_STOP=1 -c "$1"
}

# expect WHAT SQL WANT: the first value SQL returns must be WANT.
expect() {
  local got
  got=$(q "$2") || fail "$1: query failed: $2"
  if [ "$got" != "$3" ]; then
    fail "$1: got '$got', want '$3' (from: $2)"
  fi
  echo "ok: $1 ($got)"
}

# expect_line WHAT FILE REGEX: some line of FILE must match REGEX.
expect_line() {
  grep -Eq -- "$3" "$2" || {
    echo "--- $2:" >&2
    cat "$2" >&2
    fail "$1: no line matches /$3/"
  }
  echo "ok: $1"
}

# run_sql NAME: run a README SQL block the way the README's psql command
# does (psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f FILE).
run_sql() {
  (cd "$work" && psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f "$1") ||
    fail "README block $1 failed under psql"
}

# run_sh NAME: run a README shell block with bash -e in the work dir.
run_sh() {
  (cd "$work" && bash -euo pipefail "$1") ||
    fail "README block $1 exited non-zero"
}

# fresh_db: create this test's database, point DATABASE_URL at it, run the
# README's migrate commands with the onceq binary under test ($1, default
# ONCEQ_BIN), and create the README's example tables.
dbname=''
fresh_db() {
  local onceq=${1:-${ONCEQ_BIN:-}}
  [ -n "${ONCEQ_TEST_DSN:-}" ] ||
    skip "ONCEQ_TEST_DSN is not set; run ./test/run.sh --one ${ONCEQ_TEST_NAME:-NAME}"
  command -v psql >/dev/null || fail "psql is not installed"
  [ -x "${onceq:-/nonexistent}" ] ||
    fail "the onceq binary '$onceq' is missing (ONCEQ_BIN)"
  local iso=${ONCEQ_TEST_ISOLATION:-read committed}
  case $iso in
  'read committed' | 'repeatable read' | serializable) ;;
  *) fail "ONCEQ_TEST_ISOLATION='$iso' is not an isolation level" ;;
  esac

  local name="oqt_readme_${mode}_$$"
  psql "$ONCEQ_TEST_DSN" -X -q -v ON_ERROR_STOP=1 \
    -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $name" \
    -c "CREATE DATABASE $name" \
    -c "ALTER DATABASE $name SET default_transaction_isolation = '$iso'" ||
    fail "cannot create database $name on ONCEQ_TEST_DSN"
  dbname=$name
  unset ONCEQ_DATABASE_URL PGDATABASE PGSERVICE
  DATABASE_URL=$(dsn_to_url "$ONCEQ_TEST_DSN" "$dbname")
  export DATABASE_URL
  note "database $dbname ($iso)"

  block migrate.sh
  PATH="$(dirname "$onceq"):$PATH" run_sh migrate.sh
  expect "schema applied" "SELECT to_regclass('onceq_items') IS NOT NULL" t
  # Idempotent: a second run changes nothing and still exits 0.
  PATH="$(dirname "$onceq"):$PATH" run_sh migrate.sh

  block tables.sql
  run_sql tables.sql
}

# email_worker: an onceq-worker on the email queue, in the background, for
# the "wait for the result" steps (someone must acknowledge); stop_worker
# (or the exit trap) stops it. --sql-per-item: oq_ack, whose statement
# keeps the outcome row the README's state query reads.
wpid=''
email_worker() {
  [ -x "${ONCEQ_WORKER_BIN:-}" ] || fail "ONCEQ_WORKER_BIN is missing"
  "$ONCEQ_WORKER_BIN" --queue email --poll-interval 200ms --sql-per-item \
    --sql "INSERT INTO emails_sent (item_id, order_id) VALUES (\$2, (\$1->>'order')::bigint)" \
    >>"$work/worker.log" 2>&1 </dev/null &
  wpid=$!
}
stop_worker() {
  [ -n "$wpid" ] || return 0
  kill "$wpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
  wpid=''
}

cleanup() {
  local rc=$?
  stop_worker
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then
    if [ -n "$dbname" ]; then
      psql "$ONCEQ_TEST_DSN" -X -q \
        -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null 2>&1 ||
        true
    fi
    rm -rf "$work"
  else
    echo "kept for inspection: dir $work${dbname:+, database $dbname}" >&2
  fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/oq-readme-$mode.XXXXXX")
trap cleanup EXIT

# ------------------------------------------------------------------ modes

mode_coverage() {
  # 1. Every fenced block is marked. A fence opens a block when we are
  #    outside one; the nearest non-blank line above it must be a marker.
  local report doc
  for doc in "${docs[@]}"; do
    report=$(awk -v file="${doc#"$root/"}" '
      function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
      /^[ \t]*```/ {
        if (!inside) {
          inside = 1
          if (prev !~ /^<!-- readme-test: [A-Za-z0-9._-]+ -->$/ &&
              prev !~ /^<!-- readme-skip: [^ ].* -->$/)
            printf "%s:%d: fenced block without a readme-test or readme-skip marker\n", file, NR
        } else {
          inside = 0
        }
        prev = trim($0); next
      }
      trim($0) != "" { prev = trim($0) }
      END { if (inside) printf "%s: a fenced block is not closed\n", file }
    ' "$doc")
    [ -z "$report" ] || fail "$report"
  done
  echo "ok: every fenced block of README.md and docs/*.md is marked (${#docs[@]} files)"

  # 2. Every readme-test block extracts, its name is used once across all
  #    the files, and some mode of this script runs it.
  local names name n=0
  names=$(sed -n 's/^[ \t]*<!-- readme-test: \([A-Za-z0-9._-]*\) -->[ \t]*$/\1/p' \
    "${docs[@]}")
  [ -n "$names" ] || fail "no readme-test markers in README.md or docs/*.md"
  name=$(sort <<<"$names" | uniq -d | head -n1)
  [ -z "$name" ] || fail "readme-test name '$name' is used more than once"
  for name in $names; do
    doc=$(doc_of "$name") || exit 1
    "$here/extract.sh" "$doc" "$name" "$work/$name" ||
      fail "block $name of ${doc#"$root/"} does not extract"
    grep -Eq "^[[:space:]]*block $name([[:space:]]|\$)" "${BASH_SOURCE[0]}" ||
      fail "block $name (${doc#"$root/"}) is marked readme-test but no test runs it"
    n=$((n + 1))
  done
  echo "ok: $n readme-test blocks extract and are run"

  # 2b. README.md is the front door: at most 250 lines (the manual is docs/).
  local lines
  lines=$(wc -l <"$root/README.md")
  [ "$lines" -le 250 ] ||
    fail "README.md has $lines lines; keep it <= 250 and move detail to docs/"
  echo "ok: README.md has $lines lines (<= 250)"

  # 2c. Every relative link of README.md and docs/*.md leads somewhere: the
  #     file exists and, with a #fragment, a heading of that file has that
  #     anchor (GitHub's rule: lower case, punctuation dropped, spaces to -).
  local broken
  broken=$(python3 - "$root" "${docs[@]}" <<'PY'
import os, re, sys
root, files = sys.argv[1], sys.argv[2:]
def anchors(path):
    out, inside = set(), False
    for line in open(path, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            inside = not inside
        m = None if inside else re.match(r'#{1,6} (.*)', line)
        if m:
            t = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower())
            out.add(t.replace(' ', '-'))
    return out
for f in files:
    text, inside = [], False
    for line in open(f, encoding='utf-8'):
        if line.lstrip().startswith('```'):
            inside = not inside
        elif not inside:
            text.append(line)
    for target in re.findall(r'\]\(([^)\s]+)\)', ''.join(text)):
        if re.match(r'[a-z]+:', target):
            continue  # http:, https:, mailto:
        path, _, frag = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        name = os.path.relpath(f, root)
        if not os.path.exists(dest):
            print('%s: link %s: no such file' % (name, target))
        elif frag and dest.endswith('.md') and frag not in anchors(dest):
            print('%s: link %s: no such heading' % (name, target))
PY
  ) || fail "the link check could not run (python3)"
  [ -z "$broken" ] || fail "broken links: $broken"
  echo "ok: every relative link of README.md and docs/*.md resolves"

  # 3. The error-code table of docs/c-api.md lists exactly the codes of
  #    err.h, each with the meaning and the "what to do" that err.h's table
  #    gives it (err.h is the source; the docs repeat it).
  local err_h=$root/lib/include/onceq/err.h code
  local table=$root/docs/c-api.md
  local codes
  codes=$(sed -n 's/^[ \t]*\(OQ_[A-Z_]*\)[ \t]*[=,].*/\1/p' "$err_h" |
    grep -v '^OQ_ERR__COUNT$')
  [ -n "$codes" ] || fail "no codes found in $err_h"
  for code in $codes; do
    grep -q "^| \`$code\` |" "$table" ||
      fail "error code $code (err.h) is missing from the table in docs/c-api.md"
  done
  # shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
  while read -r code; do
    grep -qx "$code" <<<"$codes" ||
      fail "the table in docs/c-api.md lists $code, which err.h does not define"
  done < <(sed -n 's/^| `\(OQ_[A-Z_]*\)` |.*/\1/p' "$table")
  # err.h's rows: the comment above each code gives its oq_strerror text,
  # "means:" and "do:" (wrapped lines joined); rebuilt as Markdown rows,
  # they must be the docs' rows word for word.
  local hrows drows
  # shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
  hrows=$(awk '
    function add(t) {
      if (field == "means") means = means (means == "" ? "" : " ") t
      else if (field == "do") todo = todo (todo == "" ? "" : " ") t
    }
    /^[ \t]*\/\* oq_strerror: "/ {
      st = $0; sub(/^[^"]*"/, "", st); sub(/".*$/, "", st)
      means = ""; todo = ""; field = ""; inc = 1; next
    }
    inc && /^[ \t]*\*/ {
      line = $0; sub(/[ \t]*\*\/[ \t]*$/, "", line); sub(/^[ \t]*\*[ \t]?/, "", line)
      if (line ~ /^means: /) { field = "means"; sub(/^means: /, "", line) }
      else if (line ~ /^do: /) { field = "do"; sub(/^do: /, "", line) }
      sub(/^[ \t]+/, "", line)
      if (line != "") add(line)
      next
    }
    inc && /^[ \t]*OQ_[A-Z_]+( = [0-9]+)?,/ {
      code = $1; sub(/,$/, "", code)
      printf "| `%s` | %s | %s | %s|\n", code, st, means, (todo == "" ? "" : todo " ")
      inc = 0
    }
  ' "$err_h")
  drows=$(grep '^| `OQ_' "$table")
  [ "$(wc -l <<<"$hrows")" -eq "$(wc -w <<<"$codes")" ] ||
    fail "err.h documents $(wc -l <<<"$hrows") codes (oq_strerror/means/do) of $(wc -w <<<"$codes")"
  if [ "$hrows" != "$drows" ]; then
    diff <(echo "$hrows") <(echo "$drows") >&2 || true
    fail "the error table of docs/c-api.md differs from err.h's comments (< err.h, > docs)"
  fi
  # oq_strerror returns the text err.h gives (lib/src/err.c's table).
  local htexts ctexts
  # shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
  htexts=$(sed -n 's/^| `\(OQ_[A-Z_]*\)` | \([^|]*\) |.*/\1 \2/p' <<<"$hrows")
  ctexts=$(sed -n 's/^[ \t]*\[\(OQ_[A-Z_]*\)\] = "\(.*\)",$/\1 \2/p' \
    "$root/lib/src/err.c")
  if [ "$htexts" != "$ctexts" ]; then
    diff <(echo "$htexts") <(echo "$ctexts") >&2 || true
    fail "oq_strerror's texts (lib/src/err.c) differ from err.h's (< err.h, > err.c)"
  fi
  echo "ok: the error table matches err.h ($(wc -w <<<"$codes") codes, meaning and what to do)"

  # 4. The documented default attempt count is the library's and schema's.
  local max
  max=$(sed -n 's/^#define OQ_DEFAULT_MAX_ATTEMPTS \([0-9]*\).*/\1/p' \
    "$root/lib/include/onceq/enqueue.h")
  grep -q "max_attempts INT NOT NULL DEFAULT $max " \
    "$root/schema/0001_init.pg.sql" ||
    fail "schema default max_attempts differs from OQ_DEFAULT_MAX_ATTEMPTS=$max"
  grep -q "(default $max)" "${docs[@]}" ||
    fail "no documentation file states the default max_attempts ($max)"
  echo "ok: default max_attempts is $max everywhere"

  # 5. Every function a public header declares says how long it may block:
  #    a "Blocks:" line in the comment right above it (or above the run of
  #    declarations it heads), or in one that covers the functions "below"
  #    (the terms are defined in onceq.h; docs/c-api.md explains them).
  local unblocked
  unblocked=$(awk '
    FNR == 1 { covered = 0; all = 0 }
    /^[ \t]*\/\*/ { incomment = 1; cur = 0 }
    incomment && /Blocks:/ { cur = 1; if ($0 ~ /below/) all = 1 }
    incomment && /\*\// { incomment = 0; covered = cur; next }
    incomment { next }
    /^[ \t]*$/ { covered = 0; next }
    /^(OQ_MUST_CHECK )?[a-z_].*[ *]oq_[a-z0-9_]+\(/ && !/^typedef/ {
      if (!covered && !all) {
        name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
        printf "%s:%d: %s has no Blocks: line\n", FILENAME, FNR, name
      }
    }
  ' "$root"/lib/include/onceq/*.h)
  [ -z "$unblocked" ] || fail "undocumented blocking: ${unblocked//$root\//}"
  echo "ok: every public function documents its blocking"
}

mode_psql() {
  fresh_db
  block enqueue.sql
  block psql.sh
  run_sh psql.sh
  expect "order 42 committed" "SELECT count(*) FROM orders WHERE id = 42" 1
  expect "its item committed, ready, with the defaults" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'email'
       AND payload = '{\"order\": 42}' AND priority = 0 AND attempts = 0
       AND max_attempts = 25 AND claim IS NULL AND run_at <= now()" 1

  block rollback.sql
  run_sql rollback.sql
  expect "rolled-back order 43 absent" \
    "SELECT count(*) FROM orders WHERE id = 43" 0
  expect "rolled-back item absent" \
    "SELECT count(*) FROM onceq_items WHERE payload ->> 'order' = '43'" 0

  block unique.sql
  run_sql unique.sql
  run_sql unique.sql
  expect "unique_key: two runs, one item" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'invoice'
       AND unique_key = 'invoice-42'" 1

  block delayed.sql
  run_sql delayed.sql
  expect "delayed item due in about 5 minutes" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'reminder'
       AND run_at > now() + interval '4 minutes'
       AND run_at <= now() + interval '5 minutes'
       AND priority = 10 AND max_attempts = 5" 1
  expect "exactly the committed items" "SELECT count(*) FROM onceq_items" 3

  # ordering keys: enqueue_seq gives the order within the key
  block ordering.sql
  run_sql ordering.sql
  expect "ordering_key: invoice 1 is ahead of invoice 2" \
    "SELECT string_agg(payload ->> 'invoice', ',' ORDER BY enqueue_seq)
       FROM onceq_items WHERE queue = 'billing'
       AND ordering_key = 'customer-42'" 1,2
  psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 \
    -c "DELETE FROM onceq_items WHERE queue = 'billing'" ||
    fail "cannot remove the ordering example's items"

  # wait for the result: a worker acknowledges while the README waits
  block wait.sh
  block wait_state.sql
  email_worker
  PATH="$(dirname "$ONCEQ_BIN"):$PATH" run_sh wait.sh >"$work/wait.out"
  stop_worker
  cat "$work/wait.out"
  expect_line "onceq wait: acknowledged" "$work/wait.out" '^order 42: done$'
  expect_line "the state query says done" "$work/wait.out" '^done\|'
  expect "its outcome was kept by the ack" \
    "SELECT count(*) FROM onceq_results WHERE outcome = 'done'" 1
}

mode_python() {
  # test/run.sh exports ONCEQ_TEST_PYTHON, a python3 that has psycopg.
  local py=${ONCEQ_TEST_PYTHON:-/usr/bin/python3}
  [ -x "$py" ] || skip "$py is missing (apt-get install python3)"
  "$py" -c 'import psycopg' 2>/dev/null ||
    skip "psycopg 3 is missing for $py (apt-get install python3-psycopg)"
  fresh_db
  block enqueue.py
  (cd "$work" && "$py" enqueue.py) >"$work/out.txt" ||
    fail "the Python example exited non-zero"
  cat "$work/out.txt"
  expect_line "the declined order says it rolled back" "$work/out.txt" \
    '^rolled back: card declined for order 101$'
  expect "order 100 committed" "SELECT count(*) FROM orders WHERE id = 100" 1
  expect "its item committed" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'email'
       AND payload = '{\"order\": 100}' AND claim IS NULL" 1
  expect "order 101 rolled back" \
    "SELECT count(*) FROM orders WHERE id = 101" 0
  expect "its item rolled back" \
    "SELECT count(*) FROM onceq_items WHERE payload ->> 'order' = '101'" 0
  expect "exactly the committed items" "SELECT count(*) FROM onceq_items" 1

  block wait.py
  email_worker
  (cd "$work" && timeout 60 "$py" wait.py) >"$work/wait.txt" ||
    fail "the Python wait example exited non-zero"
  stop_worker
  cat "$work/wait.txt"
  expect_line "it waited until the item was acknowledged" "$work/wait.txt" \
    '^order 300: done$'
  expect "the worker's effect committed" \
    "SELECT count(*) FROM emails_sent WHERE order_id = 300" 1
}

# npm ci into test/readme/node when node_modules is missing: from the
# committed package-lock.json, which npm ci never rewrites. A lock keeps
# parallel test runs (several build trees) from installing at once.
node_deps() {
  local dir=$here/node lock
  [ -f "$dir/node_modules/pg/package.json" ] && return 0
  command -v npm >/dev/null ||
    fail "npm is missing (apt-get install npm); test/run.sh installs it"
  lock="${TMPDIR:-/tmp}/onceq-readme-npm-$(id -u).lock"
  note "npm ci in $dir"
  (
    flock -w 240 9 || fail "timed out waiting for $lock"
    [ -f "$dir/node_modules/pg/package.json" ] ||
      (cd "$dir" && npm ci --no-audit --no-fund) ||
      fail "npm ci failed in $dir"
  ) 9>"$lock"
}

mode_node() {
  command -v node >/dev/null ||
    skip "node is missing (apt-get install nodejs npm)"
  node_deps
  fresh_db
  block enqueue.js
  (cd "$work" && NODE_PATH="$here/node/node_modules" node enqueue.js) \
    >"$work/out.txt" || fail "the Node example exited non-zero"
  cat "$work/out.txt"
  expect_line "the failed order says it rolled back" "$work/out.txt" \
    '^rolled back: .*null value in column "customer"'
  expect "order 200 committed once" \
    "SELECT count(*) FROM orders WHERE id = 200" 1
  expect "a retried request enqueued one item" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'email'
       AND unique_key = 'order-email-200'
       AND payload = '{\"order\": 200}'" 1
  expect "order 201 rolled back" \
    "SELECT count(*) FROM orders WHERE id = 201" 0
  expect "its item rolled back" \
    "SELECT count(*) FROM onceq_items WHERE payload ->> 'order' = '201'" 0
  expect "exactly the committed items" "SELECT count(*) FROM onceq_items" 1

  block wait.js
  email_worker
  (cd "$work" && NODE_PATH="$here/node/node_modules" timeout 60 node wait.js) \
    >"$work/wait.txt" || fail "the Node wait example exited non-zero"
  stop_worker
  cat "$work/wait.txt"
  expect_line "it waited until the item was acknowledged" "$work/wait.txt" \
    '^order 400: done$'
  expect "the worker's effect committed" \
    "SELECT count(*) FROM emails_sent WHERE order_id = 400" 1
}

# check_worker OUTFILE: the C example's output and the database after it ran
# with one extra item for an order that does not exist ($poison).
check_worker() {
  local out=$1 uuid='[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
  cat "$out"
  expect_line "it printed the enqueued id" "$out" "^enqueued $uuid\$"
  local id
  id=$(sed -n 's/^enqueued \([0-9a-f-]*\)$/\1/p' "$out")
  expect_line "it acknowledged that item on attempt 1" "$out" \
    "^acked $id \\(attempt 1\\)\$"
  expect_line "it failed the item of the unknown order" "$out" \
    "^failed $poison: no such order \\(will retry\\)\$"
  expect "order 7 committed with its item" \
    "SELECT count(*) FROM orders WHERE id = 7" 1
  expect "the effect row was written once, in the ack" \
    "SELECT count(*) FROM emails_sent WHERE item_id = '$id' AND order_id = 7" 1
  expect "no other effect rows" "SELECT count(*) FROM emails_sent" 1
  expect "the acknowledged item is gone" \
    "SELECT count(*) FROM onceq_items WHERE id = '$id'" 0
  expect "the failed item was released for a retry, with its error" \
    "SELECT count(*) FROM onceq_items WHERE id = '$poison' AND claim IS NULL
       AND attempts = 1 AND last_error = 'no such order'" 1
  expect "nothing dead-lettered" "SELECT count(*) FROM onceq_dead" 0
  expect "oq_session_end deleted the session" \
    "SELECT count(*) FROM onceq_sessions" 0
}

# add_poison: an e-mail item for an order that does not exist, so the
# example's handler fails it (test data, not an example).
poison=''
add_poison() {
  poison=$(q "INSERT INTO onceq_items (queue, payload)
              VALUES ('email', '{\"order\": 999}') RETURNING id" | head -n1)
  [ -n "$poison" ] || fail "could not insert the unknown-order item"
}

# compile_c NAME.c: build a C example against the static library, with
# every warning an error.
compile_c() {
  local cc=${ONCEQ_CC:-cc} lib=${ONCEQ_STATIC_LIB:-}
  local inc=${ONCEQ_INCLUDE_DIR:-$root/lib/include}
  # onceq/version.h is generated into the build tree
  local gen=${ONCEQ_GEN_INCLUDE_DIR:-$root/build/default/lib/include}
  local san=()
  if [ -n "${ONCEQ_SANITIZER:-}" ]; then
    san=(-g -fno-omit-frame-pointer "-fsanitize=$ONCEQ_SANITIZER")
  fi
  # shellcheck disable=SC2046 # pkg-config prints several words
  (cd "$work" && "$cc" -std=c11 -Wall -Wextra -Werror "${san[@]}" \
    -I"$inc" -I"$gen" -o "${1%.c}" "$1" "$lib" $(pkg-config --libs libpq) \
    -lpthread) || fail "the C example $1 does not compile cleanly"
}

# drop_db: drop this test's database (for a mode that uses two).
drop_db() {
  psql "$ONCEQ_TEST_DSN" -X -q -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" ||
    fail "cannot drop database $dbname"
  dbname=''
}

mode_c_api() {
  local lib=${ONCEQ_STATIC_LIB:-}
  [ -f "${lib:-/nonexistent}" ] ||
    fail "the static library '$lib' is missing (ONCEQ_STATIC_LIB)"
  # The README's short example acknowledges the README's order 42 e-mail.
  fresh_db
  block enqueue.sql
  run_sql enqueue.sql
  block ack.c
  compile_c ack.c
  (cd "$work" && timeout 60 ./ack) >"$work/ack.txt" ||
    fail "the README's C example exited non-zero"
  cat "$work/ack.txt"
  local uuid='[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
  expect_line "it acknowledged the e-mail item" "$work/ack.txt" "^acked $uuid\$"
  expect "the e-mail row of order 42 written once, in the ack" \
    "SELECT count(*) FROM emails_sent WHERE order_id = 42" 1
  expect "its item is gone" "SELECT count(*) FROM onceq_items" 0
  expect "oq_session_end deleted the session" \
    "SELECT count(*) FROM onceq_sessions" 0
  drop_db

  # The complete worker of docs/c-api.md.
  fresh_db
  block worker.c
  compile_c worker.c
  add_poison
  (cd "$work" && timeout 60 ./worker) >"$work/out.txt" ||
    fail "the C example exited non-zero"
  check_worker "$work/out.txt"
}

mode_worker() {
  local wbin=${ONCEQ_WORKER_BIN:-}
  [ -x "${wbin:-/nonexistent}" ] ||
    fail "the onceq-worker binary '$wbin' is missing (ONCEQ_WORKER_BIN)"
  fresh_db
  block enqueue.sql
  run_sql enqueue.sql
  block worker.sh
  PATH="$(dirname "$wbin"):$PATH" timeout 120 bash -e "$work/worker.sh" \
    2>"$work/worker.log" || {
    cat "$work/worker.log" >&2
    fail "the README's onceq-worker command exited non-zero"
  }
  expect "the e-mail of order 42 written exactly once" \
    "SELECT count(*) FROM emails_sent WHERE order_id = 42" 1
  expect "its item acknowledged" \
    "SELECT count(*) FROM onceq_items WHERE queue = 'email'" 0
  expect "the worker deleted its session on exit" \
    "SELECT count(*) FROM onceq_sessions" 0
}

mode_install() {
  if [ -n "${ONCEQ_SANITIZER:-}" ]; then
    skip "sanitizer build: the install test runs in the plain build"
  fi
  local build=${ONCEQ_BUILD_DIR:-} cmake=${ONCEQ_CMAKE:-cmake}
  [ -d "${build:-/nonexistent}" ] ||
    fail "the build dir '$build' is missing (ONCEQ_BUILD_DIR)"
  # cmake --install into a staging dir (DESTDIR) rather than /usr/local;
  # PKG_CONFIG_SYSROOT_DIR makes pkg-config point into the staging dir.
  local stage=$work/stage
  DESTDIR=$stage "$cmake" --install "$build" >"$work/install.log" ||
    { cat "$work/install.log" >&2; fail "cmake --install failed"; }
  local pc bin so
  pc=$(find "$stage" -name onceq.pc -path '*/pkgconfig/*' | head -n1)
  [ -n "$pc" ] || fail "cmake --install installed no onceq.pc"
  so=$(find "$stage" -name 'libonceq.so' | head -n1)
  [ -n "$so" ] || fail "cmake --install installed no libonceq.so"
  bin=$(find "$stage" -path '*/bin/onceq' -type f | head -n1)
  [ -n "$bin" ] || fail "cmake --install installed no bin/onceq"
  PKG_CONFIG_PATH=$(dirname "$pc")
  LD_LIBRARY_PATH=$(dirname "$so")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH LD_LIBRARY_PATH PKG_CONFIG_SYSROOT_DIR=$stage

  block pkg-config.sh
  (cd "$work" && bash -euo pipefail pkg-config.sh) >"$work/flags.txt" ||
    fail "the README's pkg-config command failed"
  cat "$work/flags.txt"
  expect_line "pkg-config gives the installed include dir" "$work/flags.txt" \
    "(^| )-I$stage/"
  expect_line "pkg-config links -lonceq" "$work/flags.txt" '(^| )-lonceq( |$)'

  # The installed onceq migrates, and the README's compile command builds
  # the C example against the installed library.
  fresh_db "$bin"
  block worker.c
  block compile.sh
  add_poison
  (cd "$work" && timeout 60 bash -euo pipefail compile.sh) >"$work/out.txt" ||
    fail "the README's compile-and-run commands failed"
  check_worker "$work/out.txt"

  # The README's short example builds with its pkg-config command against
  # the installed tree (it_readme_c_api runs it).
  block ack.c
  block build-ack.sh
  (cd "$work" && bash -euo pipefail build-ack.sh) ||
    fail "the README's build command for ack.c failed"
  [ -x "$work/ack" ] || fail "build-ack.sh made no ./ack"
  echo "ok: ack.c builds against the installed library"
}

case $mode in
coverage | psql | python | node | c_api | worker | install) "mode_$mode" ;;
*)
  echo "usage: $0 coverage|psql|python|node|c_api|worker|install" >&2
  exit 2
  ;;
esac
echo "PASS readme_$mode"
