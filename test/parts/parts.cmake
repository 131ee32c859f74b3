# Static partition assignment (docs/design.md §5, issue 5). C tests drive the
# library directly; the shell tests run real onceq-worker processes
# (test/harness/oq_harness.sh plumbing) and are labelled slow as well.
oq_add_test(unit_lib_parts_map LABEL unit SOURCES parts_map.c)
oq_add_test(it_lib_parts_assign LABEL integration TIMEOUT 180 SOURCES parts_assign.c
            INTERNAL)
oq_add_test(it_lib_parts_rules LABEL integration TIMEOUT 180 SOURCES parts_rules.c)
oq_add_test(it_lib_parts_explain LABEL integration TIMEOUT 120
            SOURCES parts_explain.c INTERNAL)
oq_add_script_test(NAME it_worker_parts_churn SCRIPT parts_churn.sh
                   LABELS integration slow TIMEOUT 600 RUN_SERIAL
                   NEEDS onceq-worker onceq)
oq_add_script_test(NAME it_worker_parts_resize SCRIPT parts_resize.sh
                   LABELS integration slow TIMEOUT 600 RUN_SERIAL
                   NEEDS onceq-worker onceq)
