# shellcheck shell=bash disable=SC2034 # OQ_PSQL_OUT: read by the callers
# psql_retry.sh: the one psql call the shell test libraries share
# (test/worker/it_lib.sh, test/cli/cli_lib.sh, test/coord/coord_lib.sh);
# sourced, not run.
#
# Under SERIALIZABLE even a test's own read can be chosen as a serialization
# victim while workers run; the tests retry those (bounded), as the library
# does, and fail on anything else.

# oq_psql_retry PSQL DSN [SQL]: run SQL (stdin when no SQL is given), tuples
# only and unaligned, retrying a restart error (SQLSTATE 40001/40P01, from
# PostgreSQL or CockroachDB) up to 10 times. Output and errors land in
# OQ_PSQL_OUT (not printed); returns psql's exit code. Server notices are
# off, so they never mix into a value a test compares.
oq_psql_retry() {
  local psql=$1 dsn=$2 input="" rc=0 _
  local opts=(-X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$dsn")
  if [ $# -lt 3 ]; then input=$(cat); fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    rc=0
    if [ $# -ge 3 ]; then
      OQ_PSQL_OUT=$(PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" \
        "$psql" "${opts[@]}" -c "$3" 2>&1) || rc=$?
    else
      OQ_PSQL_OUT=$(PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" \
        "$psql" "${opts[@]}" 2>&1 <<<"$input") || rc=$?
    fi
    [ $rc -ne 0 ] || break
    case "$OQ_PSQL_OUT" in
    *"ERROR:  40001"* | *"ERROR:  40P01"*) sleep 0.05 ;;
    *) break ;;
    esac
  done
  return $rc
}
