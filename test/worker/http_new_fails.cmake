# wk_http_new failing (issue 20: an executor dereferenced its NULL on the
# first item): onceq-worker rebuilt with a fault hook (http_new_fails.c)
# that makes the first OQT_HTTP_NEW_FAILS calls return NULL.
if(TARGET onceq-worker AND TARGET onceq)
  add_executable(oqt_worker_http_new_fails
                 ${PROJECT_SOURCE_DIR}/worker/src/main.c http_new_fails.c)
  target_link_libraries(oqt_worker_http_new_fails PRIVATE onceq_worker_core)
  target_link_options(oqt_worker_http_new_fails PRIVATE
                      "-Wl,--wrap=wk_http_new")
  oq_add_script_test(NAME it_worker_http_new_fails SCRIPT it_http_new_fails.sh
                     TIMEOUT 60 NEEDS onceq-worker onceq LABELS integration
                     ENVIRONMENT
                     "OQT_FAULTY_WORKER=$<TARGET_FILE:oqt_worker_http_new_fails>")
endif()
