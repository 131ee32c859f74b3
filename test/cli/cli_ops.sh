#!/usr/bin/env bash
# shellcheck disable=SC2016 # backquotes and $2 in single quotes are text
# cli_ops: list, show, cancel, retry, sessions and reap against a known
# state: human tables (aligned, at most 80 columns, long payloads cut with
# "…"), --json (valid, exact fields), and the database after each change.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup ops --url
t=$OQ_TMP
[ -x "${ONCEQ_WORKER:-}" ] || oq_fail "ONCEQ_WORKER is not executable"

# push ARGS...: onceq push, returning the id.
push() {
  local id
  id=$("$ONCEQ_CLI" push "$@") || oq_fail "onceq push $* failed"
  printf '%s' "$id"
}
# max_width FILE: the widest line, in characters (UTF-8 aware).
max_width() {
  python3 -c 'import sys
print(max([len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")] or [0]))' "$1"
}
# row FILE ID: the table row of ID, squeezed to single spaces.
row() { grep -F -- "$2" "$1" | tr -s ' '; }

long=$(printf 'x%.0s' $(seq 1 200))
r1=$(push --queue email '{"order": 1}')
r2=$(push --queue email --priority 5 "{\"order\": 2, \"note\": \"$long\"}")
r3=$(push --queue email '{"order": 3}')
s1=$(push --queue reports --delay 1h --max-attempts 3 '{"report": "weekly"}')

# ---------------------------------------------------------------- list
oq_run_cli "$t/list.out" "$t/list.err" list
oq_check "list exit" "$OQ_RC" 0
oq_check "list stderr" "$(cat "$t/list.err")" ""
oq_check "list header" "$(head -n 1 "$t/list.out" | tr -s ' ')" \
  "ID QUEUE STATE ATT PAYLOAD"
oq_check "list rows" "$(($(wc -l <"$t/list.out") - 1))" 4
oq_check "claim order: priority, then run_at; scheduled last" \
  "$(tail -n +2 "$t/list.out" | cut -c1-36 | tr '\n' ' ')" \
  "$r2 $r1 $r3 $s1 "
w=$(max_width "$t/list.out")
[ "$w" -le 80 ] || oq_fail "list is $w columns wide"
oq_log "ok: list fits 80 columns ($w)"
oq_match "the long payload is cut with …" "$(row "$t/list.out" "$r2")" \
  "^$r2 email ready 0/25 \\{\"note\": \"x+…$"
oq_check "a scheduled row" "$(row "$t/list.out" "$s1")" \
  "$s1 reports scheduled 0/3 {\"report\": \"wee…"
# columns line up: every row has its STATE column where the header has it
col=$(head -n 1 "$t/list.out" | grep -bo STATE | cut -d: -f1)
oq_check "STATE column aligned" \
  "$(tail -n +2 "$t/list.out" | cut -c$((col + 1))-$((col + 5)) | sort -u | tr '\n' ' ')" \
  "ready sched "

oq_run_cli "$t/l2.out" "$t/l2.err" list --state ready --queue email --limit 2
oq_check "list --limit exit" "$OQ_RC" 0
oq_check "list --limit rows" "$(($(wc -l <"$t/l2.out") - 1))" 2
oq_check "list says there is more" "$(cat "$t/l2.err")" \
  "onceq: list: more than 2 items; showing the first 2 (--limit N shows more)"
oq_run_cli "$t/l3.out" "$t/l3.err" list --state running
oq_check "no running items" "$(cat "$t/l3.out")" "no items running"

oq_run_cli "$t/lj.out" "$t/lj.err" --json list
oq_check "list --json exit" "$OQ_RC" 0
oq_json_ok "list --json" "$t/lj.out"
oq_check "list --json states" \
  "$(oq_jget "$t/lj.out" '" ".join(i["state"] for i in d["items"]) + " " + str(d["more"])')" \
  "ready ready ready scheduled False"
oq_check "list --json payload is JSON, not a string" \
  "$(oq_jget "$t/lj.out" '[i for i in d["items"] if i["id"] == "'"$s1"'"][0]["payload"]["report"]')" \
  weekly
oq_check "list --json fields" \
  "$(oq_jget "$t/lj.out" '",".join(sorted(d["items"][0].keys()))')" \
  "attempts,claimed_at,created_at,died_at,id,last_error,max_attempts,payload,payload_truncated,priority,queue,run_at,session,state,unique_key"

# ---------------------------------------------------------------- show
oq_run_cli "$t/show.out" "$t/show.err" show "$s1"
oq_check "show exit" "$OQ_RC" 0
oq_check "show id" "$(sed -n 1p "$t/show.out")" "id:          $s1"
oq_check "show state" "$(sed -n 2p "$t/show.out")" \
  "state:       scheduled (live, in onceq_items)"
oq_match "show run_at" "$(grep '^run_at:' "$t/show.out")" \
  '^run_at: +[0-9-]{10}T[0-9:]{8}Z \(in (59m|1h)\)$'
oq_check "show payload in full" "$(grep '^payload:' "$t/show.out")" \
  'payload:     {"report": "weekly"}'
oq_run_cli "$t/show2.out" "$t/show2.err" show "$r2"
oq_check "show keeps the long payload whole" \
  "$(grep '^payload:' "$t/show2.out" | sed 's/^payload: *//' |
     python3 -c 'import json,sys; print(len(json.loads(sys.stdin.read())["note"]))')" 200
oq_run_cli "$t/showj.out" "$t/showj.err" --json show "$s1"
oq_json_ok "show --json" "$t/showj.out"
oq_check "show --json" \
  "$(oq_jget "$t/showj.out" 'd["where"] + " " + d["state"] + " " + d["queue"] + " " + str(d["max_attempts"]) + " " + d["payload"]["report"]')" \
  "live scheduled reports 3 weekly"

# ------------------------------------------------- dead, done and retry
d1=$(push --queue fails --max-attempts 1 '{"will": "fail"}')
rc=0
timeout 60 "$ONCEQ_WORKER" --queue fails --drain --sql 'SELECT 1/0' \
  >"$t/worker_fail.log" 2>&1 || rc=$?
# a --drain that acknowledged nothing and whose every attempt failed exits 1
oq_check "the failing worker's --drain exit code" "$rc" 1
oq_check "the item died" "$(oq_q "SELECT count(*) FROM onceq_dead WHERE id = '$d1'")" 1
oq_run_cli "$t/ld.out" "$t/ld.err" list --state dead
oq_check "dead list header" "$(head -n 1 "$t/ld.out" | tr -s ' ')" \
  "ID QUEUE ATT DIED LAST ERROR"
oq_match "dead row" "$(row "$t/ld.out" "$d1")" \
  "^$d1 fails 1/1 [0-9.]+s ago query failed: div"
oq_run_cli "$t/sd.out" "$t/sd.err" show "$d1"
oq_check "show dead state" "$(sed -n 2p "$t/sd.out")" \
  'state:       dead (in onceq_dead; `onceq retry ID` runs it again)'
oq_match "show dead error" "$(grep '^last_error:' "$t/sd.out")" 'division by zero'

h1=$(push --queue hist '{"kept": "history"}')
timeout 60 "$ONCEQ_WORKER" --queue hist --drain --history --sql 'SELECT 1' \
  >"$t/worker_hist.log" 2>&1 || oq_fail "the history worker did not drain"
oq_run_cli "$t/sh.out" "$t/sh.err" show "$h1"
oq_check "show done exit" "$OQ_RC" 0
oq_check "show done state" "$(sed -n 2p "$t/sh.out")" \
  "state:       done (acknowledged; a history row in onceq_done)"
oq_run_cli "$t/shj.out" "$t/shj.err" --json show "$h1"
oq_json_ok "show --json (done)" "$t/shj.out"
oq_check "show --json done" "$(oq_jget "$t/shj.out" 'd["where"] + " " + str(d["attempts"])')" "done 1"

oq_run_cli "$t/rt.out" "$t/rt.err" retry "$d1"
oq_check "retry exit" "$OQ_RC" 0
oq_check "retry output" "$(cat "$t/rt.out")" \
  "retried $d1
1 item moved from dead back to ready (attempts reset to 0)"
oq_check "retried: live again, same id, attempts 0, ready now, dead empty" \
  "$(oq_q "SELECT queue, attempts, max_attempts, run_at <= now(), claim IS NULL,
            last_error LIKE '%division by zero%',
            (SELECT count(*) FROM onceq_dead)
          FROM onceq_items WHERE id = '$d1'")" "fails|0|1|t|t|t|0"
before=$(oq_snapshot)
oq_run_cli "$t/rt2.out" "$t/rt2.err" retry "$d1"
oq_check "retry of a live item exits 2" "$OQ_RC" 2
oq_check "and says why, in one line" "$(cat "$t/rt2.err")" \
  "onceq: retry: $d1 is live, not dead; nothing retried"
oq_check "nothing changed" "$(oq_snapshot)" "$before"

# --all-dead [--queue], and a unique key taken meanwhile
oq_q "INSERT INTO onceq_dead (id, queue, payload, priority, attempts,
     max_attempts, unique_key, last_error, created_at)
   VALUES ('00000000-0000-4000-8000-00000000000a', 'x', '{}', 0, 5, 5, NULL,
           'e', now()),
          ('00000000-0000-4000-8000-00000000000b', 'y', '{}', 0, 5, 5, NULL,
           'e', now()),
          ('00000000-0000-4000-8000-00000000000c', 'y', '{}', 0, 5, 5, 'uk-1',
           'e', now())"
k1=$(push --queue y --unique-key uk-1 '{"holder": true}')
oq_run_cli "$t/rk.out" "$t/rk.err" retry 00000000-0000-4000-8000-00000000000c
oq_check "retry of a dead item whose key is taken exits 2" "$OQ_RC" 2
oq_check "it names the holder" "$(cat "$t/rk.err")" \
  "onceq: retry: 00000000-0000-4000-8000-00000000000c: live item $k1 holds its unique key \"uk-1\" (cancel that one first); nothing retried"
oq_run_cli "$t/ra.out" "$t/ra.err" retry --all-dead --queue x
oq_check "retry --all-dead --queue x" "$(cat "$t/ra.out")" \
  "1 item moved from dead back to ready (attempts reset to 0)"
oq_run_cli "$t/rb.out" "$t/rb.err" --json retry --all-dead
oq_check "retry --all-dead exit" "$OQ_RC" 0
oq_json_ok "retry --json" "$t/rb.out"
oq_check "retry --all-dead moved one, kept the key holder's twin" \
  "$(oq_jget "$t/rb.out" 'str(d["retried"]) + " " + d["ids"][0] + " " + str(d["kept_dead"])')" \
  "1 00000000-0000-4000-8000-00000000000b 1"
oq_check "retry says what it kept" "$(cat "$t/rb.err")" \
  "onceq: retry: 1 dead item kept: a live item holds its unique key"
oq_check "dead left" "$(oq_q 'SELECT id FROM onceq_dead')" \
  00000000-0000-4000-8000-00000000000c

# ---------------------------------------------------------------- cancel
oq_run_cli "$t/c.out" "$t/c.err" cancel "$r1" "$s1"
oq_check "cancel exit" "$OQ_RC" 0
oq_check "cancel output" "$(cat "$t/c.out")" "cancelled $r1
cancelled $s1
2 items cancelled"
oq_check "both gone" \
  "$(oq_q "SELECT count(*) FROM onceq_items WHERE id IN ('$r1', '$s1')")" 0
before=$(oq_snapshot)
oq_run_cli "$t/c2.out" "$t/c2.err" cancel "$r3" 00000000-0000-4000-8000-0000000000ff
oq_check "cancel with one unknown id exits 2" "$OQ_RC" 2
oq_check "cancel names the unknown id" "$(cat "$t/c2.err")" \
  "onceq: cancel: no item 00000000-0000-4000-8000-0000000000ff; nothing cancelled"
oq_check "all or nothing: $r3 is still there" "$(oq_snapshot)" "$before"
oq_run_cli "$t/c3.out" "$t/c3.err" --json cancel "$r3"
oq_json_ok "cancel --json" "$t/c3.out"
oq_check "cancel --json" "$(oq_jget "$t/c3.out" 'str(d["cancelled"]) + " " + str(d["items"][0]["was_running"])')" "1 False"

# ------------------------------------------------------ sessions and reap
oq_q "INSERT INTO onceq_sessions (id, expiry, heartbeated_at, created_at,
     hostname, pid)
   VALUES ('00000000-0000-4000-8000-0000000000e1', interval '5 seconds',
           now() - interval '1 hour', now() - interval '2 hours',
           'gone-host', 111),
          ('00000000-0000-4000-8000-0000000000e2', interval '1 hour', now(),
           now() - interval '3 minutes', 'live-host', 222)"
c1=$(push --queue claimed '{"c": 1}')
c2=$(push --queue claimed --max-attempts 1 '{"c": 2}')
oq_q "UPDATE onceq_items SET claim = '00000000-0000-4000-8000-0000000000e1',
     claimed_at = now(), attempts = attempts + 1
   WHERE id IN ('$c1', '$c2')"
oq_run_cli "$t/ss.out" "$t/ss.err" sessions
oq_check "sessions exit" "$OQ_RC" 0
oq_check "sessions header" "$(head -n 1 "$t/ss.out" | tr -s ' ')" \
  "SESSION HOST PID AGE HEARTBEAT EXPIRY STATE CLAIMS"
oq_check "expired session row" "$(row "$t/ss.out" gone-host)" \
  "00000000 gone-host 111 2h 1h ago 5s expired 2"
oq_match "live session row" "$(row "$t/ss.out" live-host)" \
  '^00000000 live-host 222 3m[0-9]*s? [0-9.]+s ago 1h live 0$'
oq_check "sessions total" "$(tail -n 1 "$t/ss.out")" "2 sessions, 2 claimed items"
w=$(max_width "$t/ss.out")
[ "$w" -le 80 ] || oq_fail "sessions is $w columns wide"
oq_run_cli "$t/sj.out" "$t/sj.err" --json sessions
oq_json_ok "sessions --json" "$t/sj.out"
oq_check "sessions --json" \
  "$(oq_jget "$t/sj.out" '" ".join("%s:%s:%s:%s" % (s["host"], s["pid"], s["claims"], s["expired"]) for s in d["sessions"])')" \
  "gone-host:111:2:True live-host:222:0:False"

oq_run_cli "$t/rp.out" "$t/rp.err" reap
oq_check "reap exit" "$OQ_RC" 0
oq_check "reap header" "$(head -n 1 "$t/rp.out" | tr -s ' ')" \
  "SESSION HOST PID HEARTBEAT EXPIRY RELEASED"
oq_check "reap row and total" "$(tail -n +2 "$t/rp.out" | tr -s ' ')" \
  "00000000 gone-host 111 1h ago 5s 2
1 session reaped, 2 items released, 1 abandoned item moved to dead"
oq_check "the released items: one ready again, one dead (last attempt)" \
  "$(oq_q "SELECT (SELECT count(*) FROM onceq_items WHERE id = '$c1'
                  AND claim IS NULL),
               (SELECT count(*) FROM onceq_dead WHERE id = '$c2'),
               (SELECT count(*) FROM onceq_sessions)")" "1|1|1"
oq_run_cli "$t/rp2.out" "$t/rp2.err" reap
oq_check "second reap" "$(cat "$t/rp2.out")" \
  "nothing to reap: no session is past its expiry"
oq_run_cli "$t/rpj.out" "$t/rpj.err" --json reap
oq_json_ok "reap --json" "$t/rpj.out"
oq_check "reap --json, nothing to reap" \
  "$(oq_jget "$t/rpj.out" 'str(d["sessions_reaped"]) + " " + str(d["items_released"]) + " " + str(d["sessions"])')" \
  "0 0 []"
oq_q "INSERT INTO onceq_sessions (id, expiry, heartbeated_at, hostname, pid)
   VALUES ('00000000-0000-4000-8000-0000000000e3', interval '1 second',
           now() - interval '1 minute', 'other-host', 333)"
oq_q "UPDATE onceq_items SET claim = '00000000-0000-4000-8000-0000000000e3',
     claimed_at = now(), attempts = attempts + 1 WHERE id = '$c1'"
oq_run_cli "$t/rpj2.out" "$t/rpj2.err" --json reap
oq_json_ok "reap --json" "$t/rpj2.out"
oq_check "reap --json, one session" \
  "$(oq_jget "$t/rpj2.out" '"%s %s %s %s %s" % (d["sessions"][0]["id"], d["sessions"][0]["host"], d["sessions"][0]["claims_released"], d["sessions_reaped"], d["items_dead"])')" \
  "00000000-0000-4000-8000-0000000000e3 other-host 1 1 0"
oq_check "its item is ready again" \
  "$(oq_q "SELECT claim IS NULL FROM onceq_items WHERE id = '$c1'")" t

# ------------------------------------------------------------------ help
for cmd in push list show cancel retry sessions reap; do
  oq_run_cli "$t/h.out" "$t/h.err" "$cmd" --help
  oq_check "$cmd --help exit" "$OQ_RC" 0
  oq_match "$cmd --help usage" "$(head -n 1 "$t/h.out")" "^usage: onceq $cmd"
done
echo "PASS cli_ops"
