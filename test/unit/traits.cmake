# The engine trait table (onceq/traits.h), the ONCEQ_ENGINE_TRAITS rule and
# the per-statement migration splitter (internal, hence INTERNAL). No
# database.
oq_add_test(unit_lib_traits LABEL unit TIMEOUT 30 SOURCES traits.c INTERNAL)
