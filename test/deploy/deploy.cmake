# The deploy files, validated without a Docker engine, a cluster or systemd
# as PID 1 (python3 scripts run through pyrun.sh; shared code in
# deploylib.py). Every check also runs on deliberately broken copies of its
# input and fails if those pass.
#
# LABEL unit (no database), registered in the plain build only: they read
# files, not the build's code, so the sanitizer builds would only repeat
# them (and the library check would see the sanitizer runtimes):
#   deploy_compose     docker-compose.yml: `docker-compose config` (Debian's
#                      docker-compose 1.29), alone and --profile postgres;
#                      services, scalable worker, health checks, 127.0.0.1
#   deploy_dockerfile  deploy/Dockerfile: stages, packages, non-root user,
#                      copied binaries; the built binaries' shared
#                      libraries all come from the runtime packages
#   deploy_systemd     deploy/systemd: drain settings vs the worker's flags;
#                      `systemd-analyze verify` on copies pointing at the
#                      built binaries (skipped where it is not installed)
#   deploy_k8s         deploy/k8s: YAML, probes, grace period, secretKeyRef
# LABEL integration (ONCEQ_TEST_DSN; every build):
#   deploy_systemd_drain  the worker started as onceq-worker@.service starts
#                      it, stopped with its KillSignal: a clean drain within
#                      TimeoutStopSec (and KillMode=control-group's stop
#                      shown to break it)
#   deploy_compose_pg_stack  the compose file's postgres profile without
#                      Docker: its init SQL, migrate and 3 workers (its own
#                      commands), its health check, exactly-once ledger,
#                      stop within stop_grace_period
# Needs python3 with yaml (Debian python3-yaml), docker-compose and systemd
# (systemd-analyze), all in Debian 12.
set(_oq_deploy_dir ${CMAKE_CURRENT_LIST_DIR})
set(_oq_pyrun bash ${_oq_deploy_dir}/pyrun.sh)

if(NOT ONCEQ_SANITIZER)
  add_test(NAME deploy_compose
           COMMAND ${_oq_pyrun} --yaml ${_oq_deploy_dir}/check_compose.py)
  add_test(NAME deploy_k8s
           COMMAND ${_oq_pyrun} --yaml ${_oq_deploy_dir}/check_k8s.py)
  set(_oq_deploy_unit deploy_compose deploy_k8s)
  if(TARGET onceq-worker AND TARGET onceq)
    add_test(NAME deploy_dockerfile
             COMMAND ${_oq_pyrun} ${_oq_deploy_dir}/check_dockerfile.py
                     --binary $<TARGET_FILE:onceq-worker>
                     --binary $<TARGET_FILE:onceq>)
    add_test(NAME deploy_systemd
             COMMAND ${_oq_pyrun} ${_oq_deploy_dir}/check_systemd.py
                     --worker $<TARGET_FILE:onceq-worker>
                     --cli $<TARGET_FILE:onceq>)
    list(APPEND _oq_deploy_unit deploy_dockerfile deploy_systemd)
  endif()
  set_tests_properties(${_oq_deploy_unit} PROPERTIES
                       LABELS unit TIMEOUT 180 SKIP_RETURN_CODE 77)
endif()

if(TARGET onceq-worker AND TARGET onceq)
  set(_oq_deploy_env
      "ONCEQ_WORKER=$<TARGET_FILE:onceq-worker>"
      "ONCEQ_CLI=$<TARGET_FILE:onceq>")
  add_test(NAME deploy_systemd_drain
           COMMAND ${_oq_pyrun} ${_oq_deploy_dir}/it_systemd_drain.py)
  add_test(NAME deploy_compose_pg_stack
           COMMAND ${_oq_pyrun} --yaml ${_oq_deploy_dir}/it_compose_stack.py)
  set_tests_properties(deploy_systemd_drain deploy_compose_pg_stack
                       PROPERTIES
                       LABELS integration TIMEOUT 180 SKIP_RETURN_CODE 77
                       ENVIRONMENT "${_oq_deploy_env}")
endif()

# deploy/lib/pglocal.sh (quickstart, test/run.sh, benchmarks) never signals
# a server outside the data folder it is given (LABEL integration: it needs
# the harness server as the stand-in; plain build only, it runs no C).
if(NOT ONCEQ_SANITIZER)
  add_test(NAME deploy_pglocal_guard
           COMMAND bash ${_oq_deploy_dir}/pglocal_guard.sh)
  set_tests_properties(deploy_pglocal_guard PROPERTIES
                       LABELS integration TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()
