/*
 * serializable_retries.c: under SERIALIZABLE, real serialization failures
 * (40001) happen and the transaction runner absorbs them without losing or
 * doubling any ack effect.
 *
 * 4 workers drain 2,000 items; each ack callback does a read-modify-write
 * on ONE counter row plus a ledger insert. Two ack transactions that
 * overlap on that row cannot both commit under SERIALIZABLE, so restarts
 * are certain. The counter must still end at exactly 2,000 (each committed
 * ack ran its callback's effect once), the ledger must hold 2,000 rows for
 * 2,000 distinct items, and the queue must be empty.
 *
 * Runs only when the harness isolation is serializable (exit 77 otherwise).
 */
#include "drain_workers.h"

#include <strings.h>

#define SR_THREADS 4
#define SR_ITEMS 2000
#define SR_BATCH 8
#define SR_LIMIT_S 300

/* The ack's effects: one hot row plus one ledger row. */
static oq_err counter_ack(oq_db *db, const oq_item *item, void *ud)
{
  const oq_session *s = ud;
  long affected = 0;
  oq_err e = oq_db_exec(db, "UPDATE counters SET n = n + 1 WHERE id = 1", 0,
                        NULL, &affected);
  if (e != OQ_OK)
    return e; /* 40001 here must make the runner restart, not give up */
  if (affected != 1)
    return OQ_ERR_CALLBACK;
  const char *p[2] = {item->id, oq_session_id(s)};
  return oq_db_exec(db,
                    "INSERT INTO ledger (item_id, session_id) VALUES ($1, $2)",
                    2, p, NULL);
}

int main(void)
{
  if (strcasecmp(oqt_isolation(), "serializable") != 0) {
    fprintf(stderr,
            "SKIP: serializable_retries needs "
            "ONCEQ_TEST_ISOLATION=serializable (got \"%s\")\n",
            oqt_isolation());
    return 77;
  }
  const char *dsn = oqt_fresh_db("serializable_retries", 1);
  oq_db *db = oqt_connect(dsn);

  /* The test database really runs SERIALIZABLE by default. */
  long is_ser =
      oqt_scalar(db, "SELECT (current_setting('transaction_isolation') = "
                     "'serializable')::int");
  ASSERT_EQ(is_ser, 1);

  oqt_exec(db, "CREATE TABLE counters (id int PRIMARY KEY, n bigint NOT NULL)");
  oqt_exec(db, "INSERT INTO counters VALUES (1, 0)");
  oqt_exec(db, "CREATE TABLE ledger (item_id uuid NOT NULL, "
               "session_id uuid NOT NULL)");
  oqt_enqueue_n(db, "ser", SR_ITEMS);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), SR_ITEMS);

  oqt_drain_opts o = {.dsn = dsn,
                      .queue = "ser",
                      .nthreads = SR_THREADS,
                      .batch = SR_BATCH,
                      .time_limit_s = SR_LIMIT_S,
                      .ack_fn = counter_ack};
  oqt_drain_stats st;
  oqt_drain(&o, &st); /* fails on any claim/ack that is not OQ_OK */

  uint64_t restarts = st.restarts + oq_db_restarts(db);
  oqt_metric("serializable_restarts", (double)restarts, "restarts");
  oqt_metric("serializable_items_per_s",
             st.elapsed_s > 0 ? SR_ITEMS / st.elapsed_s : 0.0, "items/s");

  ASSERT(restarts > 0); /* the retry path really ran */
  ASSERT_EQ(st.acked, SR_ITEMS);
  ASSERT_EQ(oqt_scalar(db, "SELECT n FROM counters WHERE id = 1"), SR_ITEMS);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM ledger"), SR_ITEMS);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(DISTINCT item_id) FROM ledger"),
            SR_ITEMS);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), 0);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_dead"), 0);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_sessions"), 0);

  oq_db_close(db);
  printf("PASS it_lib_serializable_retries (%llu restarts)\n",
         (unsigned long long)restarts);
  return 0;
}
