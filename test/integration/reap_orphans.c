/*
 * reap_orphans.c: items whose claim names a session row that is gone (a
 * row deleted by hand, not through onceq: no release in its transaction)
 * are released by the reap (OQ__SQL_RELEASE_ORPHANS, lib/src/dialect.c),
 * within a bounded time by a running reaper thread (what every worker
 * runs), and only those: the claims of live sessions stay.
 *
 * Four sessions claim 250 items each; the orphans are the first and third
 * in uuid order, so the sweep's loose scan of the claim index has to step
 * over live claims to find them. Before any row is deleted, on PostgreSQL,
 * the sweep's plan (EXPLAIN ANALYZE; it releases nothing then) reads the
 * claim index once per session holding claims, not once per claimed item:
 * it runs on every reap of every worker (docs/design.md section 4a).
 * Runs under the harness's isolation (READ COMMITTED and SERIALIZABLE).
 */
#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "orphans"
#define NSESS 4
#define PER 250
#define BOUND_MS 5000 /* the reaper below runs every 200 ms (+/- 25%) */

/* Prints each line of the sweep's plan and keeps the most rows one scan
 * of onceq_items_claim returned (each loop counted alone: "actual rows=N
 * loops=M"); -1 until a line names that index. */
static oq_err scan_rows(void *ud, int ncols, const char *const *vals)
{
  long *most = ud;
  if (ncols < 1 || !vals[0])
    return OQ_OK;
  printf("%s\n", vals[0]);
  const char *idx = strstr(vals[0], "onceq_items_claim");
  const char *rows = idx ? strstr(idx, "actual rows=") : NULL;
  if (rows) {
    long n = strtol(rows + strlen("actual rows="), NULL, 10);
    if (n > *most)
      *most = n;
  }
  return OQ_OK;
}

/* EXPLAIN ANALYZE the sweep (it releases nothing when run: no orphan). */
static long claim_index_rows(oq_db *db)
{
  char sql[4096];
  int len = snprintf(sql, sizeof sql,
                     "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) %s",
                     oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_RELEASE_ORPHANS));
  if (len < 0 || (size_t)len >= sizeof sql)
    OQT_FAIL("the sweep does not fit the EXPLAIN buffer");
  long most = -1;
  ASSERT_OK(db, oq_db_query(db, sql, 0, NULL, scan_rows, &most));
  if (most < 0)
    OQT_FAIL("the sweep's plan (above) reads no onceq_items_claim");
  return most;
}

/* Items claimed by a session whose row is gone. */
static long orphaned(oq_db *db)
{
  return oqt_scalar(db, "SELECT count(*) FROM onceq_items i"
                        " WHERE i.claim IS NOT NULL AND NOT EXISTS"
                        " (SELECT 1 FROM onceq_sessions s"
                        " WHERE s.id = i.claim)");
}

/* Delete by hand the session row of rank `offset` in uuid order. */
static void delete_by_hand(oq_db *db, int offset)
{
  char sql[256];
  snprintf(sql, sizeof sql,
           "DELETE FROM onceq_sessions WHERE id = (SELECT id FROM"
           " onceq_sessions ORDER BY id OFFSET %d LIMIT 1)",
           offset);
  oqt_exec(db, sql);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("reap_orphans", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *reaper = oqt_connect(dsn);
  oq_db *dbc = oqt_connect(oqt_worker_dsn(dsn));
  oqt_enqueue_n(admin, QUEUE, 2 * NSESS * PER);
  oq_session *s[NSESS];
  for (int i = 0; i < NSESS; i++) {
    oq_item *items = NULL;
    s[i] = SEM_LONG_SESSION(dbc);
    ASSERT_EQ(SEM_CLAIM(dbc, s[i], QUEUE, PER, &items), PER);
    oq_items_free(items, PER);
  }
  oqt_exec(admin, "VACUUM ANALYZE onceq_items");

  if (oq_db_engine(admin) == OQ_ENGINE_POSTGRES) {
    long most = claim_index_rows(admin);
    if (most > 2 * NSESS)
      OQT_FAIL("the orphan sweep read %ld rows of onceq_items_claim in one "
               "scan for %d sessions holding %d claims: it reads every "
               "claimed item, on every reap",
               most, NSESS, NSESS * PER);
    printf("ok the sweep reads the claim index %ld row(s) at most per scan "
           "(%d sessions, %d claimed items)\n",
           most, NSESS, NSESS * PER);
  } else {
    printf("SKIP: the sweep's plan is checked on PostgreSQL only\n");
  }
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            NSESS * PER);

  /* the first in uuid order: released by the next reap, which deletes
   * no session (none has expired) */
  delete_by_hand(admin, 0);
  ASSERT_EQ(orphaned(admin), PER);
  int ns = -1;
  ASSERT_OK(reaper, oq_reap(reaper, &ns, NULL));
  ASSERT_EQ(ns, 0);
  ASSERT_EQ(orphaned(admin), 0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            (NSESS - 1) * PER);
  printf("ok oq_reap releases the items of a session deleted by hand\n");

  /* the third of the four (second of the three left): a reaper thread
   * releases it within a bounded time, the live claims around it stay */
  delete_by_hand(admin, 1);
  ASSERT_EQ(orphaned(admin), PER);
  oq_db_opts o = {.conninfo = dsn, .application_name = "onceq-test-reaper"};
  oq_reaper *r = NULL;
  char err[OQ_ERRBUF_SIZE];
  oq_err e = oq_reaper_start(&o, 200, &r, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("oq_reaper_start: %s: %s", oq_strerror(e), err);
  uint64_t t0 = oq_monotonic_ms();
  long left = PER;
  while ((left = orphaned(admin)) > 0 && oq_monotonic_ms() - t0 < BOUND_MS)
    oqt_sleep_ms(50);
  uint64_t took = oq_monotonic_ms() - t0;
  oq_reaper_stop(r);
  if (left != 0)
    OQT_FAIL("%ld item(s) still claimed by a deleted session after %d ms "
             "of a reaper running every 200 ms",
             left, BOUND_MS);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            (NSESS - 2) * PER);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(DISTINCT claim) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            NSESS - 2);
  printf("ok a reaper thread releases them in %llu ms; live claims stay\n",
         (unsigned long long)took);
  for (int i = 0; i < NSESS; i++)
    oq_session_free(s[i]);
  oq_db_close(dbc);
  oq_db_close(reaper);
  oq_db_close(admin);
  return 0;
}
