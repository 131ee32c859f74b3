# Static partition assignment (docs/design.md §5, issue 5). C tests drive the
# library directly; the shell tests run real onceq-worker processes
# (test/worker/it_lib.sh plumbing) and are labelled slow as well.
oq_add_test(unit_parts_map LABEL unit SOURCES parts_map.c)
oq_add_test(parts_assign LABEL integration TIMEOUT 180 SOURCES parts_assign.c
            INTERNAL)
oq_add_test(parts_rules LABEL integration TIMEOUT 180 SOURCES parts_rules.c)
oq_add_test(parts_explain LABEL integration TIMEOUT 120
            SOURCES parts_explain.c INTERNAL)
if(TARGET onceq-worker AND TARGET onceq)
  foreach(_t parts_churn parts_resize)
    add_test(NAME ${_t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${_t}.sh)
    set_tests_properties(${_t} PROPERTIES
      LABELS "integration;slow" TIMEOUT 600 SKIP_RETURN_CODE 77
      RUN_SERIAL TRUE
      ENVIRONMENT "ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>;ONCEQ_CLI=$<TARGET_FILE:onceq>")
  endforeach()
endif()
