/*
 * stress.c: 8 workers drain 20,000 items and each item's ack effect lands
 * exactly once.
 *
 * Every thread has its own connection, session and heartbeat. The ack
 * callback writes (item_id, session_id) into `ledger`, a table WITHOUT a
 * unique constraint, so a second committed ack of any item would show up
 * as an extra row. Nothing reaps during the run, so every ack must return
 * OQ_OK (a claim lost here is a bug). ONCEQ_STRESS_ITEMS overrides the item
 * count (sanitizer builds use fewer).
 *
 * Prints METRIC stress_items_per_s and stress_restarts.
 */
#include "drain_workers.h"

#include <errno.h>

#define STRESS_THREADS 8
#define STRESS_BATCH 16
#define STRESS_LIMIT_S 300
#define STRESS_DEFAULT_ITEMS 20000
#define STRESS_ENQUEUE_TXS 4 /* the items are enqueued in this many txs */

/* The ack's own effect, inside the ack transaction. */
static oq_err ledger_ack(oq_db *db, const oq_item *item, void *ud)
{
  const oq_session *s = ud;
  const char *p[2] = {item->id, oq_session_id(s)};
  return oq_db_exec(db,
                    "INSERT INTO ledger (item_id, session_id) VALUES ($1, $2)",
                    2, p, NULL);
}

static long stress_items(void)
{
  const char *v = getenv("ONCEQ_STRESS_ITEMS");
  if (!v || !*v)
    return STRESS_DEFAULT_ITEMS;
  char *end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n <= 0 || n > 10000000)
    OQT_FAIL("ONCEQ_STRESS_ITEMS=\"%s\": want an integer in 1..10000000", v);
  return n;
}

int main(void)
{
  long n_items = stress_items();
  const char *dsn = oqt_fresh_db("stress", 1);
  oq_db *db = oqt_connect(dsn);
  uint64_t restarts_main;

  oqt_exec(db, "CREATE TABLE ledger (item_id uuid NOT NULL, "
               "session_id uuid NOT NULL)");

  /* Enqueue everything first, in a few transactions. */
  uint64_t t0 = oq_monotonic_ms();
  long left = n_items;
  for (int t = 0; t < STRESS_ENQUEUE_TXS && left > 0; t++) {
    long chunk = (t == STRESS_ENQUEUE_TXS - 1)
                     ? left
                     : (n_items + STRESS_ENQUEUE_TXS - 1) / STRESS_ENQUEUE_TXS;
    if (chunk > left)
      chunk = left;
    oqt_enqueue_n(db, "stress", (int)chunk);
    left -= chunk;
  }
  uint64_t t1 = oq_monotonic_ms();
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items "
                           "WHERE queue = 'stress' AND claim IS NULL"),
            n_items);
  printf("enqueued %ld items in %.2f s\n", n_items, (double)(t1 - t0) / 1000.0);

  oqt_drain_opts o = {.dsn = dsn,
                      .queue = "stress",
                      .nthreads = STRESS_THREADS,
                      .batch = STRESS_BATCH,
                      .time_limit_s = STRESS_LIMIT_S,
                      .ack_fn = ledger_ack};
  oqt_drain_stats st;
  oqt_drain(&o, &st); /* fails the test on any claim/ack error */

  /* Exactly once: one ledger row per item, no item left behind. */
  ASSERT_EQ(st.acked, n_items);
  ASSERT_EQ(st.claimed, n_items); /* no reaping: nothing is claimed twice */
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM ledger"), n_items);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(DISTINCT item_id) FROM ledger"),
            n_items);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), 0);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_dead"), 0);
  /* Every worker ended its session gracefully. */
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_sessions"), 0);
  /* The work really was shared (with this many items one thread cannot
   * plausibly take them all). */
  if (n_items >= 1000)
    ASSERT(oqt_scalar(db, "SELECT count(DISTINCT session_id) FROM ledger") >=
           2);

  restarts_main = oq_db_restarts(db);
  oqt_metric("stress_items_per_s",
             st.elapsed_s > 0 ? (double)n_items / st.elapsed_s : 0.0,
             "items/s");
  oqt_metric("stress_restarts", (double)(st.restarts + restarts_main),
             "restarts");
  oq_db_close(db);
  printf("PASS it_lib_stress (%ld items, isolation %s)\n", n_items,
         oqt_isolation());
  return 0;
}
