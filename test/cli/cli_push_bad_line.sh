#!/usr/bin/env bash
# cli_push_bad_line: a malformed line in a bulk push.
#  - default: its batch is rejected, the others go in, stderr names the bad
#    line and ends with the exact line ranges; exit 1. Fixing the line and
#    re-running with --unique-key-field inserts exactly the missing lines.
#  - --atomic: nothing is inserted; exit 2.
#  - a line our validator accepts but the server refuses (a number beyond
#    numeric's range) is found by bisection, with its line number.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cli_lib.sh
. "$here/cli_lib.sh"
cli_setup push_bad_line
t=$CLI_TMP

# gen PREFIX FILE: 5000 lines {"n": i, "key": "PREFIX-i"}.
gen() {
  awk -v p="$1" 'BEGIN { for (i = 1; i <= 5000; i++)
    printf "{\"n\": %d, \"key\": \"%s-%d\"}\n", i, p, i }' >"$2"
}
# strip the run time from the summary: "... (0.3s)"
summary() { tail -n 1 "$1" | sed 's/ ([0-9.]*s)$//'; }

gen k "$t/good.jsonl"
# line 1500 loses its closing brace
awk 'NR == 1500 { sub(/}$/, "") } { print }' "$t/good.jsonl" >"$t/bad.jsonl"
cli_check "the bad line" "$(sed -n 1500p "$t/bad.jsonl")" \
  '{"n": 1500, "key": "k-1500"'

# ---- default: the batch of lines 1001-2000 is rejected, the rest go in
run_onceq "$t/1.out" "$t/1.err" push --queue q --unique-key-field key \
  <"$t/bad.jsonl"
cli_check "default mode exit" "$RC" 1
cli_check "stderr lines" "$(wc -l <"$t/1.err")" 2
cli_check "the bad line is named" "$(head -n 1 "$t/1.err")" \
  "onceq: push: line 1500: invalid JSON: expected ',' or '}' at column 28"
cli_check "the summary" "$(summary "$t/1.err")" \
  "onceq: push: inserted lines 1-1000, 2001-5000; rejected lines 1001-2000 (line 1500: invalid JSON); 4000 new items, 0 existed already"
cli_check "ids printed" "$(wc -l <"$t/1.out")" 4000
cli_check "items in, none of 1001-2000" \
  "$(q "SELECT count(*), count(DISTINCT payload->>'n'),
            count(*) FILTER (WHERE (payload->>'n')::int BETWEEN 1001 AND 2000)
          FROM onceq_items")" "4000|4000|0"
cli_check "unique_key comes from the field" \
  "$(q "SELECT count(*) FROM onceq_items
          WHERE unique_key = 'k-' || (payload->>'n')")" 4000

# ---- re-run of the same bad file: nothing new, the same report
run_onceq "$t/2.out" "$t/2.err" push --queue q --unique-key-field key \
  <"$t/bad.jsonl"
cli_check "re-run exit" "$RC" 1
cli_check "re-run summary" "$(summary "$t/2.err")" \
  "onceq: push: inserted lines 1-1000, 2001-5000; rejected lines 1001-2000 (line 1500: invalid JSON); 0 new items, 4000 existed already"
cli_check "re-run printed no ids" "$(wc -l <"$t/2.out")" 0
cli_check "still 4000 items" "$(q 'SELECT count(*) FROM onceq_items')" 4000

# ---- the fixed file: exactly the 1000 missing lines go in
run_onceq "$t/3.out" "$t/3.err" push --queue q --unique-key-field key \
  <"$t/good.jsonl"
cli_check "fixed re-run exit" "$RC" 0
cli_check "fixed re-run summary" "$(summary "$t/3.err")" \
  "onceq: push: inserted lines 1-5000; 1000 new items, 4000 existed already"
cli_check "new ids printed" "$(wc -l <"$t/3.out")" 1000
cli_check "every line exactly once" \
  "$(q "SELECT count(*), count(DISTINCT payload->>'n'),
            min((payload->>'n')::int), max((payload->>'n')::int)
          FROM onceq_items")" "5000|5000|1|5000"
cli_check "the new ids are lines 1001-2000" \
  "$(q "SELECT count(*) FROM onceq_items WHERE id::text IN ($(
        sed "s/.*/'&'/" "$t/3.out" | paste -sd,))
          AND (payload->>'n')::int BETWEEN 1001 AND 2000")" 1000

# ---- two bad lines in one batch; a line without the key field
gen m "$t/two.jsonl"
awk 'NR == 3100 { print "{\"n\": 3100}"; next }
     NR == 3200 { print "{\"n\": 3200, \"key\": \"m-3200\",}"; next }
     { print }' "$t/two.jsonl" >"$t/two_bad.jsonl"
run_onceq "$t/4.out" "$t/4.err" push --queue m --unique-key-field key \
  <"$t/two_bad.jsonl"
cli_check "two bad lines exit" "$RC" 1
cli_check "first bad line" "$(sed -n 1p "$t/4.err")" \
  'onceq: push: line 3100: no field "key" (--unique-key-field needs it on every line)'
cli_check "second bad line" "$(sed -n 2p "$t/4.err")" \
  "onceq: push: line 3200: invalid JSON: expected a \"key\" at column 29"
cli_check "two-bad-lines summary" "$(summary "$t/4.err")" \
  "onceq: push: inserted lines 1-3000, 4001-5000; rejected lines 3001-4000 (line 3100: no usable unique key field, and 1 more bad line); 4000 new items, 0 existed already"
cli_check "queue m items" \
  "$(q "SELECT count(*) FROM onceq_items WHERE queue = 'm'
          AND (payload->>'n')::int NOT BETWEEN 3001 AND 4000")" 4000

# ---- --atomic: nothing inserted, exit 2
before=$(cli_snapshot)
gen a "$t/atomic.jsonl"
awk 'NR == 1500 { sub(/}$/, "") } { print }' "$t/atomic.jsonl" \
  >"$t/atomic_bad.jsonl"
run_onceq "$t/5.out" "$t/5.err" push --queue a --atomic \
  --unique-key-field key <"$t/atomic_bad.jsonl"
cli_check "--atomic exit" "$RC" 2
cli_check "--atomic bad line" "$(head -n 1 "$t/5.err")" \
  "onceq: push: line 1500: invalid JSON: expected ',' or '}' at column 28"
cli_check "--atomic summary" "$(summary "$t/5.err")" \
  "onceq: push: rejected lines 1-5000 (1 bad line, the first is line 1500; --atomic inserts nothing); 0 new items, 0 existed already"
cli_check "--atomic printed no ids" "$(wc -l <"$t/5.out")" 0
cli_check "--atomic changed nothing" "$(cli_snapshot)" "$before"
run_onceq "$t/6.out" "$t/6.err" push --queue a --atomic \
  --unique-key-field key <"$t/atomic.jsonl"
cli_check "--atomic good file exit" "$RC" 0
cli_check "--atomic good file summary" "$(summary "$t/6.err")" \
  "onceq: push: inserted lines 1-5000; 5000 new items, 0 existed already"
cli_check "queue a items" \
  "$(q "SELECT count(*), count(DISTINCT payload->>'n') FROM onceq_items
          WHERE queue = 'a'")" "5000|5000"

# ---- a line only the server refuses: found by bisection
awk 'BEGIN { for (i = 1; i <= 1000; i++)
  if (i == 777) print "{\"n\": 1e1000000}"; else printf "{\"n\": %d}\n", i }' \
  >"$t/srv.jsonl"
before=$(cli_snapshot)
run_onceq "$t/7.out" "$t/7.err" push --queue s --atomic <"$t/srv.jsonl"
cli_check "server-refused line, --atomic exit" "$RC" 2
cli_match "its line number" "$(head -n 1 "$t/7.err")" \
  '^onceq: push: line 777: rejected by the server: .*numeric'
cli_check "--atomic: nothing from that file" "$(cli_snapshot)" "$before"
run_onceq "$t/8.out" "$t/8.err" push --queue s --batch 250 <"$t/srv.jsonl"
cli_check "server-refused line, default exit" "$RC" 1
cli_check "summary" "$(summary "$t/8.err")" \
  "onceq: push: inserted lines 1-750; rejected lines 751-1000 (line 777: rejected by the server); 750 new items"
cli_check "queue s items" \
  "$(q "SELECT count(*), max((payload->>'n')::int) FROM onceq_items
          WHERE queue = 's'")" "750|750"
echo "PASS cli_push_bad_line"
