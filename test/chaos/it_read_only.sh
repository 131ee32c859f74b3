#!/usr/bin/env bash
# shellcheck disable=SC2016 # $1, $2 in --sql statements are for the server
# it_read_only.sh: the server the workers are connected to stops taking
# writes in place for 3 s (default_transaction_read_only = on, reloaded:
# what a switchover does to an old primary before it is demoted, or a
# standby reached without target_session_attrs), then takes them again.
# Two --sql workers drain 2000 items meanwhile. Every write fails with
# SQLSTATE 25006 (read_only_sql_transaction); the workers must treat it as
# the server's state, not the item's: all alive, 0 dead letters, the ledger
# exact. A private server (test/harness/oq_pgprivate.sh): the shared one is
# not touched. Runs once: skips (77) unless read committed.
#
# it_read_only.sh switchover: a primary p and its hot standby s; the workers
# reach them with host=p,s target_session_attrs=read-write. p stops taking
# writes in place (as above, for good: a demoted old primary that is still
# up), s catches up and is promoted. The workers' connections to p answer
# every write with 25006 and never break; they must take it as a connection
# to the wrong server, connect again (libpq skips the read-only p) and
# drain on s: all alive, 0 dead letters, the ledger on s exact.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_pgprivate.sh"
MODE=${1:-inplace}
case "$MODE" in inplace | switchover) ;; *)
  echo "usage: it_read_only.sh [inplace|switchover]" >&2
  exit 2
  ;;
esac
if [ "${ONCEQ_TEST_ISOLATION:-read committed}" != "read committed" ]; then
  echo "SKIP: runs once, in the read committed pass" >&2
  exit 77
fi
oq_setup "read_only_$MODE"
oq_pgx_init
N=2000
if [ "$MODE" = switchover ]; then
  SQL='INSERT INTO ledger (item_id, n) SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.01)'
  oq_pgx_server p
  oq_pgx_sql p postgres "CREATE DATABASE oq" >/dev/null
  oq_pgx_standby s p
  P1=${OQ_PGX_PORT[p]}
  P2=${OQ_PGX_PORT[s]}
  KV="host=127.0.0.1,127.0.0.1 port=$P1,$P2 user=postgres dbname=oq target_session_attrs=read-write sslmode=disable gssencmode=disable"
  out=$("$ONCEQ_CLI" --db "$KV" migrate 2>&1) || oq_fail "onceq migrate: $out"
  oq_pgx_sql p oq "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL,
                     port int NOT NULL DEFAULT inet_server_port());
                   INSERT INTO onceq_items (payload)
                   SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null
  oq_worker_start_on A "$KV" --sql "$SQL"
  wa=$OQ_LAST_PID
  oq_worker_start_on B "$KV" --sql "$SQL"
  wb=$OQ_LAST_PID
  some() { [ "$(oq_pgx_sql p oq 'SELECT count(*) FROM ledger')" -ge 300 ]; }
  oq_wait_until 30 "300 items done" some
  PGOPTIONS="-c default_transaction_read_only=off" oq_pgx_sql p postgres \
    "ALTER SYSTEM SET default_transaction_read_only = on" >/dev/null
  PGOPTIONS="-c default_transaction_read_only=off" oq_pgx_sql p postgres \
    "SELECT pg_reload_conf()" >/dev/null
  oq_log "p takes no writes (ledger at $(oq_pgx_sql p oq 'SELECT count(*) FROM ledger'))"
  sleep 1
  lsn=$(oq_pgx_sql p postgres "SELECT pg_current_wal_lsn()")
  caught_up() {
    [ "$(oq_pgx_sql s postgres "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ]
  }
  oq_wait_until 20 "s replaying p's last write" caught_up
  before=$(oq_pgx_sql s oq 'SELECT count(*) FROM ledger')
  oq_pgx_promote s
  tp=$(oq_now_ms)
  oq_log "s promoted (ledger there at $before); p is up, read-only"
  drained() { [ "$(oq_pgx_sql s oq 'SELECT count(*) FROM onceq_items')" = 0 ]; }
  oq_wait_until 60 "every item done on s" drained
  oq_log "drained on s $(($(oq_now_ms) - tp)) ms after the promotion"
  oq_check "worker A alive" "$(oq_alive "$wa" && echo yes || echo no)" yes
  oq_check "worker B alive" "$(oq_alive "$wb" && echo yes || echo no)" yes
  oq_check "dead items" "$(oq_pgx_sql s oq 'SELECT count(*) FROM onceq_dead')" 0
  oq_check "ledger rows" "$(oq_pgx_sql s oq 'SELECT count(*) FROM ledger')" "$N"
  oq_check "distinct items in the ledger" \
    "$(oq_pgx_sql s oq 'SELECT count(DISTINCT item_id) FROM ledger')" "$N"
  oq_check_le "items acked on s" 1 \
    "$(oq_pgx_sql s oq "SELECT count(*) FROM ledger WHERE port = $P2")"
  oq_log "PASS"
  exit 0
fi
oq_pgx_server x
oq_pgx_sql x postgres "CREATE DATABASE oq" >/dev/null
DB=$(oq_pgx_dsn x oq)
out=$("$ONCEQ_CLI" --db "$DB" migrate 2>&1) || oq_fail "onceq migrate: $out"
oq_pgx_sql x oq "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL);
                 INSERT INTO onceq_items (payload)
                 SELECT jsonb_build_object('n', g) FROM generate_series(1, $N) g" >/dev/null
SQL='INSERT INTO ledger (item_id, n) SELECT $2, ($1->>'"'n'"')::int FROM pg_sleep(0.01)'
oq_worker_start_on A "$DB" --sql "$SQL"
wa=$OQ_LAST_PID
oq_worker_start_on B "$DB" --sql "$SQL"
wb=$OQ_LAST_PID
some() { [ "$(oq_pgx_sql x oq 'SELECT count(*) FROM ledger')" -ge 300 ]; }
oq_wait_until 30 "300 items done" some
ro() {
  PGOPTIONS="-c default_transaction_read_only=off" oq_pgx_sql x postgres "$1" >/dev/null
}
ro "ALTER SYSTEM SET default_transaction_read_only = on"
ro "SELECT pg_reload_conf()"
oq_log "the server takes no writes (ledger at $(oq_pgx_sql x oq 'SELECT count(*) FROM ledger'))"
sleep 3
ro "ALTER SYSTEM RESET default_transaction_read_only"
ro "SELECT pg_reload_conf()"
oq_log "the server takes writes again"
drained() { [ "$(oq_pgx_sql x oq 'SELECT count(*) FROM onceq_items')" = 0 ]; }
oq_wait_until 60 "every item done" drained
oq_check "worker A alive" "$(oq_alive "$wa" && echo yes || echo no)" yes
oq_check "worker B alive" "$(oq_alive "$wb" && echo yes || echo no)" yes
oq_check "dead items" "$(oq_pgx_sql x oq 'SELECT count(*) FROM onceq_dead')" 0
oq_check "ledger rows" "$(oq_pgx_sql x oq 'SELECT count(*) FROM ledger')" "$N"
oq_check "distinct items in the ledger" \
  "$(oq_pgx_sql x oq 'SELECT count(DISTINCT item_id) FROM ledger')" "$N"
oq_log "25006 seen by A: $(grep -c '25006\|read-only' "$OQ_TMP/A.log" || true) lines"
oq_log "PASS"
