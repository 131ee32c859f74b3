#!/usr/bin/env bash
# install_consumer.sh: the installed tree is usable: `cmake --install` of the
# build into a scratch prefix, then a tiny program configured with
# find_package(onceq) against that prefix only, built and run (its library
# version must match the header's); pkg-config finds onceq.pc there too; and
# libonceq.so exports the public oq_ API and none of the internal oq__ names.
set -euo pipefail
build=${ONCEQ_TEST_BUILD:?ONCEQ_TEST_BUILD (the build directory) is not set}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d /tmp/onceq-pkg.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL install_consumer: $*" >&2; exit 1; }
# a sanitizer build's library needs the sanitizer runtime in the consumer
# too: this check is for the plain build
if grep -q '^ONCEQ_SANITIZER:STRING=.' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "SKIP: sanitizer build ($build)"
  exit 77
fi

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(tail -n 5 "$tmp/install.log")"
lib=$(find "$tmp/prefix" -name 'libonceq.so.*.*' | head -n 1)
[ -n "$lib" ] || fail "no libonceq.so installed"

cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  >"$tmp/configure.log" 2>&1 || fail "configure: $(tail -n 8 "$tmp/configure.log")"
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 ||
  fail "build: $(tail -n 8 "$tmp/build.log")"
out=$(LD_LIBRARY_PATH="$(dirname "$lib")" "$tmp/consumer/consumer") ||
  fail "the consumer failed: $out"
echo "consumer: $out"
case "$out" in
*"claim lost") ;;
*) fail "unexpected consumer output: $out" ;;
esac
# it ran against the installed shared library, not a copy linked in
ldd_out=$(LD_LIBRARY_PATH="$(dirname "$lib")" ldd "$tmp/consumer/consumer")
grep -q "$tmp/prefix" <<<"$ldd_out" || fail "not linked to the installed libonceq: $ldd_out"

pcdir=$(dirname "$(find "$tmp/prefix" -name onceq.pc | head -n 1)")
PKG_CONFIG_PATH=$pcdir pkg-config --exists onceq || fail "pkg-config cannot find onceq.pc"

internal=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^oq__' || true)
public=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^oq_[a-z]' || true)
other=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -vc '^oq_[a-z]' || true)
echo "libonceq.so exports: $public public oq_ symbols, $internal internal, $other other"
[ "$internal" = 0 ] || fail "libonceq.so exports $internal internal oq__ symbols"
[ "$other" = 0 ] || fail "libonceq.so exports $other symbols outside oq_"
[ "$public" -ge 50 ] || fail "only $public public symbols exported"
echo "PASS install_consumer"
