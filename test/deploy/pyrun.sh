#!/usr/bin/env bash
# pyrun.sh [--yaml] SCRIPT [ARG...]: run one deploy check (test/deploy/*.py)
# with a python3 that has what it needs. With --yaml it must `import yaml`:
# the python3 first on PATH (a pyenv or venv one may lack it), else
# /usr/bin/python3, which Debian's python3-yaml serves. Exit status: the
# script's; 1 (with the package to install) when no such python3 exists.
set -euo pipefail
# No __pycache__ in the source tree.
export PYTHONDONTWRITEBYTECODE=1
need_yaml=0
if [ "${1:-}" = --yaml ]; then
  need_yaml=1
  shift
fi
[ $# -ge 1 ] || { echo "usage: pyrun.sh [--yaml] SCRIPT [ARG...]" >&2; exit 2; }
for py in "$(command -v python3 || true)" /usr/bin/python3; do
  if [ -z "$py" ] || [ ! -x "$py" ]; then continue; fi
  if [ $need_yaml -eq 0 ] || "$py" -c 'import yaml' >/dev/null 2>&1; then
    exec "$py" "$@"
  fi
done
echo "pyrun.sh: no python3 that can import yaml; install the Debian package" \
  "python3-yaml (it belongs in ONCEQ_APT_PACKAGES in test/run.sh)" >&2
exit 1
