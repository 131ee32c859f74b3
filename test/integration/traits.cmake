# The engine traits in force on a live connection (onceq/traits.h): in the
# CockroachDB-traits pass of test/run.sh it fails unless the switch is on.
oq_add_test(it_lib_engine_traits LABEL integration TIMEOUT 60
            SOURCES engine_traits.c INTERNAL)
# What pooler support shows on a direct connection: not taken for pooled,
# per-connection statement names, per-statement asynchronous commits.
oq_add_test(it_lib_pooled_conn LABEL integration TIMEOUT 60
            SOURCES pooled_conn.c INTERNAL)
# A multi-host conninfo whose first host is silent: a reconnect, and a new
# handle sharing oq_db_opts.host_hint, start at the host that answered.
oq_add_test(it_lib_multihost_first LABEL integration TIMEOUT 60
            SOURCES multihost_first.c)
