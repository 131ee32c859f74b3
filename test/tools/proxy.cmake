# The fault-injection proxy (cutproxy): a static library that tests start
# in-process, and oq_cutproxy, its standalone front end for shell tests.
add_library(oq_cutproxy_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/cutproxy.c)
target_include_directories(oq_cutproxy_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(oq_cutproxy_lib PUBLIC Threads::Threads)

add_executable(oq_cutproxy ${CMAKE_CURRENT_LIST_DIR}/cutproxy_main.c)
target_link_libraries(oq_cutproxy PRIVATE oq_cutproxy_lib)
