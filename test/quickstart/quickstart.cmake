# The README's first command, end to end: test_quickstart.sh runs
# ./deploy/quickstart.sh from the repository root twice (a fresh run, then a
# re-run that reuses the running server), then `deploy/quickstart.sh stop`.
# It starts its own PostgreSQL 15 (the script's), so it needs no
# ONCEQ_TEST_DSN, and it uses the binaries of this build tree
# (ONCEQ_QUICKSTART_BUILD) instead of building build/quickstart.
# Labels: readme, so test/run.sh runs it once (default build, pass 2) rather
# than in every integration pass; quickstart, to run it alone:
#   ctest --test-dir build/default -L quickstart --output-on-failure
if(TARGET onceq-worker)
  add_test(NAME quickstart
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_quickstart.sh)
  set_tests_properties(quickstart PROPERTIES
                       LABELS "readme;quickstart"
                       TIMEOUT 900
                       RUN_SERIAL TRUE
                       SKIP_RETURN_CODE 77
                       ENVIRONMENT "ONCEQ_QUICKSTART_BUILD=${CMAKE_BINARY_DIR}")
endif()
