#!/usr/bin/env bash
# it_fair.sh: a fleet shares a small backlog of slow items (issue 22,
# item 1). Three workers of 2 executors each, 60 items, a --sql handler
# that sleeps 0.5 s. A worker holds what its executors can start within the
# horizon (worker/src/claim_size.h, 100 ms): one item per executor plus
# ceil(2 x 100 / 500) = 1, so 3; sampled from onceq_items (rows claimed per
# session) while they run. Every worker gets some of the work, and the
# items all run exactly once. (Before claims were sized by the work, the
# first worker's floor of 2 x --batch took all 60.)
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup fair

N=60
C=2
BOUND=$((C + 1)) # C + ceil(C x 100 ms / 500 ms)
SQL='INSERT INTO ledger (item_id, n)
     SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.5)'
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
        INSERT INTO onceq_items (payload)
        SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null

pids=()
for name in A B C; do
  oq_worker_start "$name" --concurrency "$C" --poll-interval 200ms --sql "$SQL"
  pids+=("$OQ_LAST_PID")
done

# sample: the most rows one session holds, and which sessions held any
max_held=0
seen=""
t_end=$(($(oq_now_ms) + 25000))
while [ "$(oq_now_ms)" -lt "$t_end" ]; do
  rows=$(oq_sql "SELECT s.pid || ' ' || count(i.id) FROM onceq_sessions s
                 JOIN onceq_items i ON i.claim = s.id GROUP BY s.pid")
  left=$(oq_sql 'SELECT count(*) FROM onceq_items')
  while read -r pid n; do
    [ -n "$pid" ] || continue
    [ "$n" -le "$max_held" ] || max_held=$n
    case " $seen " in *" $pid "*) ;; *) seen="$seen $pid" ;; esac
  done <<<"$rows"
  [ "$left" = 0 ] && break
  sleep 0.05
done
oq_metric fair_max_held "$max_held" items "most rows one session held, bound $BOUND"
oq_log "sessions that held items: $seen"
oq_check_le "most items one worker held at once" "$max_held" "$BOUND"
for p in "${pids[@]}"; do
  case " $seen " in
  *" $p "*) ;;
  *) oq_fail "worker pid $p never held an item (sessions seen:$seen)" ;;
  esac
done
oq_wait_until 30 "every item done" oq_all_done
for p in "${pids[@]}"; do
  oq_stop "$p" 15
  oq_check "exit code after SIGTERM (pid $p)" "$OQ_RC" 0
done
oq_ledger_exact "$N"
oq_check "ledger n values" "$(oq_sql 'SELECT count(DISTINCT n) FROM ledger')" "$N"
oq_log "PASS"
