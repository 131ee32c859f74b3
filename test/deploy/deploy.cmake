# The deploy files, validated without a Docker engine, a cluster or systemd
# as PID 1 (python3 scripts run through pyrun.sh; shared code in
# deploylib.py). Every check also runs on deliberately broken copies of its
# input and fails if those pass.
#
# LABEL unit (no database), registered in the plain build only: they read
# files, not the build's code, so the sanitizer builds would only repeat
# them (and the library check would see the sanitizer runtimes):
#   unit_deploy_compose
#                      docker-compose.yml: `docker-compose config` (Debian's
#                      docker-compose 1.29), alone and --profile postgres;
#                      services, scalable worker, health checks, 127.0.0.1
#   unit_deploy_dockerfile
#                      deploy/Dockerfile: stages, packages, non-root user,
#                      copied binaries; the built binaries' shared
#                      libraries all come from the runtime packages
#   unit_deploy_systemd
#                      deploy/systemd: drain settings vs the worker's flags;
#                      `systemd-analyze verify` on copies pointing at the
#                      built binaries (skipped where it is not installed)
#   unit_deploy_k8s
#                      deploy/k8s: YAML, probes, grace period, secretKeyRef
# LABEL integration (ONCEQ_TEST_DSN; every build):
#   it_deploy_systemd_drain
#                      the worker started as onceq-worker@.service starts
#                      it, stopped with its KillSignal: a clean drain within
#                      TimeoutStopSec (and KillMode=control-group's stop
#                      shown to break it)
#   it_deploy_compose_pg_stack
#                      the compose file's postgres profile without
#                      Docker: its init SQL, migrate and 3 workers (its own
#                      commands), its health check, exactly-once ledger,
#                      stop within stop_grace_period
# Needs python3 with yaml (Debian python3-yaml), docker-compose and systemd
# (systemd-analyze), all in Debian 12.
set(_oq_pyrun RUNNER bash ${CMAKE_CURRENT_LIST_DIR}/pyrun.sh)
set(_oq_pyrun_yaml RUNNER bash ${CMAKE_CURRENT_LIST_DIR}/pyrun.sh --yaml)

if(NOT ONCEQ_SANITIZER)
  set(_n LABELS unit TIMEOUT 180)
  oq_add_script_test(NAME unit_deploy_compose SCRIPT check_compose.py
                     ${_oq_pyrun_yaml} ${_n})
  oq_add_script_test(NAME unit_deploy_k8s SCRIPT check_k8s.py ${_oq_pyrun_yaml} ${_n})
  oq_add_script_test(NAME unit_deploy_dockerfile SCRIPT check_dockerfile.py
                     ARGS --binary $<TARGET_FILE:onceq-worker>
                          --binary $<TARGET_FILE:onceq>
                     ${_oq_pyrun} ${_n} NEEDS onceq-worker onceq)
  oq_add_script_test(NAME unit_deploy_systemd SCRIPT check_systemd.py
                     ARGS --worker $<TARGET_FILE:onceq-worker>
                          --cli $<TARGET_FILE:onceq>
                     ${_oq_pyrun} ${_n} NEEDS onceq-worker onceq)
endif()

set(_n LABELS integration TIMEOUT 180 NEEDS onceq-worker onceq)
oq_add_script_test(NAME it_deploy_systemd_drain SCRIPT it_systemd_drain.py
                   ${_oq_pyrun} ${_n})
oq_add_script_test(NAME it_deploy_compose_pg_stack SCRIPT it_compose_stack.py
                   ${_oq_pyrun_yaml} ${_n})

# deploy/lib/pglocal.sh (quickstart, test/run.sh, benchmarks) never signals
# a server outside the data folder it is given (LABEL integration: it needs
# the harness server as the stand-in; plain build only, it runs no C).
if(NOT ONCEQ_SANITIZER)
  oq_add_script_test(NAME it_deploy_pglocal_guard SCRIPT pglocal_guard.sh
                     LABELS integration TIMEOUT 60)
endif()
