# shellcheck shell=bash
# parts_lib.sh: plumbing shared by the partition shell tests
# (test/parts/parts_*.sh), on top of test/harness/oq_harness.sh (database,
# workers, checks, cleanup). Not a test itself.
#
# Terms: a "member" is a live session with onceq_sessions.partitioned set;
# "converged" means the ownership rows are exactly the members' blocks
# (member i of k by id owns parts [i*P/k, (i+1)*P/k)) and no row is >= P.

# shellcheck source=../harness/oq_harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/../harness/oq_harness.sh"

# parts_sql SQL: oq_sql, but under READ COMMITTED whatever the pass's
# isolation: the test's own observations are not part of the system under
# test, and under SERIALIZABLE a read-only observer can be chosen as the
# victim of a serialization failure again and again while workers write.
parts_sql() {
  (
    export PGOPTIONS='-c default_transaction_isolation=read\ committed'
    oq_sql "$@"
  )
}

# The --sql handler: inside the ack transaction, the ledger row records
# when the item was enqueued (the payload's "t": the producer's now(),
# which is also the item's created_at; carried in the payload), when the
# claim that is being acknowledged was taken (the item's claimed_at) and
# when the handler ran (clock_timestamp()). Under SERIALIZABLE the ack
# transaction may restart several times with backoff after its claim, so
# started_at - claimed_at is execution time (and time in the worker's
# prefetch queue), not time spent waiting for an owner.
PARTS_LEDGER_COLS='item_id, n, created_at, claimed_at, started_at'
PARTS_LEDGER_VALUES='$2, ($1->>'"'n'"')::int, to_timestamp(($1->>'"'t'"')::float8),
  (SELECT claimed_at FROM onceq_items WHERE id = $2), clock_timestamp()'
PARTS_SQL="INSERT INTO ledger ($PARTS_LEDGER_COLS) VALUES ($PARTS_LEDGER_VALUES)"

parts_ledger_table() {
  oq_sql "CREATE TABLE ledger (item_id uuid NOT NULL, n int NOT NULL,
                               created_at timestamptz NOT NULL,
                               claimed_at timestamptz NOT NULL,
                               started_at timestamptz NOT NULL)" >/dev/null
}

# parts_mismatch P: ownership rows that differ from the blocks (0: converged).
parts_mismatch() {
  parts_sql "WITH m AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS i,
                     count(*) OVER () AS k FROM onceq_sessions
                     WHERE partitioned AND heartbeated_at + expiry >= now()),
          want AS (SELECT g AS part, m.id FROM generate_series(0, $1 - 1) g
                   JOIN m ON g >= m.i * $1 / m.k AND g < (m.i + 1) * $1 / m.k)
          SELECT (SELECT count(*) FROM want w LEFT JOIN onceq_session_parts sp
                  ON sp.part = w.part WHERE sp.session_id IS DISTINCT FROM w.id)
               + (SELECT count(*) FROM onceq_session_parts sp LEFT JOIN want w
                  ON w.part = sp.part WHERE w.part IS NULL)"
}

parts_converged() { [ "$(parts_mismatch "$1")" = 0 ]; }

# parts_members: live partitioned sessions.
parts_members() {
  parts_sql "SELECT count(*) FROM onceq_sessions WHERE partitioned
          AND heartbeated_at + expiry >= now()"
}

# parts_unclaimed MAX: items nobody has claimed, counted up to MAX.
parts_unclaimed() {
  parts_sql "SELECT count(*) FROM (SELECT 1 FROM onceq_items
             WHERE claim IS NULL LIMIT $1) x"
}

# parts_producer N BATCH PAUSE_S: enqueue N items (payload {"n": i, "t":
# the enqueue time, epoch seconds}) in committed batches of BATCH, PAUSE_S
# apart, in the background; sets PARTS_PRODUCER (its pid). created_at is
# each batch's commit-ish time. A batch waits (up to about 40 s) while half
# a batch is still unclaimed: on a slow machine the fleet then gets a lower
# rate instead of a backlog, so the waits measure the assignment, not the
# machine.
parts_producer() {
  local n=$1 batch=$2 pause=$3
  (
    i=0
    while [ "$i" -lt "$n" ]; do
      held=0
      while [ "$(parts_unclaimed "$batch")" -ge $((batch / 2)) ] &&
        [ "$held" -lt 600 ]; do
        sleep 0.05
        held=$((held + 1))
      done
      oq_sql "INSERT INTO onceq_items (payload)
              SELECT jsonb_build_object('n', g, 't', extract(epoch FROM now()))
              FROM generate_series($((i + 1)), $((i + batch < n ? i + batch : n))) g" \
        >/dev/null
      i=$((i + batch))
      sleep "$pause"
    done
  ) &
  PARTS_PRODUCER=$!
  OQ_PIDS+=("$PARTS_PRODUCER")
}

# parts_items_left: items not yet acknowledged.
parts_items_left() { parts_sql "SELECT count(*) FROM onceq_items"; }
parts_all_done() { [ "$(parts_items_left)" = 0 ]; }

# parts_check_ledger N: exact ledger, nothing left, nothing dead.
parts_check_ledger() {
  oq_ledger_exact "$1"
  oq_check "ledger n values" "$(oq_sql 'SELECT count(DISTINCT n) FROM ledger')" "$1"
  oq_check "dead items" "$(oq_sql 'SELECT count(*) FROM onceq_dead')" 0
}

# parts_max_wait_ms [COLUMN]: the longest wait from enqueue to COLUMN
# (claimed_at: waiting for a session to claim the item, the default;
# started_at: until the acknowledged run started) in the ledger, in ms.
parts_max_wait_ms() {
  oq_sql "SELECT coalesce(round(max(extract(epoch FROM ${1:-claimed_at}
                 - created_at)) * 1000), 0)::bigint FROM ledger"
}

# parts_wait_quantile Q [COLUMN]: that quantile of the waits, in ms.
parts_wait_quantile() {
  oq_sql "SELECT coalesce(round(percentile_cont($1) WITHIN GROUP (ORDER BY
                 extract(epoch FROM ${2:-claimed_at} - created_at)) * 1000),
                 0)::bigint FROM ledger"
}

# parts_json_field FIELD: one top-level field of `onceq parts --json`.
parts_json_field() {
  "$ONCEQ_CLI" --db "$OQ_DSN" --json parts |
    python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}
