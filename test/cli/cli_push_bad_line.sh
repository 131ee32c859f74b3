#!/usr/bin/env bash
# cli_push_bad_line: a malformed line in a bulk push.
#  - default: its batch is rejected, the others go in, stderr names the bad
#    line and ends with the exact line ranges; exit 1. Fixing the line and
#    re-running with --unique-key-field inserts exactly the missing lines.
#  - --atomic: nothing is inserted; exit 2.
#  - a line our validator accepts but the server refuses (a number beyond
#    numeric's range) is found by bisection, with its line number.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup push_bad_line --url
t=$OQ_TMP

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
oq_check "the bad line" "$(sed -n 1500p "$t/bad.jsonl")" \
  '{"n": 1500, "key": "k-1500"'

# ---- default: the batch of lines 1001-2000 is rejected, the rest go in
oq_run_cli "$t/1.out" "$t/1.err" push --queue q --unique-key-field key \
  <"$t/bad.jsonl"
oq_check "default mode exit" "$OQ_RC" 1
oq_check "stderr lines" "$(wc -l <"$t/1.err")" 2
oq_check "the bad line is named" "$(head -n 1 "$t/1.err")" \
  "onceq: push: line 1500: invalid JSON: expected ',' or '}' at column 28"
oq_check "the summary" "$(summary "$t/1.err")" \
  "onceq: push: inserted lines 1-1000, 2001-5000; rejected lines 1001-2000 (line 1500: invalid JSON); 4000 new items, 0 existed already"
oq_check "ids printed" "$(wc -l <"$t/1.out")" 4000
oq_check "items in, none of 1001-2000" \
  "$(oq_q "SELECT count(*), count(DISTINCT payload->>'n'),
            count(*) FILTER (WHERE (payload->>'n')::int BETWEEN 1001 AND 2000)
          FROM onceq_items")" "4000|4000|0"
oq_check "unique_key comes from the field" \
  "$(oq_q "SELECT count(*) FROM onceq_items
          WHERE unique_key = 'k-' || (payload->>'n')")" 4000

# ---- re-run of the same bad file: nothing new, the same report
oq_run_cli "$t/2.out" "$t/2.err" push --queue q --unique-key-field key \
  <"$t/bad.jsonl"
oq_check "re-run exit" "$OQ_RC" 1
oq_check "re-run summary" "$(summary "$t/2.err")" \
  "onceq: push: inserted lines 1-1000, 2001-5000; rejected lines 1001-2000 (line 1500: invalid JSON); 0 new items, 4000 existed already"
oq_check "re-run printed no ids" "$(wc -l <"$t/2.out")" 0
oq_check "still 4000 items" "$(oq_q 'SELECT count(*) FROM onceq_items')" 4000

# ---- the fixed file: exactly the 1000 missing lines go in
oq_run_cli "$t/3.out" "$t/3.err" push --queue q --unique-key-field key \
  <"$t/good.jsonl"
oq_check "fixed re-run exit" "$OQ_RC" 0
oq_check "fixed re-run summary" "$(summary "$t/3.err")" \
  "onceq: push: inserted lines 1-5000; 1000 new items, 4000 existed already"
oq_check "new ids printed" "$(wc -l <"$t/3.out")" 1000
oq_check "every line exactly once" \
  "$(oq_q "SELECT count(*), count(DISTINCT payload->>'n'),
            min((payload->>'n')::int), max((payload->>'n')::int)
          FROM onceq_items")" "5000|5000|1|5000"
oq_check "the new ids are lines 1001-2000" \
  "$(oq_q "SELECT count(*) FROM onceq_items WHERE id::text IN ($(
        sed "s/.*/'&'/" "$t/3.out" | paste -sd,))
          AND (payload->>'n')::int BETWEEN 1001 AND 2000")" 1000

# ---- two bad lines in one batch; a line without the key field
gen m "$t/two.jsonl"
awk 'NR == 3100 { print "{\"n\": 3100}"; next }
     NR == 3200 { print "{\"n\": 3200, \"key\": \"m-3200\",}"; next }
     { print }' "$t/two.jsonl" >"$t/two_bad.jsonl"
oq_run_cli "$t/4.out" "$t/4.err" push --queue m --unique-key-field key \
  <"$t/two_bad.jsonl"
oq_check "two bad lines exit" "$OQ_RC" 1
oq_check "first bad line" "$(sed -n 1p "$t/4.err")" \
  'onceq: push: line 3100: no field "key" (--unique-key-field needs it on every line)'
oq_check "second bad line" "$(sed -n 2p "$t/4.err")" \
  "onceq: push: line 3200: invalid JSON: expected a \"key\" at column 29"
oq_check "two-bad-lines summary" "$(summary "$t/4.err")" \
  "onceq: push: inserted lines 1-3000, 4001-5000; rejected lines 3001-4000 (line 3100: no usable unique key field, and 1 more bad line); 4000 new items, 0 existed already"
oq_check "queue m items" \
  "$(oq_q "SELECT count(*) FROM onceq_items WHERE queue = 'm'
          AND (payload->>'n')::int NOT BETWEEN 3001 AND 4000")" 4000

# ---- --atomic: nothing inserted, exit 2
before=$(oq_snapshot)
gen a "$t/atomic.jsonl"
awk 'NR == 1500 { sub(/}$/, "") } { print }' "$t/atomic.jsonl" \
  >"$t/atomic_bad.jsonl"
oq_run_cli "$t/5.out" "$t/5.err" push --queue a --atomic \
  --unique-key-field key <"$t/atomic_bad.jsonl"
oq_check "--atomic exit" "$OQ_RC" 2
oq_check "--atomic bad line" "$(head -n 1 "$t/5.err")" \
  "onceq: push: line 1500: invalid JSON: expected ',' or '}' at column 28"
oq_check "--atomic summary" "$(summary "$t/5.err")" \
  "onceq: push: rejected lines 1-5000 (1 bad line, the first is line 1500; --atomic inserts nothing); 0 new items, 0 existed already"
oq_check "--atomic printed no ids" "$(wc -l <"$t/5.out")" 0
oq_check "--atomic changed nothing" "$(oq_snapshot)" "$before"
oq_run_cli "$t/6.out" "$t/6.err" push --queue a --atomic \
  --unique-key-field key <"$t/atomic.jsonl"
oq_check "--atomic good file exit" "$OQ_RC" 0
oq_check "--atomic good file summary" "$(summary "$t/6.err")" \
  "onceq: push: inserted lines 1-5000; 5000 new items, 0 existed already"
oq_check "queue a items" \
  "$(oq_q "SELECT count(*), count(DISTINCT payload->>'n') FROM onceq_items
          WHERE queue = 'a'")" "5000|5000"

# ---- a line only the server refuses: found by bisection
awk 'BEGIN { for (i = 1; i <= 1000; i++)
  if (i == 777) print "{\"n\": 1e1000000}"; else printf "{\"n\": %d}\n", i }' \
  >"$t/srv.jsonl"
before=$(oq_snapshot)
oq_run_cli "$t/7.out" "$t/7.err" push --queue s --atomic <"$t/srv.jsonl"
oq_check "server-refused line, --atomic exit" "$OQ_RC" 2
oq_match "its line number" "$(head -n 1 "$t/7.err")" \
  '^onceq: push: line 777: rejected by the server: .*numeric'
oq_check "--atomic: nothing from that file" "$(oq_snapshot)" "$before"
oq_run_cli "$t/8.out" "$t/8.err" push --queue s --batch 250 <"$t/srv.jsonl"
oq_check "server-refused line, default exit" "$OQ_RC" 1
oq_check "summary" "$(summary "$t/8.err")" \
  "onceq: push: inserted lines 1-750; rejected lines 751-1000 (line 777: rejected by the server); 750 new items"
oq_check "queue s items" \
  "$(oq_q "SELECT count(*), max((payload->>'n')::int) FROM onceq_items
          WHERE queue = 's'")" "750|750"
echo "PASS cli_push_bad_line"
