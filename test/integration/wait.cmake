# Results and waiting (issue 11): oq_wait against the harness database,
# under ONCEQ_TEST_ISOLATION.
oq_add_test(it_lib_wait_results LABEL integration TIMEOUT 120
            SOURCES wait_results.c)
