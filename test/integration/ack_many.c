/*
 * ack_many.c: batches acknowledged in one transaction (ack.h, "Batches"),
 * pipelined (oq_ack_many_sql) and with a callback (oq_ack_many). An item's
 * effect must commit if and only if that item is acknowledged:
 *  - all good: every item acked, one ledger row each;
 *  - some handler statements fail: those items are OQ_ACK_FAILED with the
 *    server's message, nothing of theirs is written and they stay claimed
 *    (for oq_fail); the others are acked;
 *  - some claims were taken over: those are OQ_ACK_LOST, nothing of theirs
 *    is written, and the takers' claims are untouched;
 *  - two threads with two sessions ack disjoint batches concurrently
 *    (restarts under SERIALIZABLE): the ledger is exact.
 * The ledger has no unique key, so a double effect shows as a second row.
 */
#include <pthread.h>

#include "oq_test.h"
#include "sem_util.h"

#define LEDGER_SQL                                                             \
  "INSERT INTO ledger (item_id, note)"                                         \
  " SELECT $2, 'n' || (100 / ($1->>'d')::int)::text"

static oq_err ledger_cb(oq_db *db, const oq_item *it, void *ud)
{
  (void)ud;
  const char *p[2] = {it->id, it->payload};
  static const unsigned int types[2] = {OQ_OID_UUID, OQ_OID_JSONB};
  return oq_db_exec_typed(db,
                          "INSERT INTO ledger (item_id, note)"
                          " SELECT $1, 'n' || (100 / ($2->>'d')::int)::text",
                          2, types, p, NULL);
}

static void enqueue_d(oq_db *db, const char *queue, int n, int zero_every)
{
  for (int i = 1; i <= n; i++) {
    char payload[64];
    snprintf(payload, sizeof payload, "{\"d\": %d}",
             zero_every && i % zero_every == 0 ? 0 : i);
    ASSERT_EQ(QEXEC(db,
                    "INSERT INTO onceq_items (queue, payload) VALUES ($1, "
                    "$2::jsonb)",
                    queue, payload),
              1);
  }
}

static long ledger_of(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM ledger WHERE item_id = $1", id);
}

/* mode 0: pipelined statement, 1: callback */
static void run_mixed(oq_db *admin, oq_db *db, int mode)
{
  const char *queue = mode ? "cb" : "sql";
  oq_session *s = SEM_LONG_SESSION(db);
  oq_session *other = SEM_LONG_SESSION(admin);
  enqueue_d(admin, queue, 12, 5); /* items 5 and 10 divide by zero */
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, queue, 100, &it);
  ASSERT_EQ(n, 12);
  /* two claims taken over by another session before the ack */
  int taken[2] = {0, 0};
  int nt = 0;
  for (size_t i = 0; i < n && nt < 2; i++)
    if (!strstr(it[i].payload, "\"d\": 0")) {
      ASSERT_EQ(QEXEC(admin, "UPDATE onceq_items SET claim = $1 WHERE id = $2",
                      oq_session_id(other), it[i].id),
                1);
      taken[nt++] = (int)i;
    }
  oq_ack_result res[12];
  memset(res, 0xff, sizeof res);
  oq_err e = mode ? oq_ack_many(db, s, it, n, ledger_cb, NULL, NULL, res)
                  : oq_ack_many_sql(db, s, it, n, LEDGER_SQL, NULL, res);
  ASSERT_OK(db, e);
  int done = 0, failed = 0, lost = 0;
  for (size_t i = 0; i < n; i++) {
    bool zero = strstr(it[i].payload, "\"d\": 0") != NULL;
    bool was_taken = (int)i == taken[0] || (int)i == taken[1];
    if (zero) {
      ASSERT_EQ(res[i].verdict, OQ_ACK_FAILED);
      ASSERT_CONTAINS(res[i].error, "division by zero");
      ASSERT_EQ(ledger_of(admin, it[i].id), 0);
      ASSERT_EQ(QLONG(admin,
                      "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                      "claim = $2",
                      it[i].id, oq_session_id(s)),
                1);
      failed++;
    } else if (was_taken) {
      ASSERT_EQ(res[i].verdict, OQ_ACK_LOST);
      ASSERT_EQ(ledger_of(admin, it[i].id), 0);
      ASSERT_EQ(QLONG(admin,
                      "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                      "claim = $2",
                      it[i].id, oq_session_id(other)),
                1);
      lost++;
    } else {
      ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
      ASSERT_EQ(ledger_of(admin, it[i].id), 1);
      ASSERT_EQ(QLONG(admin, "SELECT count(*) FROM onceq_items WHERE id = $1",
                      it[i].id),
                0);
      done++;
    }
  }
  ASSERT_EQ(done, 8);
  ASSERT_EQ(failed, 2);
  ASSERT_EQ(lost, 2);
  printf("ok %s: 8 acked, 2 failed (nothing written, still claimed), 2 lost "
         "(nothing written, the taker's claim untouched)\n",
         mode ? "oq_ack_many" : "oq_ack_many_sql");
  oq_items_free(it, n);
  oq_session_free(s);
  oq_session_free(other);
}

typedef struct worker_arg {
  const char *dsn;
  const char *queue;
  int acked;
  uint64_t restarts;
} worker_arg;

/* Claim and batch-ack until the queue is empty. */
static void *batch_worker(void *p)
{
  worker_arg *a = p;
  oq_db *db = oqt_connect(a->dsn);
  oq_session *s = SEM_LONG_SESSION(db);
  const char *q[1] = {a->queue};
  for (int round = 0; round < 1000; round++) {
    oq_item *it = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, s, q, 1, 25, &it, &n));
    if (n == 0)
      break;
    oq_ack_result res[25];
    ASSERT_OK(db, oq_ack_many_sql(db, s, it, n, LEDGER_SQL, NULL, res));
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
      a->acked++;
    }
    oq_items_free(it, n);
  }
  a->restarts = oq_db_restarts(db);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  return NULL;
}

int main(void)
{
  const char *dsn = oqt_fresh_db("ack_many", 1);
  oq_db *admin = oqt_connect(dsn);
  /* the worker's side as the least-privilege role under
   * ONCEQ_TEST_ROLE=worker (oq_test.h) */
  char wdsn[1200];
  oqt_copy(wdsn, sizeof wdsn, oqt_worker_dsn(dsn));
  oq_db *db = oqt_connect(wdsn);
  oqt_exec(admin, "CREATE TABLE ledger (item_id uuid NOT NULL, note text)");
  run_mixed(admin, db, 0);
  run_mixed(admin, db, 1);

  /* a statement that deletes its own item: the check cannot succeed though
   * every claim is still ours; instead of running the same round forever,
   * each item gets a round of its own, where it fails (a failed attempt
   * for oq_fail, not a loss: issue 20), and nothing of the batch commits */
  {
    oq_session *s = SEM_LONG_SESSION(db);
    enqueue_d(admin, "self", 3, 0);
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(db, s, "self", 10, &it);
    ASSERT_EQ(n, 3);
    oq_ack_result res[3];
    uint64_t t0 = oq_monotonic_ms();
    oq_err e = oq_ack_many_sql(
        db, s, it, n, "DELETE FROM onceq_items WHERE id = $2", NULL, res);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_LE(oq_monotonic_ms() - t0, 10000);
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(res[i].verdict, OQ_ACK_FAILED);
      ASSERT_CONTAINS(res[i].error, "touched its own onceq_items row");
    }
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM onceq_items WHERE queue = $1 AND "
                    "claim = $2",
                    "self", oq_session_id(s)),
              3);
    /* the same item twice in one batch is refused */
    oq_item twice[2] = {it[0], it[0]};
    ASSERT_ERR(OQ_ERR_INVALID,
               oq_ack_many_sql(db, s, twice, 2, LEDGER_SQL, NULL, res));
    ASSERT_CONTAINS(oq_db_errmsg(db), it[0].id);
    /* wherever the second copy is (the ids are sorted to find it) */
    oq_item apart[4] = {it[2], it[0], it[1], it[2]};
    oq_ack_result res4[4];
    ASSERT_ERR(OQ_ERR_INVALID,
               oq_ack_many_sql(db, s, apart, 4, LEDGER_SQL, NULL, res4));
    ASSERT_CONTAINS(oq_db_errmsg(db), "is in the batch twice");
    ASSERT_CONTAINS(oq_db_errmsg(db), it[2].id);
    ASSERT_EQ(QEXEC(admin, "DELETE FROM onceq_items WHERE queue = $1", "self"),
              3);
    oq_items_free(it, n);
    oq_session_free(s);
    printf("ok a batch whose statement deletes its own item: each item a "
           "failed attempt, not a loop; duplicates refused\n");
  }

  /* a COPY as the statement: libpq would wait in the COPY state forever;
   * the call ends within its retry budget instead. TO STDOUT needs nothing
   * from the client, so the server may finish the batch (acked); FROM
   * STDIN never does (the claims stay ours, an error) */
  {
    oq_retry_policy rp = oq_retry_policy_tx();
    rp.max_total_ms = 3000;
    oq_db_opts o = {.conninfo = wdsn, .retry = &rp};
    oq_db *cdb = NULL;
    char err[OQ_ERRBUF_SIZE];
    if (oq_db_open(&o, &cdb, err, sizeof err) != OQ_OK)
      OQT_FAIL("open: %s", err);
    oqt_exec(admin, "CREATE TABLE copy_in (x int)");
    const char *const sqls[2] = {"COPY (SELECT 1) TO STDOUT",
                                 "COPY copy_in FROM STDIN"};
    for (int k = 0; k < 2; k++) {
      oq_session *s = SEM_LONG_SESSION(cdb);
      enqueue_d(admin, "copy", 2, 0);
      oq_item *it = NULL;
      size_t n = SEM_CLAIM(cdb, s, "copy", 10, &it);
      ASSERT_EQ(n, 2);
      oq_ack_result res[2];
      uint64_t t0 = oq_monotonic_ms();
      oq_err e = oq_ack_many_sql(cdb, s, it, n, sqls[k], NULL, res);
      uint64_t ms = oq_monotonic_ms() - t0;
      long left = QLONG(admin,
                        "SELECT count(*) FROM onceq_items WHERE queue = $1 AND "
                        "claim = $2",
                        "copy", oq_session_id(s));
      printf("%s: %s after %llu ms (%s), %ld still claimed\n", sqls[k],
             oq_strerror(e), (unsigned long long)ms, oq_db_errmsg(cdb), left);
      ASSERT_LE(ms, 15000);
      if (e == OQ_OK) {
        ASSERT_EQ(left, 0);
      } else {
        ASSERT_EQ(left, 2);
        ASSERT(strstr(oq_db_errmsg(cdb), "COPY") != NULL);
      }
      QEXEC(admin, "DELETE FROM onceq_items WHERE queue = $1", "copy");
      oq_items_free(it, n);
      if (!oq_db_connected(cdb))
        ASSERT_OK(cdb, oq_db_reconnect(cdb));
      oq_session_free(s);
    }
    ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM copy_in"), 0);
    oq_db_close(cdb);
    printf("ok a COPY statement ends within its budget\n");
  }

  /* concurrent batches, two sessions */
  enqueue_d(admin, "conc", 600, 0);
  worker_arg a[2] = {{wdsn, "conc", 0, 0}, {wdsn, "conc", 0, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, batch_worker, &a[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  ASSERT_EQ(a[0].acked + a[1].acked, 600);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger WHERE item_id IN "
                              "(SELECT item_id FROM ledger GROUP BY item_id "
                              "HAVING count(*) > 1)"),
            0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items WHERE queue "
                              "= 'conc'"),
            0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger"), 600 + 16);
  printf("ok concurrent batches: 600 acked exactly once (%d + %d), %llu "
         "restarts\n",
         a[0].acked, a[1].acked,
         (unsigned long long)(a[0].restarts + a[1].restarts));
  oq_db_close(db);
  oq_db_close(admin);
  printf("PASS it_lib_ack_many (isolation: %s)\n", oqt_isolation());
  return 0;
}
