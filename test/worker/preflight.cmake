# The worker's start-up checks (worker/src/preflight.c) that need no
# database; the --sql PREPARE check runs in test/badinput.
oq_add_test(unit_worker_preflight LABEL unit TIMEOUT 60 SOURCES preflight.c)
target_link_libraries(unit_worker_preflight PRIVATE onceq_worker_core)

# How much the claim stream holds at a rate (worker/src/worker.c).
oq_add_test(unit_worker_hold LABEL unit TIMEOUT 30 SOURCES hold.c)
target_link_libraries(unit_worker_hold PRIVATE onceq_worker_core)
