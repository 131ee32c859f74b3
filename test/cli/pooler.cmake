# The CLI and the coordinator through pgbouncer in transaction mode
# (cli_pgbouncer.sh). LABEL pooler: test/run.sh runs it once, in pass 2.
oq_add_script_test(NAME it_cli_pgbouncer SCRIPT cli_pgbouncer.sh
                   LABELS integration pooler TIMEOUT 120
                   NEEDS onceq onceq-worker)
