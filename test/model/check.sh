#!/usr/bin/env bash
# test/model/check.sh: model-check onceq's protocol (test/model/onceq.pml)
# with spin and a pan verifier compiled by gcc. docs/model.md says what the
# model holds and how it maps to the code.
#
#   test/model/check.sh [WORKDIR]
#
# Runs, each exhaustively (no bitstate, so "errors: 0" covers every
# reachable state of the configuration):
#   safety     unpartitioned, 2 faults: the assertions (one ack per item, no
#              ack by a reaped session) and no invalid end state
#   safety     partitioned, 1 fault: the same plus "a part never has two
#              owners" and "a claim through a part is made by its owner"
#   liveness   unpartitioned and partitioned, 1 fault: <> every item acked
#              or dead, under weak fairness (pan -a -f)
#   broken     -DNOCLAIMCHECK (the ack's DELETE without "AND claim =
#              $session"): pan MUST report an assertion violation, and the
#              trail must replay in spin
#   broken     -DNORECONCILE (no reconciliation sweep): pan MUST report an
#              acceptance cycle (an item stranded forever)
#   broken     -DNOSESSIONLOCK (the claim reads its session row without
#              locking it, schema v8): pan MUST report the assertion
#              that a claim never commits for a session whose row is gone
#   ordered    -DORDERED (both items share an ordering key): safety with 2
#              faults, partitioned with 1 (the key spans both parts), and
#              liveness with 1: item 1 is acknowledged only after item 0
#              ended, across reaps; -DNOKEYHEAD (the claim without the key
#              predicate) MUST report an assertion violation
# Prints the state counts of each run. Exit 0 if all hold, 1 if not, 77
# (skipped) if spin or gcc is missing outside CI (test/run.sh installs spin).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
MODEL=$HERE/onceq.pml
WORK=${1:-$(mktemp -d /tmp/onceq-model.XXXXXX)}
mkdir -p "$WORK"

for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
      echo "model: $tool is missing (test/run.sh installs it)" >&2
      exit 1
    fi
    echo "model: $tool is not installed; skipped (apt-get install spin)"
    exit 77
  fi
done

FAILS=0
fail() {
  echo "model: FAIL: $*" >&2
  FAILS=$((FAILS + 1))
}

# verify NAME EXPECT "SPIN -D FLAGS" "PAN ARGS": build and run one pan.
# EXPECT is "ok" (errors: 0) or a regex that pan's output must match with
# errors: 1 (the broken variants).
verify() {
  local name=$1 expect=$2 dflags=$3 panargs=$4 cflags="-DSAFETY"
  local dir="$WORK/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$MODEL" "$dir/onceq.pml"
  case " $panargs " in *" -a "*) cflags="-DNFAIR=3" ;; esac
  local t0=$SECONDS out
  # shellcheck disable=SC2086 # flag lists
  (cd "$dir" && spin -a $dflags onceq.pml >spin.log 2>&1) || {
    cat "$dir/spin.log" >&2
    fail "$name: spin -a $dflags failed"
    return 0
  }
  # shellcheck disable=SC2086
  (cd "$dir" && gcc -O2 -w $cflags -DCOLLAPSE -DNOBOUNDCHECK -o pan pan.c) ||
    {
      fail "$name: gcc could not build pan"
      return 0
    }
  # shellcheck disable=SC2086
  out=$(cd "$dir" && ./pan -m300000 $panargs 2>&1) || true
  echo "$out" >"$dir/pan.log"
  local stored errors depth
  stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' <<<"$out")
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out")
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' <<<"$out")
  printf 'model: %-22s %-34s states %-10s depth %-5s errors %s (%ss)\n' \
    "$name" "$dflags $panargs" "${stored:-?}" "${depth:-?}" \
    "${errors:-?}" "$((SECONDS - t0))"
  if grep -q 'Search not completed\|max search depth too small' <<<"$out" &&
    [ "$expect" = ok ]; then
    echo "$out" | tail -n 20 >&2
    fail "$name: the search did not complete"
    return 0
  fi
  if [ "$expect" = ok ]; then
    if [ "${errors:-x}" != 0 ]; then
      echo "$out" | head -n 20 >&2
      (cd "$dir" && spin -t -p -g $dflags onceq.pml 2>&1 | tail -n 60) >&2 ||
        true
      fail "$name: pan found an error (trail replayed above)"
    fi
    return 0
  fi
  if [ "${errors:-0}" = 0 ] || ! grep -Eq "$expect" <<<"$out"; then
    echo "$out" | head -n 20 >&2
    fail "$name: pan did not find the expected counterexample ($expect)"
    return 0
  fi
  # the counterexample must replay in the simulator
  local replay
  # shellcheck disable=SC2086
  replay=$(cd "$dir" && spin -t -p $dflags onceq.pml 2>&1) || true
  echo "$replay" >"$dir/trail.txt"
  if ! grep -Eq 'Error: assertion violated|START OF CYCLE' <<<"$replay"; then
    fail "$name: the trail did not replay (see $dir/trail.txt)"
    return 0
  fi
  echo "model: $name: counterexample found as required:" \
    "$(grep -Eo 'assertion violated.*|acceptance cycle' <<<"$out" | head -n 1)"
  echo "model: $name: trail: $(grep -c '^ *[0-9]*:' <<<"$replay") steps" \
    "(spin -t -p in $dir)"
}

verify safety ok "-DMAXF=2" ""
verify safety_parts ok "-DPARTS -DMAXF=1" ""
verify live ok "-DLIVENESS -DMAXF=1" "-a -f"
verify live_parts ok "-DLIVENESS -DPARTS -DMAXF=1" "-a -f"
verify noclaimcheck 'assertion violated' "-DNOCLAIMCHECK -DMAXF=2" ""
verify noreconcile 'acceptance cycle' "-DLIVENESS -DNORECONCILE -DMAXF=1" \
  "-a -f"
verify ordered ok "-DORDERED -DMAXF=2" ""
verify ordered_parts ok "-DORDERED -DPARTS -DMAXF=1" ""
verify live_ordered ok "-DLIVENESS -DORDERED -DMAXF=1" "-a -f"
verify nokeyhead 'assertion violated' "-DORDERED -DNOKEYHEAD -DMAXF=1" ""
verify nosessionlock 'assertion violated.*db_row' "-DNOSESSIONLOCK -DMAXF=1" ""

if [ $FAILS -ne 0 ]; then
  echo "model: $FAILS check(s) failed (work files in $WORK)" >&2
  exit 1
fi
echo "model: all checks passed"
[ $# -ge 1 ] || rm -rf "$WORK"
