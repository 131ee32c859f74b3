# onceq-worker integration tests (LABEL integration): bash scripts that run
# the real daemon as child processes against a private database from the
# harness (ONCEQ_TEST_DSN), under ONCEQ_TEST_ISOLATION. Shared plumbing:
# test/harness/oq_harness.sh. Each script skips (77) without a database.
#
# RUN_SERIAL: it_worker_pg_restart and it_worker_outage stop the shared
# server, so nothing may run beside them; the timing assertions (wake-up
# latency, reaping, SIGSTOP past expiry, fencing) want a quiet machine too.
# The fault tests (outage, blackhole, lost claim reply) drive the fault
# proxy oq_cutproxy (ONCEQ_CUTPROXY) through the harness's oq_proxy_*.
set(_n NEEDS onceq-worker onceq LABELS integration)
oq_add_script_test(NAME it_worker_sql SCRIPT it_sql_handler.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_exec SCRIPT it_exec_handler.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_http SCRIPT it_http_retry.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_sigterm SCRIPT it_sigterm.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_sigkill SCRIPT it_sigkill.sh TIMEOUT 300
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_sigstop SCRIPT it_sigstop.sh TIMEOUT 120
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_pg_restart SCRIPT it_pg_restart.sh
                   TIMEOUT 150 RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_notify SCRIPT it_notify.sh TIMEOUT 60
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_bad_flags SCRIPT it_bad_flags.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_worker_metrics SCRIPT it_metrics.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_worker_held_bytes SCRIPT it_held_bytes.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_outage SCRIPT it_outage.sh TIMEOUT 300
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_blackhole SCRIPT it_blackhole.sh TIMEOUT 240
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_lost_claim_reply SCRIPT it_lost_claim_reply.sh
                   TIMEOUT 120 RUN_SERIAL ${_n})
