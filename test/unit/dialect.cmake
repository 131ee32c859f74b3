# The CockroachDB dialect: the SQL text lib/src/dialect.c chooses per engine
# and the embedded CockroachDB migration variant (oq__sql, oq__migrations:
# internal, hence INTERNAL). No database.
oq_add_test(unit_lib_dialect_crdb LABEL unit TIMEOUT 30 SOURCES dialect_crdb.c
            INTERNAL)
