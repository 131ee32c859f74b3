# The --http handler (worker/src/handler_http.c). Both are unit tests: no
# database; http_handler runs its own HTTP server (libmicrohttpd) on
# 127.0.0.1 inside the test process.
oq_add_test(unit_worker_http_retry_after LABEL unit TIMEOUT 30
            SOURCES http_retry_after.c)
target_link_libraries(unit_worker_http_retry_after PRIVATE onceq_worker_core)

oq_add_test(unit_worker_http_handler LABEL unit TIMEOUT 60 SOURCES http_handler.c)
# its test server calls libmicrohttpd functions the daemons do not use (the
# daemons load the library on first use: common/src/lazylib.h)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
target_link_libraries(unit_worker_http_handler PRIVATE onceq_worker_core PkgConfig::MHD)
# its getaddrinfo wrapper must be the one the dlopen'ed libcurl calls
set_target_properties(unit_worker_http_handler PROPERTIES ENABLE_EXPORTS ON)
