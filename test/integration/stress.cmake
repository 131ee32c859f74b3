# Stress: many workers drain one queue; exactly-once checked by a ledger
# without a unique constraint. Owns stress.c, serializable_retries.c and
# their shared drain_workers.{c,h}.
oq_add_test(it_lib_stress LABEL integration TIMEOUT 600
            SOURCES stress.c drain_workers.c)
# Skips (77) unless ONCEQ_TEST_ISOLATION=serializable.
oq_add_test(it_lib_serializable_retries LABEL integration TIMEOUT 600
            SOURCES serializable_retries.c drain_workers.c)
