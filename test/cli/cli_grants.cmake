# Least privilege (issue 13 §6): deploy/grants/postgres.sql's producer,
# worker and coordinator roles run their flows and are refused DDL; see
# cli_grants.sh.
oq_add_script_test(NAME it_cli_grants SCRIPT cli_grants.sh
                   LABELS integration TIMEOUT 240 NEEDS onceq onceq-worker)
