/*
 * ack_own_row.c: an ack handler whose statement deletes or unclaims its
 * own onceq_items row (issue 20, finding 3). The claim-checked DELETE then
 * finds no row although, after the rollback, the item is still ours. That
 * once read as "claim lost": the worker dropped the job, the sweep released
 * it with attempts - 1, the next claim added 1, and the item ran forever
 * without dead-lettering. It is a failed attempt (OQ_ERR_CALLBACK, or
 * OQ_ACK_FAILED in a batch, whose other items commit), and its message
 * names onceq_items:
 *  - single:  oq_ack with a handler that DELETEs, then one that UPDATEs
 *             (claim = NULL) its own row: OQ_ERR_CALLBACK each time, the
 *             item still ours; oq_fail counts it; the third attempt moves
 *             it to onceq_dead with that message;
 *  - batch:   oq_ack_many_sql (pipelined) and oq_ack_many (callback) over
 *             4 items where one item's statement touches its own row: that
 *             item is OQ_ACK_FAILED, the other 3 are acknowledged with
 *             their ledger rows, the call returns OQ_OK.
 *  - split:   oq_ack_many_sql over 3 items whose statement fails with 40001
 *             whenever an earlier item ran in the same transaction (a long
 *             batch that keeps losing serialization conflicts, as in the
 *             chaos test's CockroachDB-traits pass): after its second
 *             restart the batch goes one item per transaction, and all 3
 *             are acknowledged, each in a transaction of its own.
 * A genuinely lost claim stays OQ_ERR_CLAIM_LOST (it_lib_ambiguous_commit,
 * it_lib_ack_many).
 */
#include "oq_test.h"
#include "sem_util.h"

#define DEL_OWN "DELETE FROM onceq_items WHERE id = $1::uuid"
#define UNCLAIM_OWN                                                            \
  "UPDATE onceq_items SET claim = NULL, claimed_at = NULL WHERE id = $1::uuid"

static oq_err touch_own(oq_db *db, const oq_item *it, void *ud)
{
  const char *sql = ud;
  const char *p[1] = {it->id};
  return oq_db_exec(db, sql, 1, p, NULL);
}

/* Three attempts of one item whose handler runs sql on its own row: each
 * a failed attempt, the last one dead-letters. */
static void run_single(oq_db *admin, oq_db *db, const char *queue,
                       const char *sql)
{
  oq_session *s = SEM_LONG_SESSION(db);
  ASSERT_EQ(QEXEC(admin,
                  "INSERT INTO onceq_items (queue, payload, max_attempts)"
                  " VALUES ($1, '{}', 3)",
                  queue),
            1);
  for (int attempt = 1; attempt <= 3; attempt++) {
    oq_item *items = NULL;
    size_t n = SEM_CLAIM(db, s, queue, 1, &items);
    if (n != 1)
      OQT_FAIL("%s: attempt %d: claimed %zu items, want 1 (the item should "
               "be ready again at once)",
               queue, attempt, n);
    ASSERT_EQ(items[0].attempt, attempt);
    oq_err e = oq_ack(db, s, &items[0], touch_own, (void *)sql, NULL, NULL);
    char msg[OQ_ERRBUF_SIZE];
    oqt_copy(msg, sizeof msg, oq_db_errmsg(db));
    printf("%s attempt %d: oq_ack -> %s: %s\n", queue, attempt, oq_strerror(e),
           msg);
    fflush(stdout);
    ASSERT_ERR(OQ_ERR_CALLBACK, e);
    ASSERT_CONTAINS(msg, "onceq_items");
    /* rolled back: the row is there, still ours */
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM onceq_items WHERE id = $1::uuid"
                    " AND claim = $2::uuid",
                    items[0].id, oq_session_id(s)),
              1);
    oq_fail_outcome out = OQ_FAIL_RETRY;
    ASSERT_OK(db, oq_fail(db, s, &items[0], msg, 0, &out));
    ASSERT_EQ(out, attempt < 3 ? OQ_FAIL_RETRY : OQ_FAIL_DEAD);
    oq_items_free(items, n);
  }
  char err[512];
  ASSERT(QTEXT(admin, err,
               "SELECT last_error || ' (attempts ' || attempts || ')'"
               " FROM onceq_dead WHERE queue = $1",
               queue));
  printf("%s dead: %s\n", queue, err);
  ASSERT_CONTAINS(err, "onceq_items");
  ASSERT_CONTAINS(err, "(attempts 3)");
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
}

/* The batch callback: the ledger row, and for payload n = 2 also sql on
 * its own row. */
static oq_err batch_cb(oq_db *db, const oq_item *it, void *ud)
{
  const char *p[1] = {it->id};
  oq_err e = oq_db_exec(db, "INSERT INTO ledger (item_id) VALUES ($1::uuid)", 1,
                        p, NULL);
  if (e == OQ_OK && strstr(it->payload, "\"n\": 2"))
    e = touch_own(db, it, ud);
  return e;
}

/* mode 0: pipelined statement, 1: callback */
static void run_batch(oq_db *admin, oq_db *db, int mode)
{
  const char *queue = mode ? "batch_cb" : "batch_sql";
  oq_session *s = SEM_LONG_SESSION(db);
  for (int i = 1; i <= 4; i++) {
    char payload[32];
    snprintf(payload, sizeof payload, "{\"n\": %d}", i);
    ASSERT_EQ(QEXEC(admin,
                    "INSERT INTO onceq_items (queue, payload, max_attempts)"
                    " VALUES ($1, $2::jsonb, 3)",
                    queue, payload),
              1);
  }
  oq_item *items = NULL;
  size_t n = SEM_CLAIM(db, s, queue, 10, &items);
  ASSERT_EQ(n, 4);
  oq_ack_result res[4];
  oq_err e =
      mode ? oq_ack_many(db, s, items, n, batch_cb, (void *)UNCLAIM_OWN, NULL,
                         res)
           : oq_ack_many_sql(db, s, items, n,
                             "WITH d AS (DELETE FROM onceq_items"
                             " WHERE id = $2 AND $1->>'n' = '2' RETURNING 1)"
                             " INSERT INTO ledger (item_id)"
                             " SELECT $2 FROM (SELECT count(*) FROM d) c",
                             NULL, res);
  printf("%s: -> %s (%s); verdicts", queue, oq_strerror(e),
         e == OQ_OK ? "" : oq_db_errmsg(db));
  for (size_t i = 0; i < n; i++)
    printf(" %d", (int)res[i].verdict);
  printf("\n");
  fflush(stdout);
  ASSERT_ERR(OQ_OK, e);
  size_t bad = n;
  for (size_t i = 0; i < n; i++) {
    if (strstr(items[i].payload, "\"n\": 2")) {
      bad = i;
      printf("%s: the failed item: %s\n", queue, res[i].error);
      ASSERT_EQ(res[i].verdict, OQ_ACK_FAILED);
      ASSERT_CONTAINS(res[i].error, "onceq_items");
      ASSERT_EQ(QLONG(admin,
                      "SELECT count(*) FROM onceq_items WHERE id = $1::uuid"
                      " AND claim = $2::uuid",
                      items[i].id, oq_session_id(s)),
                1);
    } else {
      ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
    }
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM ledger WHERE item_id = $1::uuid",
                    items[i].id),
              i == bad ? 0 : 1);
  }
  ASSERT(bad < n);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_items WHERE queue = $1", queue),
      1);
  oq_items_free(items, n);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
}

/* A batch whose rounds of more than one item always restart (40001). */
static void run_split(oq_db *admin, oq_db *db)
{
  oqt_exec(admin, "CREATE TABLE split_seen (tx bigint, item_id uuid)");
  oqt_exec(admin,
           "CREATE FUNCTION split_check(n bigint) RETURNS int LANGUAGE plpgsql"
           " AS $$ BEGIN IF n > 0 THEN RAISE EXCEPTION 'another item ran in"
           " this transaction' USING ERRCODE = '40001'; END IF; RETURN 1;"
           " END $$");
  oq_session *s = SEM_LONG_SESSION(db);
  for (int i = 1; i <= 3; i++)
    ASSERT_EQ(QEXEC(admin, "INSERT INTO onceq_items (queue) VALUES ('split')"),
              1);
  oq_item *items = NULL;
  size_t n = SEM_CLAIM(db, s, "split", 10, &items);
  ASSERT_EQ(n, 3);
  oq_ack_result res[3];
  oq_err e = oq_ack_many_sql(
      db, s, items, n,
      "WITH c AS (SELECT split_check((SELECT count(*) FROM split_seen"
      " WHERE tx = txid_current())) AS ok)"
      " INSERT INTO split_seen SELECT txid_current(), $2 FROM c",
      NULL, res);
  printf("split: -> %s (%s); verdicts %d %d %d\n", oq_strerror(e),
         e == OQ_OK ? "" : oq_db_errmsg(db), (int)res[0].verdict,
         (int)res[1].verdict, (int)res[2].verdict);
  fflush(stdout);
  ASSERT_ERR(OQ_OK, e);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
  ASSERT_EQ(QLONG(admin, "SELECT count(DISTINCT tx) FROM split_seen"), 3);
  ASSERT_EQ(QLONG(admin, "SELECT count(DISTINCT item_id) FROM split_seen"), 3);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_items WHERE queue = 'split'"),
      0);
  oq_items_free(items, n);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
}

/* Usage: it_lib_ack_own_row [single|batch|split]   (default: all) */
int main(int argc, char **argv)
{
  const char *only = argc > 1 ? argv[1] : "";
  const char *dsn = oqt_fresh_db("ack_own_row", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *db = oqt_connect(oqt_worker_dsn(dsn));
  oqt_exec(admin, "CREATE TABLE ledger (item_id uuid NOT NULL)");
  bool all = !*only;
  if (all || strcmp(only, "single") == 0) {
    run_single(admin, db, "single_delete", DEL_OWN);
    run_single(admin, db, "single_unclaim", UNCLAIM_OWN);
  }
  if (all || strcmp(only, "batch") == 0) {
    run_batch(admin, db, 0);
    run_batch(admin, db, 1);
  }
  if (all || strcmp(only, "split") == 0)
    run_split(admin, db);
  oq_db_close(db);
  oq_db_close(admin);
  printf("PASS (isolation %s)\n", oqt_isolation());
  return 0;
}
