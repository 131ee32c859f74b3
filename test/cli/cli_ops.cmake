# Operator CLI tests (LABEL integration): bash scripts that run the real
# `onceq` binary (and onceq-worker where a running item is needed) against a
# private database from the harness (ONCEQ_TEST_DSN), under
# ONCEQ_TEST_ISOLATION. Shared plumbing: cli_lib.sh. Each script skips (77)
# without a database.
if(TARGET onceq AND TARGET onceq-worker)
  set(_cli_env
      "ONCEQ_CLI=$<TARGET_FILE:onceq>"
      "ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>")
  # name|timeout (s): the script is test/cli/<name>.sh
  set(_cli_tests
      "cli_push_single|60"
      "cli_push_bulk|240"
      "cli_push_bad_line|120"
      "cli_push_progress|120"
      "cli_ops|120"
      "cli_cancel_running|90"
      "cli_bad_input|60")
  foreach(_t IN LISTS _cli_tests)
    string(REPLACE "|" ";" _t "${_t}")
    list(GET _t 0 _name)
    list(GET _t 1 _timeout)
    add_test(NAME ${_name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${_name}.sh)
    set_tests_properties(${_name} PROPERTIES
                         LABELS integration TIMEOUT ${_timeout}
                         SKIP_RETURN_CODE 77
                         ENVIRONMENT "${_cli_env}")
  endforeach()
endif()
