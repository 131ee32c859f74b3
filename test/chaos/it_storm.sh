#!/usr/bin/env bash
# it_storm.sh terminate|exhaust: three onceq-worker processes with default
# timings drain a few thousand --sql items through a connection storm
# (issue 21 §4; test/harness/oq_storm.sh does the work):
#   terminate: pg_terminate_backend on every client backend of the test
#              database twice a second for 12 s (the shared test server:
#              only this test's database is touched);
#   exhaust:   a private server (max_connections = 40) whose every free
#              slot an idle hog holds for 10 s, the workers' backends
#              terminated once meanwhile.
# Verdict: all workers alive, 0 duplicates, 0 lost, no dead letters, work
# resumes within one poll interval of a connection being available. Runs
# once: it skips (77) unless read committed (pass 2).
# it_storm.sh terminate|exhaust pgbouncer: the same storms, shorter (6 s,
# 2,000 items), with the workers through pgbouncer in transaction mode (3
# server connections for the three workers' 21): the terminations hit
# pgbouncer's server connections, which it makes again for the next
# transaction; in the exhaustion it must win a slot back from the hog.
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_storm.sh"
MODE=${1:-}
VIA=${2:-direct}
case "$VIA" in direct | pgbouncer) ;; *)
  echo "usage: it_storm.sh terminate|exhaust [direct|pgbouncer]" >&2
  exit 2
  ;;
esac
if [ "${ONCEQ_TEST_ISOLATION:-read committed}" != "read committed" ]; then
  echo "SKIP: runs once, in the read committed pass" >&2
  exit 77
fi
oq_setup "storm_${MODE}_$VIA"
if [ "$MODE $VIA" = "terminate pgbouncer" ]; then
  oq_pgbouncer_start pgb transaction 3
  oq_storm_terminate "$OQ_PGB_DSN" "$OQ_DSN" 2000 6
elif [ "$MODE" = terminate ]; then
  oq_storm_terminate "$OQ_DSN" "$OQ_DSN" 4000 12
else
  source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_pgprivate.sh"
  oq_pgx_init
  oq_pgx_server x "max_connections = 40"
  oq_pgx_sql x postgres "CREATE ROLE oq_app LOGIN" >/dev/null
  oq_pgx_sql x postgres "CREATE DATABASE oq OWNER oq_app" >/dev/null
  oq_pgx_sql x postgres "ALTER DATABASE oq SET default_transaction_isolation = '$OQ_ISOLATION'" >/dev/null
  app="$(oq_pgx_dsn x oq | sed 's/user=postgres/user=oq_app/')"
  out=$("$ONCEQ_CLI" --db "$app" migrate 2>&1) || oq_fail "onceq migrate: $out"
  if [ "$VIA" = pgbouncer ]; then
    OQ_PGB_UPSTREAM="127.0.0.1 ${OQ_PGX_PORT[x]}" OQ_PGB_USER=oq_app \
      OQ_PGB_BASE="$app" oq_pgbouncer_start pgb transaction 3
    oq_storm_exhaust "$OQ_PGB_DSN" "$(oq_pgx_dsn x oq)" "$app" 2000 6
  else
    oq_storm_exhaust "$app" "$(oq_pgx_dsn x oq)" "$app" 5000 10
  fi
fi
oq_log "PASS"
