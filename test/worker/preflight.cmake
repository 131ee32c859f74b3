# The worker's start-up checks (worker/src/preflight.c) that need no
# database; the --sql PREPARE check runs in test/badinput.
oq_add_test(unit_worker_preflight LABEL unit TIMEOUT 60 SOURCES preflight.c)
target_link_libraries(unit_worker_preflight PRIVATE onceq_worker_core)

# Claims sized by the work (worker/src/claim_size.c).
oq_add_test(unit_worker_claim_size LABEL unit TIMEOUT 30 SOURCES claim_size.c)
target_link_libraries(unit_worker_claim_size PRIVATE onceq_worker_core)

# The claim loop's wait after a short claim (worker/src/jobs.c,
# wk_wait_settled): a job that settled before the wait ends it at once.
oq_add_test(unit_worker_wait_settled LABEL unit TIMEOUT 30
            SOURCES wait_settled.c)
target_link_libraries(unit_worker_wait_settled PRIVATE onceq_worker_core)

# A claim that brings an item a job of the same session already holds (an
# earlier claim's commit lost in a crash): the running job stays the only
# one (worker/src/jobs.c, wk_jobs_push); the held-id table behind it.
oq_add_test(unit_worker_jobs_reclaim LABEL unit TIMEOUT 30
            SOURCES jobs_reclaim.c)
target_link_libraries(unit_worker_jobs_reclaim PRIVATE onceq_worker_core)
