# Worker metrics: rendering, the /metrics + /healthz server (libcurl on
# 127.0.0.1) and lock-free updates under contention. No database.
oq_add_test(unit_worker_metrics LABEL unit TIMEOUT 60 SOURCES metrics.c)
target_link_libraries(unit_worker_metrics PRIVATE onceq_worker_core)
