/*
 * it_cli_blocked_plan: the blocked-key count (query/src/qstats.c, what
 * `onceq stats`, the status page and the metrics show) asks "is this failed
 * item its key's first?" with one descent of the key index per failed item
 * on PostgreSQL, whatever the statistics say, and counts right in that
 * state.
 *
 * The state that misled the planner: onceq_items analyzed after a drain
 * without a VACUUM in between (the statistics count no rows while the
 * table keeps its pages), then keyed items enqueued and some keys' first
 * items failed, with no ANALYZE since (autovacuum off for the table here;
 * on a live database it may wait for minutes). Written as NOT EXISTS, the
 * "no earlier item of the key" test became an anti-join that read the
 * whole key index once for each failed item: 514,000 buffer reads at
 * 20,000 rows, 2,014,000 at 80,000 (docs/benchmarks.md, "Plans that
 * statistics cannot spoil"). A control runs the count with the test
 * written that way: it must read more than the bound, or the state no
 * longer misleads the planner and the check would prove nothing, so the
 * test fails. The statement has no parameters: its plan is the one every
 * run gets. `onceq keys --blocked` (query/src/keys_view.c) starts from the
 * failed items the same way and lists the same keys. Each EXPLAIN ANALYZE runs
 * in a transaction that is rolled back.
 */
#include "key_head.h"
#include "keys_view.h"
#include "oq_test.h"
#include "qstats.h"
#include "sem_util.h"

#define QUEUE "blocked_plan"
#define STATS_QUEUE "stats_only"
#define KEYS 400
#define PER_KEY 10
#define FAILED_HEADS 50
/* failed items that are not their key's first: not blocked keys */
#define FAILED_LATER 20
/* buffer reads per failed item the count may do: about 4 this way, the
 * old text thousands (the whole key index) */
#define READS_PER_FAILED 40
/* items in flight in another queue, half of them keyed: "is an item of
 * this key running?" reads them once per statement (schema v12), about
 * two buffer reads each, not once per failed item */
#define CLAIMED_ELSEWHERE 1000

/* the test as it was written before, and as it is now (PostgreSQL) */
#define OLD_HEAD                                                               \
  "NOT EXISTS (SELECT 1 FROM onceq_items e WHERE e.queue = f.queue"            \
  " AND e.part = f.part AND e.ordering_key = f.ordering_key"                   \
  " AND e.ordering_key IS NOT NULL AND e.claim IS NULL"                        \
  " AND e.enqueue_seq < f.enqueue_seq)"
#define NEW_HEAD QV_FAILED_FIRST_PG

static long count_reads(oq_db *db, const char *text, const char *name)
{
  char *plan = SEM_GENERIC_RUN(db, text, NULL, name);
  long reads = sem_plan_buffers(plan);
  free(plan);
  if (reads < 0)
    OQT_FAIL("%s: no buffer counts in its plan (above)", name);
  printf("  %s: %ld buffer reads, %.1f per failed item\n", name, reads,
         (double)reads / (FAILED_HEADS + FAILED_LATER));
  return reads;
}

static void check_plans(oq_db *db)
{
  const char *text = qv_blocked_sql(OQ_ENGINE_POSTGRES);
  char *old = SEM_AS_BEFORE(text, NEW_HEAD, OLD_HEAD);
  long bound = (long)READS_PER_FAILED * (FAILED_HEADS + FAILED_LATER) +
               2L * CLAIMED_ELSEWHERE;
  long was = count_reads(db, old, "control: the head test as NOT EXISTS");
  free(old);
  SEM_CONTROL_PAST(was, bound, "buffers");
  long now = count_reads(db, text, "the blocked-key count");
  SEM_WITHIN("the blocked-key count", now, bound, "buffers",
             "its head test is not one descent per failed item");
}

/* `onceq keys --blocked`'s statement starts from the failed items too:
 * the rows it reads (the failed items, each key's first, each blocked
 * key's items counted) must stay well under the keyed rows, which the
 * whole-view statement (one pass over every keyed row) reads all of. */
static void check_keys_blocked(oq_db *db)
{
  char *plan = SEM_GENERIC_RUN(db, qv_keys_blocked_sql(OQ_ENGINE_POSTGRES),
                               "NULL, true, 1001", "onceq keys --blocked");
  long seen = sem_plan_rows_read(plan);
  free(plan);
  /* half of the keyed rows, plus one read of the items in flight (is an
   * item of the key running? schema v12) */
  SEM_WITHIN("onceq keys --blocked", seen,
             (long)KEYS * PER_KEY / 2 + CLAIMED_ELSEWHERE, "rows",
             "it does not start from the failed items");
}

/* qv_keys_read with blocked_only: the failed heads, in key order, for
 * queue (NULL: all); returns how many, each checked blocked, waiting
 * PER_KEY - 1 behind it. */
static long keys_blocked_listed(oq_db *db, const char *queue)
{
  cm_listing l;
  ASSERT_EQ(qv_keys_open(&l, true), 0);
  qv_keys_sum sum;
  ASSERT_OK(db, qv_keys_read(db, queue, true, 1000, &l, &sum));
  cm_listing_end_rows(&l);
  char *doc = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&doc, &len);
  ASSERT(out != NULL);
  ASSERT_EQ(cm_listing_print(&l, out, "keys"), 0);
  fclose(out);
  cm_listing_free(&l);
  ASSERT_EQ(sum.blocked, sum.n);
  /* every listed key waits PER_KEY - 1 items, and the first is key-0 */
  long waiting = 0;
  for (const char *w = strstr(doc, "\"waiting\":"); w;
       w = strstr(w + 1, "\"waiting\":")) {
    ASSERT_EQ(strtol(w + strlen("\"waiting\":"), NULL, 10), PER_KEY - 1);
    waiting++;
  }
  ASSERT_EQ(waiting, sum.n);
  if (sum.n > 0)
    ASSERT(strstr(doc, "\"key-0\"") != NULL);
  free(doc);
  return sum.n;
}

int main(void)
{
  const char *dsn = oqt_fresh_db("blocked_plan", 1);
  oq_db *db = oqt_connect(dsn);
  bool pg = oq_db_engine(db) == OQ_ENGINE_POSTGRES;
  /* a backlog without keys analyzed, drained, analyzed again: no rows
   * counted, the pages left */
  oqt_enqueue_n(db, STATS_QUEUE, 2000);
  if (pg)
    oqt_exec(db, "ALTER TABLE onceq_items SET (autovacuum_enabled = off)");
  oqt_exec(db, "ANALYZE onceq_items");
  oqt_exec(db, "DELETE FROM onceq_items");
  oqt_exec(db, "ANALYZE onceq_items");
  /* then keyed items, key g % KEYS, a key's items spread through the
   * enqueue order */
  char sql[1024];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key)"
           " SELECT '%s', jsonb_build_object('n', g), 'key-' || (g %% %d)"
           " FROM generate_series(1, %d) AS g",
           QUEUE, KEYS, KEYS * PER_KEY);
  oqt_exec(db, sql);
  /* FAILED_HEADS keys' first items failed and wait for a retry (blocked
   * keys), and the second items of FAILED_LATER other keys (not blocked:
   * each waits behind its key's first, which has not failed) */
  snprintf(sql, sizeof sql,
           "UPDATE onceq_items SET last_error = 'boom', attempts = 1,"
           " run_at = now() + interval '1 hour' WHERE id IN (SELECT id FROM"
           " (SELECT id, ordering_key, row_number() OVER (PARTITION BY"
           " ordering_key ORDER BY enqueue_seq) AS nth FROM onceq_items"
           " WHERE queue = '%s') k WHERE (nth = 1 AND ordering_key IN"
           " (SELECT 'key-' || g FROM generate_series(0, %d) g)) OR (nth = 2"
           " AND ordering_key IN (SELECT 'key-' || g FROM generate_series(%d,"
           " %d) g)))",
           QUEUE, FAILED_HEADS - 1, FAILED_HEADS,
           FAILED_HEADS + FAILED_LATER - 1);
  oqt_exec(db, sql);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"
                           " WHERE last_error IS NOT NULL"),
            FAILED_HEADS + FAILED_LATER);
  /* items in flight elsewhere, half keyed (with this queue's key names:
   * another queue's keys are other keys) */
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key, claim,"
           " claimed_at, attempts) SELECT 'claimed_elsewhere',"
           " jsonb_build_object('n', g), CASE WHEN g %% 2 = 0 THEN 'key-' || g"
           " END, '00000000-0000-4000-8000-0000000000bb', now(), 1"
           " FROM generate_series(1, %d) AS g",
           CLAIMED_ELSEWHERE);
  oqt_exec(db, sql);

  if (pg) {
    check_plans(db);
    check_keys_blocked(db);
  } else {
    printf("SKIP: the plans are checked on PostgreSQL only\n");
  }

  /* what the count says in that state: the failed heads, not the failed
   * items behind a head that has not failed */
  qv_snapshot snap;
  ASSERT_OK(db, qv_snapshot_take(db, false, &snap));
  const qv_qstat *q = qv_snapshot_queue(&snap, QUEUE);
  ASSERT(q != NULL);
  ASSERT_EQ(q->blocked, FAILED_HEADS);
  printf("ok in that state the count says %ld blocked keys, the %d failed "
         "heads (not the %d failed items behind a head)\n",
         q->blocked, FAILED_HEADS, FAILED_LATER);
  qv_snapshot_free(&snap);
  ASSERT_EQ(keys_blocked_listed(db, NULL), FAILED_HEADS);
  ASSERT_EQ(keys_blocked_listed(db, QUEUE), FAILED_HEADS);
  ASSERT_EQ(keys_blocked_listed(db, STATS_QUEUE), 0);
  printf("ok onceq keys --blocked lists the %d failed heads, each with %d "
         "waiting, and none for another queue\n",
         FAILED_HEADS, PER_KEY - 1);
  /* CockroachDB's texts of both (NOT EXISTS; the key index without the
   * part there) mean the same, and PostgreSQL runs them: same counts */
  char wrap[4096];
  snprintf(wrap, sizeof wrap, "SELECT sum(count) FROM (%s) b",
           qv_blocked_sql(OQ_ENGINE_COCKROACH));
  ASSERT_EQ(oqt_scalar(db, wrap), FAILED_HEADS);
  snprintf(wrap, sizeof wrap, "SELECT count(*) FROM (%s) k",
           qv_keys_blocked_sql(OQ_ENGINE_COCKROACH));
  ASSERT_EQ(QLONG(db, wrap, NULL, "true", "1000"), FAILED_HEADS);
  printf("ok CockroachDB's texts count the same on PostgreSQL\n");
  oq_db_close(db);
  return 0;
}
