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
# Ordering keys under kill -9: per-key ack order, 0 duplicates, 0 lost.
oq_add_script_test(NAME it_worker_ordered_sigkill SCRIPT it_ordered_sigkill.sh
                   TIMEOUT 180 RUN_SERIAL ${_n})
# --drain with ordering keys: a claim that finds every key blocked by the
# worker's own items is not "nothing ready".
oq_add_script_test(NAME it_worker_ordered_drain SCRIPT it_ordered_drain.sh
                   TIMEOUT 90 ${_n})
# A short claim with our own items in flight (ordering keys, a concurrency
# limit): the next claim follows the first of them to settle.
oq_add_script_test(NAME it_worker_short_claim_wake SCRIPT it_short_claim_wake.sh
                   TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_worker_pg_restart SCRIPT it_pg_restart.sh
                   TIMEOUT 150 RUN_SERIAL ${_n})
# A --exec claim is durable before its child starts: a server crash does
# not hand the item to another worker while the child runs.
oq_add_script_test(NAME it_worker_exec_claim_crash SCRIPT it_exec_claim_crash.sh
                   TIMEOUT 120 RUN_SERIAL ${_n})
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
# Out of memory in the middle of a claim (the LD_PRELOAD shim
# oq_fail_strdup, test/tools/fail_strdup.c): the worker sweeps at once.
oq_add_script_test(NAME it_worker_claim_oom SCRIPT it_claim_oom.sh TIMEOUT 60
                   ENVIRONMENT "OQ_FAIL_STRDUP=$<TARGET_FILE:oq_fail_strdup>"
                   "OQ_SANITIZER=${ONCEQ_SANITIZER}"
                   NEEDS onceq-worker onceq oq_fail_strdup LABELS integration)
# A --sql statement that deletes or unclaims its own onceq_items row: a
# failed attempt that dead-letters (issue 20, finding 3).
oq_add_script_test(NAME it_worker_sql_own_row SCRIPT it_sql_own_row.sh
                   TIMEOUT 120 ${_n})
# As the least-privilege worker role (ONCEQ_TEST_ROLE=worker: the harness
# applies deploy/grants/postgres.sql and oq_worker_start connects as a
# member of onceq_worker): the --sql paths and a handler touching its own
# row. Labels integration and slow:
# passes 2 and 3 run them, not the sanitizer or version passes.
set(_r NEEDS onceq-worker onceq LABELS integration slow
    ENVIRONMENT ONCEQ_TEST_ROLE=worker)
oq_add_script_test(NAME it_worker_sql_least_priv SCRIPT it_sql_handler.sh
                   TIMEOUT 90 ${_r})
oq_add_script_test(NAME it_worker_sql_own_row_least_priv
                   SCRIPT it_sql_own_row.sh TIMEOUT 120 ${_r})
# Issue 20, finding 5: a saturated worker keeps reading its LISTEN
# connection. RUN_SERIAL: pg_notification_queue_usage() is one figure for
# the whole server, which other tests' listeners would move.
oq_add_script_test(NAME it_worker_notify_backlog SCRIPT it_notify_backlog.sh
                   TIMEOUT 90 RUN_SERIAL ${_n})
oq_add_script_test(NAME it_worker_fence_grace SCRIPT it_fence_grace.sh
                   TIMEOUT 60 ${_n})
# Issue 22, item 1: three workers share 60 slow items, none holding more
# than its executors can start within the claim horizon.
oq_add_script_test(NAME it_worker_fair SCRIPT it_fair.sh TIMEOUT 60 ${_n})
