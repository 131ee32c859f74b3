# shellcheck shell=bash disable=SC2034 # PGL_PORT, PGL_PID: read by the callers
# pglocal.sh: the local PostgreSQL plumbing shared by deploy/quickstart.sh,
# test/run.sh and the benchmarks (test/bench/run.sh, parts_bench.sh);
# sourced, not run. Each caller owns its cluster's settings and lifecycle;
# this file owns the mechanics they have in common: running as the server's
# OS user, finding a free port, telling our postmaster from a stale pid, a
# start that survives a port race, and a stop that ends only the pids it is
# given.
#
# The caller sets:
#   PGBIN       the server's bin folder (initdb, pg_ctl, pg_isready)
#   PGL_HOME    a folder the server's OS user can read: the cwd of initdb
#               and pg_ctl, which fail when they cannot resolve it
#   PGL_OSUSER  "postgres" when we are root (the server refuses to run as
#               root), else ""

# pgl_as_pg CMD...: run CMD as the server's OS user, from PGL_HOME, without
# the callers' lock fds (8, 9), so a server never holds a caller's lock.
pgl_as_pg() {
  if [ -n "${PGL_OSUSER:-}" ]; then
    (cd "${PGL_HOME:?}" && runuser -u "$PGL_OSUSER" -- "$@" 8>&- 9>&-)
  else
    (cd "${PGL_HOME:?}" && "$@" 8>&- 9>&-)
  fi
}

# pgl_alive PID: a live process (not a zombie).
pgl_alive() {
  [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] &&
    ! awk '{exit !($3 == "Z")}' "/proc/$1/stat" 2>/dev/null
}

# pgl_is_postgres PID: alive and a postgres process (what a pid file
# promises; a recycled pid is someone else's).
pgl_is_postgres() {
  pgl_alive "${1:-}" &&
    grep -qx 'postgres\|postmaster' "/proc/$1/comm" 2>/dev/null
}

# pgl_postmaster_pid DATA: the postmaster's pid from its data folder.
pgl_postmaster_pid() {
  [ -n "${1:-}" ] && [ -f "$1/postmaster.pid" ] && head -n 1 "$1/postmaster.pid"
}

# pgl_port_free PORT: nobody listens on 127.0.0.1:PORT. A bind is the exact
# test (it also sees ports in TIME_WAIT); without python3, a connect.
pgl_port_free() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# pgl_pick_port [PREFERRED]: print a free port, PREFERRED if it is free,
# else a random one below the kernel's ephemeral range. Fails after 200
# tries.
pgl_pick_port() {
  local port
  if [[ ${1:-} =~ ^[0-9]+$ ]] && pgl_port_free "$1"; then
    echo "$1"
    return 0
  fi
  for _ in $(seq 1 200); do
    port=$((15000 + (RANDOM * 32768 + RANDOM) % 15000))
    if pgl_port_free "$port"; then
      echo "$port"
      return 0
    fi
  done
  echo "found no free port on 127.0.0.1" >&2
  return 1
}

# pgl_start DATA LOG [PREFERRED_PORT]: start the cluster in DATA (absolute
# paths) on a free port (written into its postgresql.conf, so a plain
# `pg_ctl start` keeps it), logging to LOG. Another process can take the port between the pick
# and the bind; then it tries another, up to 5 times. Sets PGL_PORT and
# PGL_PID. On failure the log's tail goes to stderr and it returns 1.
pgl_start() {
  local data=$1 log=$2 preferred=${3:-}
  PGL_PORT=""
  PGL_PID=""
  for _ in 1 2 3 4 5; do
    PGL_PORT=$(pgl_pick_port "$preferred") || return 1
    preferred=""
    pgl_as_pg sed -i "s/^port = .*/port = $PGL_PORT/" "$data/postgresql.conf"
    [ -e "$log" ] || pgl_as_pg touch "$log"
    if pgl_as_pg "$PGBIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start \
      >/dev/null 2>&1; then
      PGL_PID=$(pgl_postmaster_pid "$data")
      return 0
    fi
    if tail -n 20 "$log" 2>/dev/null |
      grep -q 'could not bind\|Address already in use'; then
      echo "port $PGL_PORT was taken meanwhile; trying another" >&2
      continue
    fi
    break
  done
  echo "PostgreSQL did not start; the end of its log ($log):" >&2
  tail -n 30 "$log" >&2 2>/dev/null || true
  return 1
}

# pgl_serves PID DATA: PID is a postgres process of the cluster in DATA (a
# postmaster and its backends run with DATA as their cwd). A pid from an
# old pid file may now belong to another cluster, such as the system's.
pgl_serves() {
  local real
  [ -n "${2:-}" ] && pgl_is_postgres "${1:-}" || return 1
  real=$(cd "$2" 2>/dev/null && pwd -P) || return 1
  [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$real" ]
}

# pgl_stop DATA PID...: stop the cluster in DATA (pg_ctl, fast mode), then
# make sure each given PID that still serves DATA ends: SIGQUIT after 5 s,
# SIGKILL after 5 more. Only those pids are ever signalled, and only while
# they serve DATA. (pg_ctl returns once the pid file is gone, a moment
# before the exit.)
pgl_stop() {
  local data=$1 p
  shift
  [ -n "$data" ] || return 0
  if [ -f "$data/postmaster.pid" ]; then
    pgl_as_pg "$PGBIN/pg_ctl" -D "$data" -m fast -t 60 stop >/dev/null 2>&1 ||
      true
  fi
  for p in "$@"; do
    [ -n "$p" ] || continue
    for _ in $(seq 1 50); do
      pgl_serves "$p" "$data" || break
      sleep 0.1
    done
    pgl_serves "$p" "$data" || continue
    echo "postmaster $p still runs; sending SIGQUIT" >&2
    kill -QUIT "$p" 2>/dev/null || true
    for _ in $(seq 1 50); do
      pgl_serves "$p" "$data" || break
      sleep 0.1
    done
    if pgl_serves "$p" "$data"; then kill -KILL "$p" 2>/dev/null || true; fi
  done
  return 0
}
