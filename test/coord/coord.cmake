# `onceq stats`, `onceq schedule` and the `onceq coordinator` daemon.
#
# Unit (no database): the cron parser and next-occurrence walk, compiled
# straight from coordinator/src.
oq_add_test(unit_coord_cron LABEL unit
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/cron_unit.c
                    ${PROJECT_SOURCE_DIR}/coordinator/src/cron.c)
target_include_directories(unit_coord_cron PRIVATE
                           ${PROJECT_SOURCE_DIR}/coordinator/src)

# Integration, C: four firers race co_schedule_fire_due on one schedule;
# each occurrence must be enqueued once (the compare-and-set).
oq_add_test(it_coord_schedule_race LABEL integration TIMEOUT 120
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/schedule_race.c
                    ${PROJECT_SOURCE_DIR}/coordinator/src/schedule.c
                    ${PROJECT_SOURCE_DIR}/coordinator/src/codb.c
                    ${PROJECT_SOURCE_DIR}/coordinator/src/cron.c)
target_include_directories(it_coord_schedule_race PRIVATE
                           ${PROJECT_SOURCE_DIR}/coordinator/src)
target_link_libraries(it_coord_schedule_race PRIVATE Threads::Threads m)

# Integration (LABEL integration): bash scripts that run the real `onceq`
# binary against a private database per test from the harness
# (ONCEQ_TEST_DSN), under ONCEQ_TEST_ISOLATION. Shared plumbing:
# coord_lib.sh. Each script skips (77) without a database.
#
# RUN_SERIAL: the failover and schedule tests time a takeover (expiry +
# one interval); they want a quiet machine.
if(TARGET onceq)
  set(_coord_env "ONCEQ_CLI=$<TARGET_FILE:onceq>")
  # name|script|timeout (s)|RUN_SERIAL
  set(_coord_tests
      "it_coord_stats|it_stats.sh|90|FALSE"
      "it_coord_failover|it_failover.sh|90|TRUE"
      "it_coord_retention|it_retention.sh|90|FALSE"
      "it_coord_webhook|it_webhook.sh|90|FALSE"
      "it_coord_schedule|it_schedule.sh|120|TRUE"
      "it_coord_bad_input|it_bad_input.sh|60|FALSE")
  foreach(_t IN LISTS _coord_tests)
    string(REPLACE "|" ";" _t "${_t}")
    list(GET _t 0 _name)
    list(GET _t 1 _script)
    list(GET _t 2 _timeout)
    list(GET _t 3 _serial)
    add_test(NAME ${_name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${_script})
    set_tests_properties(${_name} PROPERTIES
                         LABELS integration TIMEOUT ${_timeout}
                         SKIP_RETURN_CODE 77 RUN_SERIAL ${_serial}
                         ENVIRONMENT "${_coord_env}")
  endforeach()
endif()
