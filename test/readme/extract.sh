#!/usr/bin/env bash
# extract.sh: print or save the documentation code block that follows a
# marker, from README.md or one of docs/*.md.
#
# Usage: test/readme/extract.sh FILE.md NAME [OUTFILE]
#
# A runnable block is the first fenced block (``` ... ```) after the line
# `<!-- readme-test: NAME -->`; only blank lines may stand between the
# marker and the opening fence. The tests extract the examples at test time
# and keep no copy of their own, so the documentation cannot drift from what
# is tested (run_examples.sh finds the one file that holds NAME). Exits 1,
# naming the problem, when the marker is missing or repeated, or its block
# is missing, empty or unterminated.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 FILE.md NAME [OUTFILE]" >&2
  exit 2
fi
readme=$1
name=$2
out=${3:-/dev/stdout}

if [ ! -r "$readme" ]; then
  echo "extract.sh: cannot read $readme" >&2
  exit 1
fi

# awk states: 0 = looking for the marker, 1 = marker seen, waiting for the
# opening fence, 2 = inside the block, 3 = block closed.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
awk -v want="<!-- readme-test: $name -->" '
  function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
  {
    line = $0
    if (trim(line) == want) {
      markers++
      if (state == 0) { state = 1 }
      next
    }
    if (state == 1) {
      if (trim(line) == "") { next }
      if (line ~ /^[ \t]*```/) { state = 2; next }
      printf "marker %s is not followed by a fenced block (line %d)\n",
             want, NR > "/dev/stderr"
      bad = 1; exit
    }
    if (state == 2) {
      if (line ~ /^[ \t]*```[ \t]*$/) { state = 3; next }
      print line
      lines++
    }
  }
  END {
    if (bad) { exit 1 }
    if (markers == 0) {
      printf "no marker %s in %s\n", want, FILENAME > "/dev/stderr"; exit 1
    }
    if (markers > 1) {
      printf "marker %s appears %d times; names must be unique\n",
             want, markers > "/dev/stderr"; exit 1
    }
    if (state == 1) {
      printf "marker %s has no fenced block after it\n", want > "/dev/stderr"
      exit 1
    }
    if (state == 2) {
      printf "the block after %s is not closed\n", want > "/dev/stderr"
      exit 1
    }
    if (lines == 0) {
      printf "the block after %s is empty\n", want > "/dev/stderr"; exit 1
    }
  }
' "$readme" >"$tmp"
cat "$tmp" >"$out"
