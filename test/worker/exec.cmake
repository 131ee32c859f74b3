# The --exec handler (worker/src/handler_exec.c): no database; runs /bin/sh
# snippets as children.
oq_add_test(unit_worker_exec_handler LABEL unit TIMEOUT 60 SOURCES exec_handler.c)
target_link_libraries(unit_worker_exec_handler PRIVATE onceq_worker_core)
