# Results and waiting (issue 11): oq_wait against the harness database,
# under ONCEQ_TEST_ISOLATION.
oq_add_test(it_lib_wait_results LABEL integration TIMEOUT 120
            SOURCES wait_results.c)
# Issue 20, finding 8: 50 waiters under ~2,000 completions/s; counts the
# statements they send (a test hook on the handle, hence INTERNAL).
oq_add_test(it_lib_wait_fanout LABEL integration TIMEOUT 120 INTERNAL
            SOURCES wait_fanout.c)
