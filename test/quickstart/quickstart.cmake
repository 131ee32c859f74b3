# The README's first command, end to end: test_quickstart.sh runs
# ./deploy/quickstart.sh from the repository root twice (a fresh run, then a
# re-run that reuses the running server), then `deploy/quickstart.sh stop`.
# It starts its own PostgreSQL 15 (the script's), so it needs no
# ONCEQ_TEST_DSN, and it uses the binaries of this build tree
# (ONCEQ_QUICKSTART_BUILD) instead of building build/quickstart.
# Labels: readme, so test/run.sh runs it once (default build, pass 2) rather
# than in every integration pass; quickstart, to run it alone:
#   ctest --test-dir build/default -L quickstart --output-on-failure
oq_add_script_test(NAME it_deploy_quickstart SCRIPT test_quickstart.sh
                   LABELS readme quickstart TIMEOUT 900 RUN_SERIAL
                   NEEDS onceq-worker
                   ENVIRONMENT "ONCEQ_QUICKSTART_BUILD=${CMAKE_BINARY_DIR}")
