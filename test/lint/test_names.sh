#!/usr/bin/env bash
# test_names.sh BUILD_DIR: every ctest name in BUILD_DIR follows
# <kind>_<area>_<what> (docs/testing.md, "Naming"; the regex is
# OQ_TEST_NAME_REGEX in test/cmake/oq_script_test.cmake), so that the kind
# says what a test needs and `./test/run.sh --one` names are guessable.
set -euo pipefail
build=${1:?usage: test_names.sh BUILD_DIR}
re='^(unit|it|chaos|model|fuzz|lint)_(lib|worker|cli|coord|deploy|readme|pkg)_[a-z0-9_]+$'
names=$(ctest --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$names" ] || { echo "FAIL: ctest lists no test in $build" >&2; exit 1; }
bad=$(grep -Ev -- "$re" <<<"$names" || true)
dups=$(sort <<<"$names" | uniq -d)
if [ -n "$bad" ] || [ -n "$dups" ]; then
  [ -z "$bad" ] || printf 'FAIL: not <kind>_<area>_<what>:\n%s\n' "$(sed 's/^/  /' <<<"$bad")" >&2
  [ -z "$dups" ] || printf 'FAIL: registered twice:\n%s\n' "$(sed 's/^/  /' <<<"$dups")" >&2
  echo "kinds: unit it chaos model fuzz lint; areas: lib worker cli coord deploy readme pkg (docs/testing.md)" >&2
  exit 1
fi
echo "PASS lint_pkg_test_names: $(wc -l <<<"$names") tests, every name <kind>_<area>_<what>"
