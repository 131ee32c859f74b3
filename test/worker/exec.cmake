# The --exec handler (worker/src/handler_exec.c): no database; runs /bin/sh
# snippets as children.
oq_add_test(wk_exec_handler LABEL unit TIMEOUT 60 SOURCES exec_handler.c)
target_link_libraries(wk_exec_handler PRIVATE onceq_worker_core)
