# `onceq wait` and `onceq push --wait` (issue 11): exit codes and output
# against real workers; see cli_wait.sh.
oq_add_script_test(NAME it_cli_wait SCRIPT cli_wait.sh
                   LABELS integration TIMEOUT 120 NEEDS onceq onceq-worker)
