# onceq-worker through pgbouncer (the Debian package, started by the harness:
# oq_pgbouncer_start). LABEL pooler: test/run.sh runs these once, in pass 2
# (read committed, default build); the other passes leave them out.
oq_add_script_test(NAME it_worker_pgbouncer SCRIPT it_pgbouncer.sh TIMEOUT 120
                   NEEDS onceq-worker onceq LABELS integration pooler)
# An exact ledger under kill -9, backend terminations and pgbouncer
# restarts (about 20 s). RUN_SERIAL: it kills every server connection of
# its database and times recoveries.
oq_add_script_test(NAME chaos_worker_pgbouncer SCRIPT chaos_pgbouncer.sh
                   TIMEOUT 120 RUN_SERIAL
                   NEEDS onceq-worker onceq LABELS integration pooler)
