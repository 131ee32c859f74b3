# The worker's start-up checks (worker/src/preflight.c) that need no
# database; the --sql PREPARE check runs in test/badinput.
oq_add_test(unit_worker_preflight LABEL unit TIMEOUT 60 SOURCES preflight.c)
target_link_libraries(unit_worker_preflight PRIVATE onceq_worker_core)
