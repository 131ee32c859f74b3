# The ack semantics suite: each file is one test executable, run against a
# private database from the harness (ONCEQ_TEST_DSN), under whichever
# isolation ONCEQ_TEST_ISOLATION names. Shared helpers: sem_util.h.
oq_add_test(it_lib_concurrent_ack LABEL integration TIMEOUT 120
            SOURCES concurrent_ack.c)
oq_add_test(it_lib_reap_releases LABEL integration TIMEOUT 120
            SOURCES reap_releases.c INTERNAL)
oq_add_test(it_lib_enqueue_tx LABEL integration TIMEOUT 120 SOURCES enqueue_tx.c)
oq_add_test(it_lib_unique_key LABEL integration TIMEOUT 120 SOURCES unique_key.c)
oq_add_test(it_lib_poison LABEL integration TIMEOUT 120 SOURCES poison.c)
oq_add_test(it_lib_history LABEL integration TIMEOUT 120 SOURCES history.c)
oq_add_test(it_lib_ack_many LABEL integration TIMEOUT 120 SOURCES ack_many.c)
oq_add_test(it_lib_claim_queues LABEL integration TIMEOUT 120
            SOURCES claim_queues.c INTERNAL)
oq_add_test(it_lib_transact LABEL integration TIMEOUT 120 SOURCES transact.c
            INTERNAL)
# A handler that deletes or unclaims its own onceq_items row: a failed
# attempt, not a lost claim (issue 20, finding 3).
oq_add_test(it_lib_ack_own_row LABEL integration TIMEOUT 60
            SOURCES ack_own_row.c)
# The same two as the least-privilege worker role (oq_add_role_test).
oq_add_role_test(it_lib_ack_many_least_priv it_lib_ack_many)
oq_add_role_test(it_lib_ack_own_row_least_priv it_lib_ack_own_row)
oq_add_test(it_lib_payload_limit LABEL integration TIMEOUT 60
            SOURCES payload_limit.c)
# The calls onceq push, cancel and retry and the coordinator's retention
# make (issue 24: the library owns the queue's writes).
oq_add_test(it_lib_operator_calls LABEL integration TIMEOUT 60
            SOURCES operator_calls.c)
# Default item ids are version 7 UUIDs, growing with time (schema v10).
oq_add_test(it_lib_item_ids LABEL integration TIMEOUT 60 SOURCES item_ids.c)
# The calls `onceq schedule` and the coordinator's leader make on their
# own tables: schedules, the lease, the webhook's marks (issue 24).
oq_add_test(it_lib_coord_calls LABEL integration TIMEOUT 60
            SOURCES coord_calls.c)
# Ordering keys: per-key heads, strict order past failures, several
# workers acknowledging in enqueue order (issue 23 item 1).
oq_add_test(it_lib_ordering LABEL integration TIMEOUT 60 SOURCES ordering.c
            INTERNAL)
# The batched --sql ack claims a key's next item in its transaction
# (issue 23, the keyed targets).
oq_add_test(it_lib_ack_next LABEL integration TIMEOUT 60 SOURCES ack_next.c)
# Pause and resume a queue (issue 23 item 2).
oq_add_test(it_lib_queue_pause LABEL integration TIMEOUT 60
            SOURCES queue_pause.c INTERNAL)
# A queue's fleet-wide concurrency limit (issue 23 item 3).
oq_add_test(it_lib_queue_limit LABEL integration TIMEOUT 90
            SOURCES queue_limit.c INTERNAL)
# A queue's fleet-wide rate limit (issue 23 item 4).
oq_add_test(it_lib_queue_rate LABEL integration TIMEOUT 90
            SOURCES queue_rate.c INTERNAL)
# A claim racing the reap of its session leaves no item claimed by a
# session whose row is gone (issue 22 item 2: schema v8's session lock).
oq_add_test(it_lib_claim_reap_race LABEL integration TIMEOUT 60
            SOURCES claim_reap_race.c)
# The reap releases the items of a session row deleted by hand, within a
# bounded time, reading the claim index once per session (the sweep runs on
# every reap of every worker).
oq_add_test(it_lib_reap_orphans LABEL integration TIMEOUT 60
            SOURCES reap_orphans.c INTERNAL)
# The worker's reconciliation sweep while an ack takes next items: only
# keyed claims wait for a later sweep (worker/src/reconcile.c).
oq_add_test(it_worker_reconcile_next LABEL integration TIMEOUT 60
            SOURCES reconcile_next.c)
target_link_libraries(it_worker_reconcile_next PRIVATE onceq_worker_core)
# The statements that name a session's items by id find them by the
# primary key after an unclaimed backlog was analyzed (dialect.c,
# STILL_CLAIMED), and do their work against that state.
oq_add_test(it_lib_ack_plan LABEL integration TIMEOUT 60
            SOURCES ack_plan.c INTERNAL)
# The keyed claim's "no earlier item" probe stays one descent per
# candidate after a backlog without keys was analyzed (dialect.c,
# KEY_FRONT), runs once per key of the front walk's window (a hashed
# filter, the same candidates), is not followed by the loose scan when
# the window held the whole queue, and the claims take each key's first
# item in that state;
# the unkeyed claim and the ack's next-item statement keep their plans
# after all-keyed and all-claimed statistics.
oq_add_test(it_lib_keyed_claim_plan LABEL integration TIMEOUT 60
            SOURCES keyed_claim_plan.c INTERNAL)
# A claim planned while the table was empty (a worker started before its
# items) still walks the ready index once they come (db_tx.c's settings).
oq_add_test(it_lib_cold_plan LABEL integration TIMEOUT 60
            SOURCES cold_plan.c INTERNAL)
# The blocked-key count (query/src/qstats.c) stays one descent per failed
# item after a drain was analyzed without a VACUUM, and counts right there.
oq_add_test(it_cli_blocked_plan LABEL integration TIMEOUT 60
            SOURCES blocked_plan.c)
target_link_libraries(it_cli_blocked_plan PRIVATE onceq_query)
