# Operator CLI tests (LABEL integration): bash scripts that run the real
# `onceq` binary (and onceq-worker where a running item is needed) against a
# private database from the harness (ONCEQ_TEST_DSN), under
# ONCEQ_TEST_ISOLATION. Shared plumbing: test/harness/oq_harness.sh. Each
# script skips (77) without a database.
set(_n NEEDS onceq onceq-worker LABELS integration)
oq_add_script_test(NAME it_cli_push_single SCRIPT cli_push_single.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_cli_push_bulk SCRIPT cli_push_bulk.sh TIMEOUT 240 ${_n})
oq_add_script_test(NAME it_cli_push_bad_line SCRIPT cli_push_bad_line.sh TIMEOUT 120 ${_n})
oq_add_script_test(NAME it_cli_push_too_large SCRIPT cli_push_too_large.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_cli_push_progress SCRIPT cli_push_progress.sh TIMEOUT 120 ${_n})
oq_add_script_test(NAME it_cli_ops SCRIPT cli_ops.sh TIMEOUT 120 ${_n})
oq_add_script_test(NAME it_cli_cancel_running SCRIPT cli_cancel_running.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_cli_bad_input SCRIPT cli_bad_input.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_cli_keys SCRIPT cli_keys.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_cli_push_keys SCRIPT cli_push_keys.sh TIMEOUT 60 ${_n})
oq_add_script_test(NAME it_cli_pause SCRIPT cli_pause.sh TIMEOUT 90 ${_n})
oq_add_script_test(NAME it_cli_limit SCRIPT cli_limit.sh TIMEOUT 120 ${_n})
