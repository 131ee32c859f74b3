#!/usr/bin/env bash
# cli_push_progress: bulk push progress on stderr.
#  - stderr not a terminal, input from a slow pipe: plain periodic lines
#    "onceq: push: pushed N lines (R/s)", N growing, no \r or escape codes,
#    and every line arrives (batches are sent each second, not held back).
#  - input from a regular file: the lines carry a percentage.
#  - stderr a terminal (script(1) gives a pseudo-terminal): one redrawn line
#    (\r, erase-line) with a bar, cleared before the summary.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/oq_harness.sh
. "$here/../harness/oq_harness.sh"
oq_setup push_progress --url
t=$OQ_TMP

# ---- a slow producer: 40 rounds of 5 lines, 0.1 s apart (about 4 s)
(
  for r in $(seq 1 40); do
    for k in 1 2 3 4 5; do echo "{\"r\": $r, \"k\": $k}"; done
    sleep 0.1
  done
) | "$ONCEQ_CLI" push --queue slow --quiet 2>"$t/slow.err" || {
  cat "$t/slow.err" >&2
  oq_fail "slow push exited non-zero"
}
oq_check "every line of the slow producer arrived" \
  "$(oq_q "SELECT count(*), count(DISTINCT (payload->>'r', payload->>'k'))
          FROM onceq_items WHERE queue = 'slow'")" "200|200"
oq_check "no carriage return" "$(tr -cd '\r' <"$t/slow.err" | wc -c)" 0
oq_check "no escape code" "$(tr -cd '\033' <"$t/slow.err" | wc -c)" 0
grep -E '^onceq: push: pushed [0-9]+ lines \([0-9]+/s\)$' "$t/slow.err" \
  >"$t/lines.txt" || true
n=$(wc -l <"$t/lines.txt")
[ "$n" -ge 3 ] || { cat "$t/slow.err" >&2; oq_fail "want >= 3 progress lines in about 4 s, got $n"; }
oq_log "ok: $n periodic progress lines"
sed -E 's/^onceq: push: pushed ([0-9]+) lines.*/\1/' "$t/lines.txt" \
  >"$t/counts.txt"
sort -n -c "$t/counts.txt" || oq_fail "progress counts go down: $(tr '\n' ' ' <"$t/counts.txt")"
[ "$(head -n 1 "$t/counts.txt")" -lt 200 ] ||
  oq_fail "the first progress line came only at the end: $(tr '\n' ' ' <"$t/counts.txt")"
oq_log "ok: counts grow: $(tr '\n' ' ' <"$t/counts.txt")"
oq_check "every other line is the summary" \
  "$(grep -Ev '^onceq: push: pushed [0-9]+ lines \(' "$t/slow.err" |
    sed 's/ ([0-9.]*s)$//')" "onceq: push: inserted lines 1-200; 200 new items"

# hold_items_lock SECONDS: another session blocks inserts into onceq_items
# for SECONDS, so the first batch of the next push waits: its first
# progress line then comes after the first second, whatever the speed of
# the machine.
hold_items_lock() {
  psql "$ONCEQ_DATABASE_URL" -X -q -v ON_ERROR_STOP=1 \
    -c "BEGIN" \
    -c "LOCK TABLE onceq_items IN SHARE ROW EXCLUSIVE MODE" \
    -c "SELECT pg_sleep($1)" -c "COMMIT" >/dev/null &
  OQ_PIDS+=($!)
  local n=0
  until [ "$(oq_q "SELECT count(*) FROM pg_locks l JOIN pg_class c
                  ON c.oid = l.relation
                WHERE c.relname = 'onceq_items'
                  AND l.mode = 'ShareRowExclusiveLock' AND l.granted")" = 1 ]
  do
    n=$((n + 1))
    [ $n -lt 100 ] || oq_fail "the lock holder did not start"
    sleep 0.05
  done
}

# ---- a regular file: percentage (and ETA) in the lines
awk 'BEGIN { for (i = 1; i <= 20000; i++) printf "{\"i\": %d}\n", i }' \
  >"$t/file.jsonl"
hold_items_lock 1.5
"$ONCEQ_CLI" push --queue file --quiet <"$t/file.jsonl" \
  2>"$t/file.err" || { cat "$t/file.err" >&2; oq_fail "file push failed"; }
oq_check "file items" \
  "$(oq_q "SELECT count(DISTINCT payload->>'i') FROM onceq_items
          WHERE queue = 'file'")" 20000
grep -Eq '^onceq: push: pushed [0-9]+ lines \([0-9]+/s, [0-9]+%(, ETA [0-9.smhd]+)?\)$' \
  "$t/file.err" || { cat "$t/file.err" >&2; oq_fail "no progress line with a percentage"; }
oq_check "file: no carriage return" "$(tr -cd '\r' <"$t/file.err" | wc -c)" 0
oq_log "ok: $(grep -c pushed "$t/file.err") line(s) with a percentage"

# ---- a terminal: the line is redrawn in place
if command -v script >/dev/null; then
  hold_items_lock 1
  script -qec "'$ONCEQ_CLI' push --queue tty --batch 20 --quiet <'$t/file.jsonl'" \
    /dev/null >"$t/tty.out" 2>&1 </dev/null || {
    cat -A "$t/tty.out" | tail -n 5 >&2
    oq_fail "push under script(1) failed"
  }
  oq_check "tty items" \
    "$(oq_q "SELECT count(*) FROM onceq_items WHERE queue = 'tty'")" 20000
  redraws=$(grep -o $'\r\033\\[K\\[[#.]*\\] pushed [0-9]* lines' "$t/tty.out" | wc -l)
  [ "$redraws" -ge 2 ] || { cat -A "$t/tty.out" | tail -n 5 >&2; oq_fail "want >= 2 redraws, got $redraws"; }
  oq_log "ok: $redraws redraws of one line"
  oq_match "the summary follows a cleared line" "$(tr '\r' '\n' <"$t/tty.out" | tail -n 2 | tr -d '\n')" \
    $'^\033\\[Konceq: push: inserted lines 1-20000; 20000 new items'
  oq_check "no plain progress lines on a terminal" \
    "$(grep -c '^onceq: push: pushed' "$t/tty.out" || true)" 0
else
  oq_log "script(1) is missing: terminal redraw not checked"
fi
echo "PASS cli_push_progress"
