# Unit tests: no database, public API only.
oq_add_test(unit_lib_backoff LABEL unit SOURCES backoff.c)
oq_add_test(unit_lib_conninfo_mask LABEL unit SOURCES conninfo_mask.c)
oq_add_test(unit_lib_strerror LABEL unit SOURCES strerror.c)
oq_add_test(unit_lib_session_validate LABEL unit SOURCES session_validate.c)
oq_add_test(unit_lib_sqlstate LABEL unit SOURCES sqlstate.c INTERNAL)
oq_add_test(unit_lib_text LABEL unit SOURCES text.c)
