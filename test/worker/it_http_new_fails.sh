#!/usr/bin/env bash
# it_http_new_fails.sh: an --http executor whose client cannot be set up
# (wk_http_new returns NULL, as on out of memory; the fault hook of
# http_new_fails.c) releases its items instead of crashing, and uses the
# client once it can be created.
#   1. it never can: the worker stays up, the item is released, neither
#      failed nor dead; SIGTERM drains (exit 0);
#   2. the first call fails (the executor's start-up one): the first item
#      creates it and runs (a refused connection: a failed attempt whose
#      last_error names the URL).
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup http_new_fails
[ -x "${OQT_FAULTY_WORKER:-}" ] || oq_fail "OQT_FAULTY_WORKER is not executable"
URL=http://127.0.0.1:1/hook

# ---- 1. never
id=$(oq_sql "INSERT INTO onceq_items (queue, payload, max_attempts)
             VALUES ('h', '{}', 1) RETURNING id")
OQT_HTTP_NEW_FAILS=1000000 oq_start never "$OQT_FAULTY_WORKER" --db "$OQ_DSN" \
  --queue h --concurrency 1 --poll-interval 200ms --http "$URL"
w=$OQ_LAST_PID
said() { grep -q "cannot set up the HTTP client" "$OQ_TMP/never.log"; }
oq_wait_until 15 "the executor to report the missing client" said
sleep 1
kill -0 "$w" 2>/dev/null ||
  oq_fail "the worker died: $(tail -5 "$OQ_TMP/never.log")"
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_stop "$w" 15
oq_check "exit code after SIGTERM" "$OQ_RC" 0
oq_check "items still claimed" \
  "$(oq_sql 'SELECT count(*) FROM onceq_items WHERE claim IS NOT NULL')" 0
# after the stop, not while it runs: each claim counts the attempt until
# the release gives it back, and the worker claims again every turn, so a
# read in between may see 1 (1 run in 25 did)
oq_check "the item's attempts counted" \
  "$(oq_sql "SELECT attempts FROM onceq_items WHERE id = '$id'")" 0

# ---- 2. the first call only
OQT_HTTP_NEW_FAILS=1 oq_start once "$OQT_FAULTY_WORKER" --db "$OQ_DSN" \
  --queue h --concurrency 1 --drain --http "$URL"
oq_wait_exit "$OQ_LAST_PID" 30
oq_check "--drain exit code (every attempt failed)" "$OQ_RC" 1
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 1
oq_contains "last_error" "$(oq_sql "SELECT last_error FROM onceq_dead WHERE id = '$id'")" \
  "POST http://127.0.0.1:1/hook"
oq_log "PASS"
