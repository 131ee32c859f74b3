#!/usr/bin/env bash
# no_dsn_note.sh: ctest runs this before any test (CTEST_CUSTOM_PRE_TEST,
# written by test/cmake/oq_script_test.cmake). Without ONCEQ_TEST_DSN every
# test that needs the database skips, and ctest shows a skip as one word;
# this says why, once. Always exits 0: it never stops a run. Quiet when
# ctest only lists tests (-N, --show-only), whose output tools parse.
[ -z "${ONCEQ_TEST_DSN:-}" ] || exit 0
if [ -r "/proc/$PPID/cmdline" ]; then
  while IFS= read -r -d '' arg; do
    case "$arg" in
    -N | --show-only | --show-only=*) exit 0 ;;
    esac
  done <"/proc/$PPID/cmdline"
fi
cat >&2 <<'NOTE'
*** NOTE: ONCEQ_TEST_DSN is not set: every test that needs the database
*** (it_* and chaos_*) will be reported as "Skipped". To run one of them
*** against a throwaway server:
***     ./test/run.sh --one NAME [--isolation serializable]
*** (docs/testing.md, "Running one test").
NOTE
exit 0
