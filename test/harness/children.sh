# shellcheck shell=bash
# children.sh: the processes a shell test started, shared by the test
# libraries (test/worker/it_lib.sh, test/cli/cli_lib.sh,
# test/coord/coord_lib.sh); sourced, not run. Children are only ever
# signalled by the pids the test recorded, never by name.

# oq_child_alive PID: a live process (not a zombie).
oq_child_alive() {
  local st
  [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] || return 1
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# oq_stop_children LABEL PID...: SIGCONT and SIGTERM each live PID (a
# stopped child cannot act on SIGTERM), give each up to 5 s, then SIGKILL
# what is left, saying so on stderr under LABEL.
oq_stop_children() {
  local label=$1 pid n
  shift
  for pid in "$@"; do
    if oq_child_alive "$pid"; then
      kill -CONT "$pid" 2>/dev/null
      kill -TERM "$pid" 2>/dev/null
    fi
  done
  for pid in "$@"; do
    n=0
    while oq_child_alive "$pid" && [ $n -lt 100 ]; do
      sleep 0.05
      n=$((n + 1))
    done
    if oq_child_alive "$pid"; then
      echo "[$label] pid $pid ignored SIGTERM for 5 s; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  return 0
}
