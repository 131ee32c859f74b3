# shellcheck shell=bash disable=SC2034,SC2317 # OQ_PGX_*: read by the tests; inner functions run via oq_wait_until
# oq_pgprivate.sh: private PostgreSQL servers for the tests that must break
# a server the other tests do not share: a primary and a hot standby for the
# failover tests, a server with a low max_connections for the exhaustion
# test. Sourced after oq_harness.sh and oq_setup; not a test itself.
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_pgprivate.sh"
#   oq_pgx_init                       # folder, EXIT trap
#   oq_pgx_server p "max_connections = 20" ...
#   oq_pgx_standby s p                # pg_basebackup -R from p, started
#   oq_pgx_crash p; oq_pgx_promote s
#
# Each server is initdb'd from the local binaries (ONCEQ_TEST_PGBIN, else
# Debian's PostgreSQL 15) into a mktemp folder, listens on 127.0.0.1 only on
# a free port, runs as the `postgres` OS user when we are root, and is
# started and stopped with deploy/lib/pglocal.sh (the plumbing test/run.sh
# uses). Its log is $OQ_TMP/pg-NAME.log, so a failure prints its tail. The
# EXIT trap stops the test's children first (they would only reconnect),
# then every server by its postmaster pid, then runs oq_cleanup.
#
# After oq_pgx_server NAME: OQ_PGX_PORT[NAME], OQ_PGX_DATA[NAME].

OQ_PGX_DIR=""
declare -A OQ_PGX_PORT=()
declare -A OQ_PGX_DATA=()
declare -A OQ_PGX_PID=()

# oq_pgx_init: skip (77) without initdb and pg_basebackup; make the folder
# and install the EXIT trap.
oq_pgx_init() {
  PGBIN=${ONCEQ_TEST_PGBIN:-/usr/lib/postgresql/15/bin}
  local b
  for b in initdb pg_ctl pg_basebackup; do
    if [ ! -x "$PGBIN/$b" ]; then
      echo "SKIP: $PGBIN/$b is missing (set ONCEQ_TEST_PGBIN)" >&2
      exit 77
    fi
  done
  # shellcheck source=../../deploy/lib/pglocal.sh
  . "$(dirname "${BASH_SOURCE[0]}")/../../deploy/lib/pglocal.sh"
  PGL_OSUSER=""
  [ "$(id -u)" = 0 ] && PGL_OSUSER=postgres
  OQ_PGX_DIR=$(mktemp -d /tmp/onceq-pgx.XXXXXX)
  chmod 755 "$OQ_PGX_DIR"
  [ -z "$PGL_OSUSER" ] || chown "$PGL_OSUSER" "$OQ_PGX_DIR"
  PGL_HOME=$OQ_PGX_DIR
  trap oq_pgx_exit EXIT
}

# oq_pgx_exit: the EXIT trap (keeps the exit status for oq_cleanup).
oq_pgx_exit() {
  local rc=$? n
  set +e
  oq_stop_children "${OQ_PIDS[@]}"
  for n in "${!OQ_PGX_DATA[@]}"; do
    pgl_stop "${OQ_PGX_DATA[$n]}" "${OQ_PGX_PID[$n]:-}"
  done
  [ -n "$OQ_PGX_DIR" ] && rm -rf "$OQ_PGX_DIR"
  (exit "$rc")
  oq_cleanup
}

# oq_pgx_log NAME: the server's log file, writable by its OS user.
oq_pgx_log() {
  local f="$OQ_TMP/pg-$1.log"
  [ -e "$f" ] || : >"$f"
  [ -z "$PGL_OSUSER" ] || chown "$PGL_OSUSER" "$f"
  echo "$f"
}

# oq_pgx_conf NAME LINE...: append settings to NAME's postgresql.conf.
oq_pgx_conf() {
  local n=$1
  shift
  printf '%s\n' "$@" | pgl_as_pg tee -a "${OQ_PGX_DATA[$n]}/postgresql.conf" >/dev/null
}

# oq_pgx_start NAME: start (again) the cluster of NAME on a free port.
oq_pgx_start() {
  local n=$1
  pgl_start "${OQ_PGX_DATA[$n]}" "$(oq_pgx_log "$n")" ||
    oq_fail "private server $n did not start"
  OQ_PGX_PORT[$n]=$PGL_PORT
  OQ_PGX_PID[$n]=$PGL_PID
  oq_log "private server $n: 127.0.0.1:$PGL_PORT (postmaster $PGL_PID)"
}

# oq_pgx_server NAME [SETTING...]: initdb (trust auth, superuser postgres)
# and start a server with the given postgresql.conf lines.
oq_pgx_server() {
  local n=$1 out
  shift
  OQ_PGX_DATA[$n]=$OQ_PGX_DIR/$n
  out=$(pgl_as_pg "$PGBIN/initdb" -D "${OQ_PGX_DATA[$n]}" -U postgres -A trust \
    --no-sync -E UTF8 --locale=C 2>&1) || oq_fail "initdb $n failed: $out"
  # fsync off as in test/run.sh: the data is thrown away, and an immediate
  # stop loses nothing the OS has (only a machine crash would)
  oq_pgx_conf "$n" "listen_addresses = '127.0.0.1'" \
    "unix_socket_directories = '$OQ_PGX_DIR'" "fsync = off" \
    "wal_level = replica" "max_wal_senders = 4" "hot_standby = on" \
    "port = 5432" "$@" # pgl_start rewrites the port line
  oq_pgx_start "$n"
}

# oq_pgx_standby NAME PRIMARY [SETTING...]: a hot standby of PRIMARY
# (pg_basebackup -R: streaming replication), started; waits until PRIMARY
# shows it streaming.
oq_pgx_standby() {
  local n=$1 p=$2 out
  shift 2
  OQ_PGX_DATA[$n]=$OQ_PGX_DIR/$n
  out=$(pgl_as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "${OQ_PGX_PORT[$p]}" \
    -U postgres -D "${OQ_PGX_DATA[$n]}" -R -X stream -c fast --no-sync \
    -d "application_name=$n" 2>&1) || oq_fail "pg_basebackup $n failed: $out"
  [ $# -eq 0 ] || oq_pgx_conf "$n" "$@"
  oq_pgx_start "$n"
  oq_pgx_streaming() {
    [ "$(oq_pgx_sql "$p" postgres "SELECT count(*) FROM pg_stat_replication
           WHERE state = 'streaming'")" -ge 1 ]
  }
  oq_wait_until 30 "standby $n streaming from $p" oq_pgx_streaming
}

# oq_pgx_dsn NAME DB: key=value conninfo of database DB on NAME.
oq_pgx_dsn() {
  echo "host=127.0.0.1 port=${OQ_PGX_PORT[$1]} user=postgres dbname=$2"
}

# oq_pgx_sql NAME DB SQL: run SQL on NAME's database DB (tuples only);
# fails the test on error.
oq_pgx_sql() {
  local rc=0
  oq_psql_retry "$OQ_PSQL" "$(oq_pgx_dsn "$1" "$2")" "$3" || rc=$?
  [ $rc -eq 0 ] || oq_fail "SQL on $1 failed (exit $rc): $3: $OQ_PSQL_OUT"
  [ -z "$OQ_PSQL_OUT" ] || printf '%s\n' "$OQ_PSQL_OUT"
}

# oq_pgx_ctl NAME ARGS...: pg_ctl on NAME's cluster, as its OS user.
oq_pgx_ctl() {
  local n=$1
  shift
  pgl_as_pg "$PGBIN/pg_ctl" -D "${OQ_PGX_DATA[$n]}" "$@"
}

# oq_pgx_crash NAME: stop NAME at once (-m immediate: no shutdown
# checkpoint, every connection drops as in a crash).
oq_pgx_crash() {
  local out
  out=$(oq_pgx_ctl "$1" -m immediate -w -t 60 stop 2>&1) ||
    oq_fail "pg_ctl stop -m immediate $1 failed: $out"
}

# oq_pgx_promote NAME: promote the standby NAME and wait until it takes
# writes.
oq_pgx_promote() {
  local out
  out=$(oq_pgx_ctl "$1" -w -t 60 promote 2>&1) ||
    oq_fail "pg_ctl promote $1 failed: $out"
}
