# The fence margin that follows --kill-grace (worker/src/executor.c).
oq_add_test(unit_worker_fence_margin LABEL unit TIMEOUT 30 SOURCES fence_margin.c)
target_link_libraries(unit_worker_fence_margin PRIVATE onceq_worker_core)
