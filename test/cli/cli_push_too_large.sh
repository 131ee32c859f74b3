#!/usr/bin/env bash
# cli_push_too_large: a payload over the 1 MiB limit (schema v4,
# onceq_items_payload_size) in a bulk push from stdin is refused with one
# line that names the line, the limit and the fix. (The single form cannot
# carry it: one argument holds at most 128 KiB on Linux; it goes through
# oq_enqueue, whose message it_lib_payload_limit checks.)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup push_too_large --url
t=$OQ_TMP

# a line of 1.1 MB between two small ones
{
  echo '{"n": 1}'
  printf '{"n": 2, "blob": "'
  head -c 1100000 /dev/zero | tr '\0' x
  printf '"}\n'
  echo '{"n": 3}'
} >"$t/in.jsonl"
oq_run_cli "$t/1.out" "$t/1.err" push --queue q <"$t/in.jsonl"
oq_log "stderr: $(cut -c1-400 "$t/1.err")"
oq_check "bulk exit" "$OQ_RC" 1
oq_contains "the refused line is named, with the limit" "$(head -n 1 "$t/1.err")" \
  "onceq: push: line 2: rejected by the server: payload is larger than the 1 MiB limit"
oq_contains "and the fix" "$(head -n 1 "$t/1.err")" \
  "store the data elsewhere and enqueue a reference to it"
# as for any refused line, its batch (here all three lines) is rejected
oq_contains "the summary" "$(tail -n 1 "$t/1.err")" \
  "rejected lines 1-3 (line 2: rejected by the server)"
oq_check "nothing of the batch went in" \
  "$(oq_sql 'SELECT count(*) FROM onceq_items')" 0

# a payload just under the limit goes in
{
  printf '{"blob": "'
  head -c 1000000 /dev/zero | tr '\0' x
  printf '"}\n'
} >"$t/ok.jsonl"
oq_run_cli "$t/2.out" "$t/2.err" push --queue q <"$t/ok.jsonl"
oq_check "1 MB payload: exit" "$OQ_RC" 0
oq_check "items" "$(oq_sql 'SELECT count(*) FROM onceq_items')" 1
oq_log "PASS"
