# Least privilege (issue 13 §6): deploy/grants/postgres.sql's producer,
# worker and coordinator roles run their flows and are refused DDL; see
# cli_grants.sh.
if(TARGET onceq AND TARGET onceq-worker)
  add_test(NAME cli_grants COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli_grants.sh)
  set_tests_properties(cli_grants PROPERTIES
                       LABELS integration TIMEOUT 240 SKIP_RETURN_CODE 77
                       ENVIRONMENT "ONCEQ_CLI=$<TARGET_FILE:onceq>;ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>")
endif()
