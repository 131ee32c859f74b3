# Ambiguous commit: the connection drops around the ack's COMMIT (through
# the cutproxy fault proxy) and oq_ack must reconcile, never re-run blindly.
oq_add_test(it_lib_ambiguous_commit LABEL integration TIMEOUT 120
            SOURCES ambiguous_commit.c)
target_link_libraries(it_lib_ambiguous_commit PRIVATE oq_cutproxy_lib)
# case cancelled-cli runs the real `onceq cancel`
target_compile_definitions(it_lib_ambiguous_commit PRIVATE
  OQ_CLI_BIN="$<TARGET_FILE:onceq>")
add_dependencies(it_lib_ambiguous_commit onceq)
# The same as the least-privilege worker role: reconciling reads
# onceq_dead, which the grants once did not allow (issue 20, finding 4).
oq_add_role_test(it_lib_ambiguous_commit_least_priv it_lib_ambiguous_commit)

# The fault proxy itself (raw libpq), including the standalone binary.
oq_add_test(it_lib_cutproxy LABEL integration TIMEOUT 120
            SOURCES cutproxy_selftest.c)
target_link_libraries(it_lib_cutproxy PRIVATE oq_cutproxy_lib)
target_compile_definitions(it_lib_cutproxy PRIVATE
  OQ_CUTPROXY_BIN="$<TARGET_FILE:oq_cutproxy>")
add_dependencies(it_lib_cutproxy oq_cutproxy)
