#!/usr/bin/env bash
# cli_push_bulk: 100,000 JSON lines on stdin arrive exactly once: 100,000
# items, 100,000 distinct line numbers, every printed id is one of them, and
# the summary says so. Blank lines and CRLF endings are fine.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup push_bulk --url
t=$OQ_TMP
N=100000

awk -v n=$N 'BEGIN { for (i = 1; i <= n; i++)
  printf "{\"n\": %d, \"key\": \"k-%d\", \"text\": \"line %d\"}\n", i, i, i }' \
  >"$t/in.jsonl"
oq_check "input lines" "$(wc -l <"$t/in.jsonl")" $N

oq_run_cli "$t/ids.txt" "$t/push.err" push --queue bulk <"$t/in.jsonl"
oq_check "bulk push exit" "$OQ_RC" 0
oq_check "ids printed" "$(wc -l <"$t/ids.txt")" $N
oq_check "distinct ids printed" "$(sort -u "$t/ids.txt" | wc -l)" $N
summary=$(tail -n 1 "$t/push.err" | sed 's/ ([0-9.]*s)$//')
oq_check "summary" "$summary" \
  "onceq: push: inserted lines 1-$N; $N new items"
oq_check "items, distinct n, min, max, all in queue bulk" \
  "$(oq_q "SELECT count(*), count(DISTINCT payload->>'n'),
            min((payload->>'n')::int), max((payload->>'n')::int),
            count(*) FILTER (WHERE queue = 'bulk')
          FROM onceq_items")" "$N|$N|1|$N|$N"
oq_check "each line's payload kept whole" \
  "$(oq_q "SELECT count(*) FROM onceq_items
          WHERE payload->>'text' = 'line ' || (payload->>'n')
            AND payload->>'key' = 'k-' || (payload->>'n')")" $N

# The printed ids are exactly the stored ids.
oq_q "SELECT id FROM onceq_items" | sort >"$t/db_ids.txt"
sort "$t/ids.txt" >"$t/ids_sorted.txt"
oq_check "printed ids = stored ids" \
  "$(comm -3 "$t/db_ids.txt" "$t/ids_sorted.txt" | wc -l)" 0

# --json ids map back to their lines, in input order (a smaller input,
# with a blank line and CRLF endings).
printf '{"a": 1}\r\n\n{"a": 2}\r\n   \n{"a": 3}' >"$t/small.jsonl"
oq_run_cli "$t/small.out" "$t/small.err" --json push --queue small \
  <"$t/small.jsonl"
oq_check "small --json push exit" "$OQ_RC" 0
oq_json_ok "push --json output" "$t/small.out" lines
python3 - "$t/small.out" >"$t/pairs.txt" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows[:-1]:
    print(r["line"], r["id"])
s = rows[-1]
print("summary", s["inserted"], s["rejected"], s["lines"], s["new"], s["exit"])
EOF
oq_check "lines of the new items" "$(cut -d' ' -f1 "$t/pairs.txt" | head -n 3 | tr '\n' ' ')" "1 3 5 "
oq_check "the JSON summary" "$(tail -n 1 "$t/pairs.txt")" \
  "summary [[1, 5]] [] 5 3 0"
while read -r line id; do
  [ "$line" = summary ] && continue
  want=$(( (line + 1) / 2 ))
  oq_check "line $line's item" \
    "$(oq_q "SELECT payload->>'a' FROM onceq_items WHERE id = '$id'")" "$want"
done <"$t/pairs.txt"
oq_check "all items" "$(oq_q 'SELECT count(*) FROM onceq_items')" $((N + 3))
echo "PASS cli_push_bulk"
