# Bad input: wrong conninfo/password/schema/settings/payload give the right
# oq_err code and a one-line message that names the fix, never a password.
oq_add_test(it_lib_bad_input LABEL integration TIMEOUT 120 SOURCES bad_input.c)
# The CockroachDB migration runner (statement at a time, refused zone
# settings skipped with a warning), on a real server.
oq_add_test(it_lib_migrate_statements LABEL integration TIMEOUT 60
            SOURCES migrate_statements.c INTERNAL)
