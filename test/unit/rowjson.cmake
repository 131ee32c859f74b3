# The --sql handler's result as JSON (lib/src/rowjson.c), no database.
oq_add_test(unit_lib_rowjson LABEL unit SOURCES rowjson.c INTERNAL)
