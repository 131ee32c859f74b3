#!/usr/bin/env bash
# test/fuzz/run.sh: build the libFuzzer targets with clang (ASan+UBSan) and
# run each for a short while, starting from the committed seed corpus.
#
#   test/fuzz/run.sh [--build DIR] [--seconds N] [--only NAME]
#
#   --build DIR    the clang build tree (default: build/fuzz)
#   --seconds N    how long each target runs (default: $ONCEQ_FUZZ_SECONDS,
#                  else 20)
#   --only NAME    one target (duration, cron, conninfo, worker_flags,
#                  retry_after, metrics_addr, push)
#
# The committed corpus is copied first, so a run never changes the tree.
# A crash or a violated property leaves the input in DIR/artifacts/ and the
# run fails: add the input under test/fuzz/regress/NAME/ once fixed (the
# fuzz_replay_NAME unit test then replays it in every build). Prints one
# line per target (executions, executions/s, corpus size) and exits 0 only
# if every target ran its time without a finding; 77 (skipped) when clang
# cannot build a fuzzer here, outside CI.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
HERE=$ROOT/test/fuzz
BUILD=$ROOT/build/fuzz
SECS=${ONCEQ_FUZZ_SECONDS:-20}
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
  --build)
    BUILD=$2
    shift
    ;;
  --seconds)
    SECS=$2
    shift
    ;;
  --only)
    ONLY=$2
    shift
    ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "fuzz: unknown option $1" >&2
    exit 2
    ;;
  esac
  shift
done
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd -P)

skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "fuzz: $* (test/run.sh installs clang and libclang-rt-14-dev)" >&2
    exit 1
  fi
  echo "fuzz: $*; skipped"
  exit 77
}

command -v clang >/dev/null 2>&1 || skip_or_fail "clang is not installed"
probe=$(mktemp -d /tmp/onceq-fuzzprobe.XXXXXX)
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
  '{ (void)d; (void)n; return 0; }' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" \
  >"$probe/log" 2>&1; then
  cat "$probe/log" >&2
  rm -rf "$probe"
  skip_or_fail "clang cannot link -fsanitize=fuzzer"
fi
rm -rf "$probe"

t0=$SECONDS
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
echo "fuzz: building the targets with clang in $BUILD"
{
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DONCEQ_FUZZ=ON -DONCEQ_WERROR=ON \
    -DONCEQ_SANITIZER= \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $SAN -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$SAN" &&
    cmake --build "$BUILD" --target fuzz_all -j2
} >"$BUILD/build.log" 2>&1 || {
  tail -n 40 "$BUILD/build.log" >&2
  echo "fuzz: FAIL: the clang build failed (log: $BUILD/build.log)" >&2
  exit 1
}
echo "fuzz: built in $((SECONDS - t0))s"

TARGETS=(duration cron conninfo worker_flags retry_after metrics_addr push)
[ -z "$ONLY" ] || TARGETS=("$ONLY")
mkdir -p "$BUILD/artifacts"
FAILED=()

# fuzz_one T: run target T for SECS seconds from its corpus; its table row
# goes to $BUILD/fuzz-T.row, "ok" or "FOUND ..." decides.
fuzz_one() {
  local t=$1 bin=$BUILD/test/fuzz/fuzz_$1 work rc=0 execs rate ncorp res
  if [ ! -x "$bin" ]; then
    printf '%-14s %12s %10s %8s  %s\n' "$t" - - - "not built" >"$BUILD/fuzz-$t.row"
    return 0
  fi
  work=$(mktemp -d /tmp/onceq-fuzz-$t.XXXXXX)
  cp "$HERE/corpus/$t"/* "$work/"
  if [ -d "$HERE/regress/$t" ]; then cp "$HERE/regress/$t"/* "$work/"; fi
  # -close_fd_mask=1: the targets' stdout (--help text) is noise
  (cd "$BUILD" && "$bin" -max_total_time="$SECS" -timeout=10 \
    -rss_limit_mb=2048 -max_len=4096 -close_fd_mask=1 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t-" \
    "$work") >"$BUILD/fuzz-$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' \
    "$BUILD/fuzz-$t.log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' \
    "$BUILD/fuzz-$t.log" | tail -n 1)
  ncorp=$(find "$work" -type f | wc -l)
  if [ $rc -eq 0 ]; then res=ok; else res="FOUND (exit $rc)"; fi
  printf '%-14s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "$ncorp" "$res" >"$BUILD/fuzz-$t.row"
  rm -rf "$work"
}

# two targets at a time (each is one CPU-bound process; the CI machine has
# two cores): the pass takes half as long
printf '%-14s %12s %10s %8s  %s\n' target executions "exec/s" corpus result
running=0
for t in "${TARGETS[@]}"; do
  rm -f "$BUILD/fuzz-$t.row"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ $running -ge 2 ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
for t in "${TARGETS[@]}"; do
  row=$(cat "$BUILD/fuzz-$t.row" 2>/dev/null || echo "$t (no result)")
  echo "$row"
  case $row in
  *" ok") ;;
  *)
    FAILED+=("$t")
    grep -E 'ERROR|SUMMARY|property violated|Test unit written' \
      "$BUILD/fuzz-$t.log" 2>/dev/null | head -n 8 >&2 || true
    ;;
  esac
done
echo "fuzz: ${#TARGETS[@]} target(s), ${SECS}s each, $((SECONDS - t0))s in all"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "fuzz: FAIL: ${FAILED[*]} (inputs in $BUILD/artifacts/, logs" \
    "$BUILD/fuzz-NAME.log)" >&2
  exit 1
fi
