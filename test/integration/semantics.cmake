# The ack semantics suite: each file is one test executable, run against a
# private database from the harness (ONCEQ_TEST_DSN), under whichever
# isolation ONCEQ_TEST_ISOLATION names. Shared helpers: sem_util.h.
oq_add_test(concurrent_ack LABEL integration TIMEOUT 120
            SOURCES concurrent_ack.c)
oq_add_test(reap_releases LABEL integration TIMEOUT 120
            SOURCES reap_releases.c INTERNAL)
oq_add_test(enqueue_tx LABEL integration TIMEOUT 120 SOURCES enqueue_tx.c)
oq_add_test(unique_key LABEL integration TIMEOUT 120 SOURCES unique_key.c)
oq_add_test(poison LABEL integration TIMEOUT 120 SOURCES poison.c)
oq_add_test(history LABEL integration TIMEOUT 120 SOURCES history.c)
oq_add_test(ack_many LABEL integration TIMEOUT 120 SOURCES ack_many.c)
oq_add_test(claim_queues LABEL integration TIMEOUT 120
            SOURCES claim_queues.c INTERNAL)
