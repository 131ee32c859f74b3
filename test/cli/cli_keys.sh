#!/usr/bin/env bash
# cli_keys: `onceq keys` shows each ordering key's head and the items
# waiting behind it; --blocked only the keys whose head failed (it holds
# the rest back until it succeeds or is dead-lettered), with its last
# error. `onceq stats` counts the blocked keys per queue (text and
# --json). A cancelled head unblocks its key.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup cli_keys --url
t=$OQ_TMP

oq_q "INSERT INTO onceq_items (queue, ordering_key)
        SELECT 'ord', k FROM (VALUES ('a'), ('b')) v(k),
        generate_series(1, 4) g ORDER BY k, g"
oq_q "INSERT INTO onceq_items (queue) VALUES ('ord')"
head=$(oq_q "SELECT id FROM onceq_items WHERE ordering_key = 'b'
             ORDER BY enqueue_seq LIMIT 1")
oq_q "UPDATE onceq_items SET attempts = 1, last_error = 'upstream 503',
      run_at = now() + interval '10 minutes' WHERE id = '$head'"

# Keys with an item running are not blocked, whichever item failed (a
# lower enqueue_seq that commits after a higher one was claimed leaves a
# key so). c: its first item runs, the second failed (the failed one is
# the first the key index holds since schema v12, which leaves claimed
# items out). d: its first item failed (a retried dead item, say, whose
# new enqueue_seq committed late) and the second runs.
oq_q "INSERT INTO onceq_sessions (id, expiry)
      VALUES ('00000000-0000-4000-8000-00000000000c', interval '1 hour')"
oq_q "INSERT INTO onceq_items (queue, ordering_key, payload)
        SELECT 'ordc', 'c', jsonb_build_object('g', g)
        FROM generate_series(1, 2) g ORDER BY g"
oq_q "UPDATE onceq_items SET claim = '00000000-0000-4000-8000-00000000000c',
      claimed_at = now(), attempts = 1
      WHERE ordering_key = 'c' AND payload->>'g' = '1'"
oq_q "UPDATE onceq_items SET attempts = 1, last_error = 'behind a running one',
      run_at = now() + interval '10 minutes'
      WHERE ordering_key = 'c' AND payload->>'g' = '2'"
oq_q "INSERT INTO onceq_items (queue, ordering_key, payload)
        SELECT 'ordc', 'd', jsonb_build_object('g', g)
        FROM generate_series(1, 2) g ORDER BY g"
oq_q "UPDATE onceq_items SET attempts = 1, last_error = 'ahead of a running one',
      run_at = now() + interval '10 minutes'
      WHERE ordering_key = 'd' AND payload->>'g' = '1'"
oq_q "UPDATE onceq_items SET claim = '00000000-0000-4000-8000-00000000000c',
      claimed_at = now(), attempts = 1
      WHERE ordering_key = 'd' AND payload->>'g' = '2'"
oq_run_cli "$t/c.json" "$t/c.err" --json keys --queue ordc
oq_check "c's head is running" "$(oq_jget "$t/c.json" 'd["keys"][0]["state"]')" running
oq_check "c is not blocked" "$(oq_jget "$t/c.json" 'd["keys"][0]["blocked"]')" False
oq_check "d's head is its failed item" \
  "$(oq_jget "$t/c.json" 'd["keys"][1]["state"]')" retrying
oq_check "d is not blocked" "$(oq_jget "$t/c.json" 'd["keys"][1]["blocked"]')" False

oq_run_cli "$t/all.json" "$t/all.err" --json keys --queue ord
oq_check "keys exit" "$OQ_RC" 0
oq_check "two keys" "$(oq_jget "$t/all.json" 'len(d["keys"])')" 2
oq_check "a's head is ready" "$(oq_jget "$t/all.json" 'd["keys"][0]["state"]')" ready
oq_check "3 wait behind a's head" \
  "$(oq_jget "$t/all.json" 'd["keys"][0]["waiting"]')" 3

oq_run_cli "$t/bl.json" "$t/bl.err" --json keys --blocked
oq_check "keys --blocked exit" "$OQ_RC" 0
oq_check "one blocked key" "$(oq_jget "$t/bl.json" 'len(d["keys"])')" 1
oq_check "it is b" "$(oq_jget "$t/bl.json" 'd["keys"][0]["ordering_key"]')" b
oq_check "the blocking item" "$(oq_jget "$t/bl.json" 'd["keys"][0]["head"]')" "$head"
oq_check "its state" "$(oq_jget "$t/bl.json" 'd["keys"][0]["state"]')" retrying
oq_check "its last error" \
  "$(oq_jget "$t/bl.json" 'd["keys"][0]["last_error"]')" "upstream 503"

oq_run_cli "$t/bl.out" "$t/bl.err" keys --blocked
oq_check "the table names the error" \
  "$(grep -c 'upstream 503' "$t/bl.out")" 1

oq_run_cli "$t/st.json" "$t/st.err" --json stats
oq_check "stats --json counts ord's blocked key" \
  "$(oq_jget "$t/st.json" '[q["blocked_keys"] for q in d["queues"] if q["queue"] == "ord"]')" \
  "[1]"
oq_check "stats --json: ordc has none" \
  "$(oq_jget "$t/st.json" '[q["blocked_keys"] for q in d["queues"] if q["queue"] == "ordc"]')" \
  "[0]"
oq_run_cli "$t/st.out" "$t/st.err" stats
oq_match "stats shows it" "$(grep '^ord ' "$t/st.out")" " 1 blocked key\$"

oq_run_cli "$t/c.out" "$t/c.err" cancel "$head"
oq_check "cancel exit" "$OQ_RC" 0
oq_run_cli "$t/none.out" "$t/none.err" keys --blocked
oq_check "no blocked key after the cancel" "$(cat "$t/none.out")" "no blocked keys"
oq_run_cli "$t/st0.json" "$t/st0.err" --json stats
oq_check "stats --json: none after the cancel" \
  "$(oq_jget "$t/st0.json" '[q["blocked_keys"] for q in d["queues"] if q["queue"] == "ord"]')" \
  "[0]"
echo "PASS cli_keys"
