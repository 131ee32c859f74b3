#!/usr/bin/env bash
# check_style.sh: the house style's mechanical rules (after curl's
# CHECKSRC): no banned functions, no internal name in a public header, no
# read of an onceq_ table outside lib/ and query/, no libpq outside the
# connection files, no SQLSTATE literal outside its table, and every tracked C file
# formatted with the checked-in .clang-format. Exit 0
# clean, 1 with one line per finding.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
status=0
mapfile -t files < <(git ls-files '*.c' '*.h' 2>/dev/null ||
  find lib worker coordinator test -name '*.[ch]')
[ "${#files[@]}" -gt 0 ] || { echo "no C files found"; exit 1; }
# banned: sprintf strcpy strcat strtok atoi gets (snprintf, strtok_r and
# fgets are fine: the \b before the name excludes them)
if grep -nE '(^|[^a-z_])(sprintf|strcpy|strcat|strtok|atoi|gets)[[:space:]]*\(' \
  "${files[@]}"; then
  echo "banned function above: use snprintf, memcpy with a length, strtol"
  status=1
fi
# The public headers are the API: internal names (oq__, OQ__: test hooks,
# module internals) live in lib/src (internal.h, test_hooks.h), never in
# lib/include, where a user could call them.
if grep -nE '\b(oq|OQ)__[A-Za-z]' lib/include/onceq/*.h lib/include/onceq/*.h.in; then
  echo "internal name in a public header above: move it to lib/src (internal.h)"
  status=1
fi
# SQL reads have owners (issue 24): a statement that reads an onceq_ table
# is written in lib/ (the protocol) or query/ (the operator's read views
# and the leader's pass, shared by the CLI and the coordinator), never in
# a program, so that a column is changed in one layer. test/ may read what
# it checks.
check_sql_reads() {
  local progs=() f out
  for f in "${files[@]}"; do
    case "$f" in lib/* | query/* | test/*) ;; *) progs+=("$f") ;; esac
  done
  out=$(perl test/lint/sql_reads.pl "${progs[@]}") || return 1
  if [ -n "$out" ]; then
    echo "$out"
    echo "SELECT on an onceq_ table above: move the statement into query/" \
      "(a read view) or lib/"
    return 1
  fi
  return 0
}
check_sql_reads || status=1
# Writes to the onceq_ tables belong to libonceq (issue 24): the programs
# call oq_enqueue, oq_enqueue_many, oq_cancel, oq_retry_dead,
# oq_retention_delete, the ack family, oq_schedule_*, oq_lease_try and
# oq_dead_mark_notified instead of sending their own INSERT, UPDATE or
# DELETE, so a column changes in one folder. test/, whose fixtures write
# rows on purpose, is exempt.
check_table_writes() {
  local out
  out=$(printf '%s\n' "${files[@]}" | grep -vE '^(lib|test)/' |
    xargs grep -niE '(INSERT[[:space:]]+INTO|UPSERT[[:space:]]+INTO|UPDATE|DELETE[[:space:]]+FROM)[[:space:]]+onceq_[a-z_]+' || true)
  if [ -n "$out" ]; then
    echo "$out"
    echo "write to an onceq_ table outside lib/ above: call the library"
    echo "(onceq/enqueue.h, cancel.h, retry.h, retention.h, schedule.h," \
      "lease.h, dead.h) or add the statement there"
    status=1
  fi
}
check_table_writes
# libpq has one owner (issue 24): the connection files lib/src/db*.c (the
# connection and its states, the pipeline, the prepared-statement cache,
# the transaction runner) are the only code that includes libpq-fe.h or
# calls a PQ function; everything else asks them. test/ may reach in.
check_libpq() {
  local f found=0
  local -a scoped=()
  for f in "${files[@]}"; do
    case "$f" in
    lib/src/db*.c | lib/src/db*.h | test/*) ;;
    lib/* | worker/* | coordinator/* | cli/* | common/* | query/*)
      scoped+=("$f") ;;
    esac
  done
  [ "${#scoped[@]}" -gt 0 ] || return 0
  if grep -nE '#[[:space:]]*include[[:space:]]*<libpq-fe\.h>|(^|[^A-Za-z0-9_])PQ[a-z][A-Za-z]*[[:space:]]*\(' \
    "${scoped[@]}"; then
    echo "libpq outside the connection files above: go through lib/src/db*.c"
    found=1
  fi
  return "$found"
}
check_libpq || status=1
# SQLSTATEs have one table (issue 24): a five-character code in quotes
# (digits and capitals, at least one digit: "26000", "42P01"; words like
# "BEGIN" are not codes) is written only in lib/src/sqlstate.c; other code
# names it (onceq/sqlstate.h: oq_db_sqlstate_is, oq_sqlstate_code).
check_sqlstate_literals() {
  local -a scoped=()
  local f
  for f in "${files[@]}"; do
    case "$f" in
    lib/src/sqlstate.c | test/*) ;;
    lib/* | worker/* | coordinator/* | cli/* | common/* | query/*)
      scoped+=("$f") ;;
    esac
  done
  [ "${#scoped[@]}" -gt 0 ] || return 0
  if perl -ne 'if (/"(?=[0-9A-Z]{5}")[A-Z]*[0-9]/) { print "$ARGV:$.:$_"; $n++ }
    close ARGV if eof; END { exit($n ? 0 : 1) }' "${scoped[@]}"; then
    echo "SQLSTATE literal above: name it in lib/src/sqlstate.c's table" \
      "(onceq/sqlstate.h)"
    return 1
  fi
  return 0
}
check_sqlstate_literals || status=1
if ! command -v clang-format >/dev/null; then
  echo "clang-format is missing (apt-get install clang-format)"
  exit 1
fi
# one clang-format for all files (one process per file took 35 s of the
# unit pass, and over its 120 s timeout on a loaded machine); its findings
# read "FILE:LINE:COL: error: code should be clang-formatted"
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  bad=$(sed -nE 's/^([^:]+\.[ch]):[0-9]+:[0-9]+: error: .*/\1/p' <<<"$out" | sort -u)
  [ -n "$bad" ] || { echo "clang-format failed: $out" | head -5; exit 1; }
  while IFS= read -r f; do
    echo "$f: not clang-formatted (run clang-format -i $f)"
  done <<<"$bad"
  status=1
fi
[ "$status" -eq 0 ] && echo "style: ${#files[@]} files clean"
exit "$status"
