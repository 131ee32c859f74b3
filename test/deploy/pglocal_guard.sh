#!/usr/bin/env bash
# pglocal_guard.sh: deploy/lib/pglocal.sh signals only a server of the data
# folder it is given. The harness's own running server stands in for
# "somebody else's PostgreSQL" (as a stale pid file could name after a
# reboot): pgl_serves tells it apart by data folder, and pgl_stop with
# another folder leaves it running. Skips (77) without the harness server.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# shellcheck source=../../deploy/lib/pglocal.sh
. "$ROOT/deploy/lib/pglocal.sh"

fail() {
  echo "FAIL pglocal_guard: $*" >&2
  exit 1
}
[ -n "${ONCEQ_TEST_PGDATA:-}" ] && [ -n "${ONCEQ_TEST_PGPORT:-}" ] ||
  { echo "skip: no harness server (ONCEQ_TEST_PGDATA)"; exit 77; }
PGBIN=${ONCEQ_TEST_PGBIN:-/usr/lib/postgresql/15/bin}
pid=$(pgl_postmaster_pid "$ONCEQ_TEST_PGDATA") || fail "no postmaster.pid"
pgl_is_postgres "$pid" || fail "pid $pid is not a postgres process"

pgl_serves "$pid" "$ONCEQ_TEST_PGDATA" ||
  fail "pgl_serves does not recognise the server of its own data folder"
other=$(mktemp -d /tmp/onceq-pglocal.XXXXXX)
trap 'rm -rf "$other"' EXIT
if pgl_serves "$pid" "$other"; then
  fail "pgl_serves claims pid $pid serves $other"
fi
pgl_serves "$pid" "" && fail "pgl_serves with no data folder"

# stop "our" (empty) cluster, naming the harness server's pid as a stale
# pid file would: it must not be signalled
PGL_HOME=$other PGL_OSUSER="" pgl_stop "$other" "$pid"
PGL_HOME=$other PGL_OSUSER="" pgl_stop "" "$pid"
sleep 0.5
pgl_is_postgres "$pid" || fail "pgl_stop ended a server it does not serve"
"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$ONCEQ_TEST_PGPORT" -t 5 ||
  fail "the harness server stopped answering"
echo "PASS pglocal_guard: pid $pid left alone; recognised only with its own data folder"
