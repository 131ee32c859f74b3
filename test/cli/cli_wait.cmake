# `onceq wait` and `onceq push --wait` (issue 11): exit codes and output
# against real workers; see cli_wait.sh.
if(TARGET onceq AND TARGET onceq-worker)
  add_test(NAME cli_wait COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli_wait.sh)
  set_tests_properties(cli_wait PROPERTIES
                       LABELS integration TIMEOUT 120 SKIP_RETURN_CODE 77
                       ENVIRONMENT "ONCEQ_CLI=$<TARGET_FILE:onceq>;ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>")
endif()
