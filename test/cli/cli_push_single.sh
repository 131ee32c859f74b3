#!/usr/bin/env bash
# cli_push_single: `onceq push PAYLOAD` prints the new item's id and stores
# exactly the options given; the --unique-key form prints the existing id
# (stderr says "exists"), exits 0 and inserts nothing the second time.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup push_single --url
t=$OQ_TMP
uuid='^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'

# 1. The plain form: defaults.
oq_run_cli "$t/1.out" "$t/1.err" push '{"order": 42}'
oq_check "push exit" "$OQ_RC" 0
id1=$(cat "$t/1.out")
oq_match "push prints one id" "$id1" "$uuid"
oq_check "stderr is quiet" "$(cat "$t/1.err")" ""
oq_check "the item, with the defaults" \
  "$(oq_q "SELECT queue, payload::text, priority, attempts, max_attempts,
            unique_key IS NULL, claim IS NULL, run_at <= now()
          FROM onceq_items WHERE id = '$id1'")" \
  'default|{"order": 42}|0|0|25|t|t|t'

# 2. Every option lands in its column.
oq_run_cli "$t/2.out" "$t/2.err" push --queue email --priority 7 \
  --delay 5m --max-attempts 3 '{"to": "a@example.com"}'
oq_check "push with options exit" "$OQ_RC" 0
id2=$(cat "$t/2.out")
oq_check "queue, priority, max_attempts, delay" \
  "$(oq_q "SELECT queue, priority, max_attempts,
            run_at > now() + interval '4 minutes'
            AND run_at <= now() + interval '5 minutes'
          FROM onceq_items WHERE id = '$id2'")" 'email|7|3|t'
oq_run_cli "$t/3.out" "$t/3.err" push --run-at 2030-01-02T03:04:05Z -- -5
oq_check "push --run-at with a payload after -- exit" "$OQ_RC" 0
oq_check "--run-at and a negative-number payload" \
  "$(oq_q "SELECT payload::text, run_at = '2030-01-02T03:04:05Z'
          FROM onceq_items WHERE id = '$(cat "$t/3.out")'")" '-5|t'

# 3. The unique-key form: first insert, then the existing id.
oq_run_cli "$t/4.out" "$t/4.err" push --queue invoice --unique-key inv-42 \
  '{"invoice": 42}'
oq_check "first unique-key push exit" "$OQ_RC" 0
idk=$(cat "$t/4.out")
oq_match "it prints a new id" "$idk" "$uuid"
oq_check "no 'exists' the first time" "$(cat "$t/4.err")" ""
oq_run_cli "$t/5.out" "$t/5.err" push --queue invoice --unique-key inv-42 \
  '{"invoice": 42, "again": true}'
oq_check "second unique-key push exits 0" "$OQ_RC" 0
oq_check "it prints the existing id" "$(cat "$t/5.out")" "$idk"
oq_check "stderr says it exists" "$(cat "$t/5.err")" \
  "onceq: push: exists: unique key \"inv-42\" is held by live item $idk; nothing inserted"
oq_check "one item holds the key, with the first payload" \
  "$(oq_q "SELECT count(*), min(payload::text) FROM onceq_items
          WHERE unique_key = 'inv-42'")" '1|{"invoice": 42}'

# 4. --json: one object per push.
oq_run_cli "$t/6.out" "$t/6.err" --json push --unique-key inv-42 '{"x": 1}'
oq_check "push --json exit" "$OQ_RC" 0
oq_json_ok "push --json output" "$t/6.out"
oq_check "--json id and existed" \
  "$(oq_jget "$t/6.out" 'd["id"] + " " + str(d["existed"])')" "$idk True"
oq_run_cli "$t/7.out" "$t/7.err" push --json '{"y": 2}'
oq_check "--json on a new item" "$(oq_jget "$t/7.out" 'd["existed"]')" False

oq_check "exactly the items pushed" "$(oq_q 'SELECT count(*) FROM onceq_items')" 5
echo "PASS cli_push_single"
