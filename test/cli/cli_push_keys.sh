#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in single quotes is SQL
# cli_push_keys: `onceq push --ordering-key K` (one item, or every line of
# a bulk push) and `--ordering-key-field F` (each line's own key) store the
# ordering key, and a worker then runs each key's items one at a time in
# the order they were pushed: its --sql handler writes a ledger row in the
# ack transaction, and per key the ledger's commit order is push order.
# An empty or too long key is refused with one line.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup cli_push_keys --url
t=$OQ_TMP

# ---------------------------------------------------------------- refused
oq_run_cli "$t/e.out" "$t/e.err" push --queue pk --ordering-key '' '{}'
oq_check "an empty --ordering-key: usage error" "$OQ_RC" 2
oq_match "it says why" "$(cat "$t/e.err")" "^onceq: push: --ordering-key needs a key"
oq_run_cli "$t/l.out" "$t/l.err" push --queue pk \
  --ordering-key "$(head -c 1001 /dev/zero | tr '\0' k)" '{}'
oq_check "a 1001-byte --ordering-key: usage error" "$OQ_RC" 2
oq_match "it names the limit" "$(cat "$t/l.err")" "at most 1000 bytes"
printf '{"k": "a", "i": 1}\n{"k": "", "i": 2}\n' >"$t/empty.jsonl"
oq_run_cli "$t/be.out" "$t/be.err" push --queue pk --atomic \
  --ordering-key-field k <"$t/empty.jsonl"
oq_check "a line with an empty key: --atomic inserts nothing" "$OQ_RC" 2
oq_match "the bad line is named" "$(cat "$t/be.err")" \
  'line 2: an empty ordering key in field "k"'
printf '{"i": 1}\n' >"$t/nokey.jsonl"
oq_run_cli "$t/bn.out" "$t/bn.err" push --queue pk --atomic \
  --ordering-key-field k <"$t/nokey.jsonl"
oq_check "a line without the field: refused" "$OQ_RC" 2
oq_check "nothing inserted" \
  "$(oq_q "SELECT count(*) FROM onceq_items WHERE queue = 'pk'")" 0

# ---------------------------------------------------------------- pushed
for i in 1 2 3 4 5; do
  oq_run_cli "$t/s$i.out" "$t/s$i.err" push --queue pk --ordering-key single \
    "{\"i\": $i}"
  oq_check "push --ordering-key single #$i" "$OQ_RC" 0
done
for i in 1 2 3 4 5 6; do
  echo "{\"k\": \"k$((i % 3))\", \"i\": $(((i + 2) / 3))}"
done >"$t/keys.jsonl"
oq_run_cli "$t/b.out" "$t/b.err" push --queue pk --batch 2 \
  --ordering-key-field k <"$t/keys.jsonl"
oq_check "bulk --ordering-key-field" "$OQ_RC" 0
for i in 1 2 3 4; do echo "{\"i\": $i}"; done |
  "$ONCEQ_CLI" push --queue pk --ordering-key all >/dev/null ||
  oq_fail "bulk --ordering-key failed"
oq_check "keys stored" "$(oq_q "SELECT string_agg(ordering_key || ':' || n,
  ' ' ORDER BY ordering_key) FROM (SELECT ordering_key, count(*) n
  FROM onceq_items WHERE queue = 'pk' GROUP BY 1) s")" \
  "all:4 k0:2 k1:2 k2:2 single:5"

oq_q "CREATE TABLE pledger (n BIGSERIAL PRIMARY KEY, okey TEXT, i INT)"
if [ -n "${ONCEQ_TEST_ROLE:-}" ]; then
  oq_q "GRANT INSERT, SELECT ON pledger TO onceq_test_worker"
  oq_q "GRANT USAGE ON SEQUENCE pledger_n_seq TO onceq_test_worker"
fi
for w in 1 2; do
  oq_worker_start "w$w" --queue pk --concurrency 4 --poll-interval 100ms \
    --sql 'INSERT INTO pledger (okey, i) SELECT ordering_key,
           ($1->>'"'i'"')::int FROM onceq_items WHERE id = $2'
done
oq_wait_until 30 "the keyed items drain" oq_sql_is \
  "SELECT count(*) FROM onceq_items WHERE queue = 'pk'" 0
oq_check "every item ran once" "$(oq_q 'SELECT count(*) FROM pledger')" 15
oq_check "per key, commit order is push order" \
  "$(oq_q "SELECT count(*) FROM pledger a JOIN pledger b
           ON a.okey = b.okey AND a.n < b.n AND a.i > b.i")" 0
oq_check "per key, each i once" \
  "$(oq_q "SELECT count(*) FROM (SELECT okey, i FROM pledger
           GROUP BY 1, 2 HAVING count(*) > 1) d")" 0
echo "PASS cli_push_keys"
