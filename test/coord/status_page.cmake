# The coordinator's status page (issue 11) in headless chromium against a
# known state; skips (77) without a database or chromium.
if(TARGET onceq)
  add_test(NAME it_coord_status_page
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/it_status_page.sh)
  set_tests_properties(it_coord_status_page PROPERTIES
                       LABELS integration TIMEOUT 180 SKIP_RETURN_CODE 77
                       ENVIRONMENT "ONCEQ_CLI=$<TARGET_FILE:onceq>")
endif()

# --keep-results retention of onceq_results.
if(TARGET onceq)
  add_test(NAME it_coord_results_retention
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/it_results_retention.sh)
  set_tests_properties(it_coord_results_retention PROPERTIES
                       LABELS integration TIMEOUT 90 SKIP_RETURN_CODE 77
                       ENVIRONMENT "ONCEQ_CLI=$<TARGET_FILE:onceq>")
endif()
