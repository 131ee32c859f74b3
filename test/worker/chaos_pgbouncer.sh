#!/usr/bin/env bash
# shellcheck disable=SC2016 # $2 in --sql statements is for the server
# chaos_pgbouncer.sh: an exact ledger through pgbouncer in transaction mode
# (3 server connections) under faults. Three --sql workers write one ledger
# row per item in the ack transaction (the ledger has no unique key: a
# second ack would be a second row) while batches are enqueued directly;
# meanwhile, in a fixed order: kill -9 of a worker (a new one takes its
# place), pg_terminate_backend of every server connection pgbouncer holds,
# and a pgbouncer restart (SIGTERM: every client and server connection
# drops; the same port again). Verdict: every enqueued item has exactly one
# ledger row, none is left or dead, and no worker but the killed ones
# exited. Bounded: about 20 s.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
oq_setup pgbouncer_chaos

BATCHES=24
PER=125
oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, at timestamptz NOT NULL
                             DEFAULT clock_timestamp())" >/dev/null
oq_pgbouncer_start pgb transaction 3

SQL='INSERT INTO ledger (item_id) SELECT $2 FROM pg_sleep(0.002)'
FLAGS=(--concurrency 4 --poll-interval 200ms --heartbeat-interval 250ms
       --session-expiry 2500ms --retry-base 50ms)
WORKERS=()
n_started=0
start_worker() {
  n_started=$((n_started + 1))
  oq_worker_start "w$n_started" --db "$OQ_PGB_DSN" "${FLAGS[@]}" --sql "$SQL"
  WORKERS+=("$OQ_LAST_PID")
}
start_worker
start_worker
start_worker

enqueue() {
  oq_sql "INSERT INTO onceq_items (payload)
          SELECT jsonb_build_object('b', $1, 'n', g)
          FROM generate_series(1, $PER) g" >/dev/null
}

# servers: the backends pgbouncer holds for the test database
terminate_servers() {
  oq_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND backend_type = 'client backend'"
}

t0=$(oq_now_ms)
killed=()
for b in $(seq 1 $BATCHES); do
  enqueue "$b"
  case $b in
  4 | 16)
    victim=${WORKERS[0]}
    kill -KILL "$victim"
    oq_wait_exit "$victim" 5
    killed+=("$victim")
    WORKERS=("${WORKERS[@]:1}")
    oq_log "fault: kill -9 worker $victim"
    start_worker
    ;;
  7 | 13 | 19)
    oq_log "fault: pg_terminate_backend of $(terminate_servers) server connections"
    ;;
  10 | 22)
    oq_log "fault: pgbouncer restart"
    oq_pgbouncer_stop
    oq_pgbouncer_start pgb transaction 3
    ;;
  esac
  sleep 0.4
done
N=$((BATCHES * PER))
oq_wait_until 30 "every item acknowledged" oq_all_done
oq_log "$N items through $((${#killed[@]})) kills, 3 backend terminations and 2 pgbouncer restarts in $(($(oq_now_ms) - t0)) ms"
for w in "${WORKERS[@]}"; do
  oq_alive "$w" || oq_fail "worker $w exited (only killed workers may)"
done
for w in "${WORKERS[@]}"; do
  oq_stop "$w" 15
  oq_check "worker $w exit code" "$OQ_RC" 0
done
oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
oq_ledger_exact "$N"
oq_check "duplicates" "$(oq_sql 'SELECT count(*) FROM (SELECT item_id FROM ledger
                                 GROUP BY item_id HAVING count(*) > 1) d')" 0
