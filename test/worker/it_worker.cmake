# onceq-worker integration tests (LABEL integration): bash scripts that run
# the real daemon as child processes against a private database from the
# harness (ONCEQ_TEST_DSN), under ONCEQ_TEST_ISOLATION. Shared plumbing:
# it_lib.sh. Each script skips (77) without a database.
#
# RUN_SERIAL: it_worker_pg_restart and it_worker_outage stop the shared
# server, so nothing may run beside them; the timing assertions (wake-up
# latency, reaping, SIGSTOP past expiry, fencing) want a quiet machine too.
# The fault tests (outage, blackhole, lost claim reply) share
# it_fault_lib.sh and drive the fault proxy oq_cutproxy (ONCEQ_CUTPROXY).
if(TARGET onceq-worker AND TARGET onceq)
  set(_it_env
      "ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>"
      "ONCEQ_CLI=$<TARGET_FILE:onceq>")
  if(TARGET oq_cutproxy)
    list(APPEND _it_env "ONCEQ_CUTPROXY=$<TARGET_FILE:oq_cutproxy>")
  endif()
  # name|script|timeout (s)|RUN_SERIAL
  set(_it_tests
      "it_worker_sql|it_sql_handler.sh|90|FALSE"
      "it_worker_exec|it_exec_handler.sh|90|FALSE"
      "it_worker_http|it_http_retry.sh|90|FALSE"
      "it_worker_sigterm|it_sigterm.sh|90|FALSE"
      "it_worker_sigkill|it_sigkill.sh|300|TRUE"
      "it_worker_sigstop|it_sigstop.sh|120|TRUE"
      "it_worker_pg_restart|it_pg_restart.sh|150|TRUE"
      "it_worker_notify|it_notify.sh|60|TRUE"
      "it_worker_bad_flags|it_bad_flags.sh|60|FALSE"
      "it_worker_metrics|it_metrics.sh|60|FALSE"
      "it_worker_outage|it_outage.sh|300|TRUE"
      "it_worker_blackhole|it_blackhole.sh|240|TRUE"
      "it_worker_lost_claim_reply|it_lost_claim_reply.sh|120|TRUE")
  foreach(_t IN LISTS _it_tests)
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
                         ENVIRONMENT "${_it_env}")
  endforeach()
endif()
