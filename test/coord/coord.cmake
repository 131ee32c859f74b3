# `onceq stats`, `onceq schedule` and the `onceq coordinator` daemon.
#
# Unit (no database): the cron parser and next-occurrence walk, compiled
# straight from common/src.
oq_add_test(unit_coord_cron LABEL unit
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/cron_unit.c
                    ${PROJECT_SOURCE_DIR}/common/src/cron.c)
target_include_directories(unit_coord_cron PRIVATE
                           ${PROJECT_SOURCE_DIR}/common/src)

# Integration, C: four firers race co_schedule_fire_due on one schedule;
# each occurrence must be enqueued once (the compare-and-set). Linked
# against the coordinator's library (onceq_coordinator), whose module
# headers are private to it: the test reaches into schedule.h.
oq_add_test(it_coord_schedule_race LABEL integration TIMEOUT 120
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/schedule_race.c)
target_include_directories(it_coord_schedule_race PRIVATE
                           ${PROJECT_SOURCE_DIR}/coordinator/src)
target_link_libraries(it_coord_schedule_race PRIVATE onceq_coordinator
                      Threads::Threads m)

# Integration (LABEL integration): bash scripts that run the real `onceq`
# binary against a private database per test from the harness
# (ONCEQ_TEST_DSN), under ONCEQ_TEST_ISOLATION. Shared plumbing:
# test/harness/oq_harness.sh. Each script skips (77) without a database.
#
# RUN_SERIAL: the failover and schedule tests time a takeover (expiry +
# one interval); they want a quiet machine.
set(_n NEEDS onceq LABELS integration)
oq_add_script_test(NAME it_coord_stats SCRIPT it_stats.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_coord_blocked_keys SCRIPT it_blocked_keys.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_coord_failover SCRIPT it_failover.sh TIMEOUT 90
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_coord_retention SCRIPT it_retention.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_coord_webhook SCRIPT it_webhook.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_coord_webhook_slow SCRIPT it_webhook_slow.sh
                   TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_coord_schedule SCRIPT it_schedule.sh TIMEOUT 120
                   RUN_SERIAL ${_n})
oq_add_script_test(NAME it_coord_bad_input SCRIPT it_bad_input.sh TIMEOUT 60 ${_n})
