/*
 * history.c: with opts.history the ack also writes onceq_done, in the ack
 * transaction: an ack that commits leaves exactly one history row, an ack
 * that rolls back (claim lost, or the callback failed) leaves none, and
 * without history nothing is written. The same for oq_ack_batch.
 */
#include <stdbool.h>

#include "oq_test.h"
#include "sem_util.h"

typedef struct cb_ctx {
  const oq_session *s;
  oq_err ret; /* what the callback returns after its ledger row */
  int runs;
} cb_ctx;

static oq_err ledger_cb(oq_db *db, const oq_item *item, void *ud)
{
  cb_ctx *c = ud;
  const char *p[3] = {item->id, oq_session_id(c->s), "h"};
  c->runs++;
  oq_err e = oq_db_exec(db, SEM_LEDGER_INSERT, 3, p, NULL);
  return e != OQ_OK ? e : c->ret;
}

static long done_rows(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM onceq_done WHERE item_id = $1", id);
}

static long ledger_rows(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM ledger WHERE item_id = $1", id);
}

/* Claim exactly one item of queue, or fail. */
static oq_item *claim_one(oq_db *db, const oq_session *s, const char *queue)
{
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, queue, 1, &it);
  ASSERT_EQ(n, 1);
  return it;
}

static void test_single(oq_db *db, const oq_session *s, const oq_session *v)
{
  const char *sid = oq_session_id(s);
  oq_ack_opts hist = {.history = true, .result = "r1"};
  oq_ack_opts nohist = {.history = false, .result = "ignored"};

  /* history on: one row with the item's facts. */
  oqt_enqueue_n(db, "hist", 1);
  oq_item *it = claim_one(db, s, "hist");
  char created[64];
  ASSERT(QTEXT(db, created,
               "SELECT created_at::text FROM onceq_items WHERE id = $1",
               it[0].id));
  cb_ctx ok = {s, OQ_OK, 0};
  ASSERT_OK(db, oq_ack(db, s, &it[0], ledger_cb, &ok, &hist, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 1);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_done WHERE item_id = $1 AND "
                  "queue = 'hist' AND attempts = 1 AND session_id = $2 AND "
                  "result = 'r1' AND created_at = $3::timestamptz AND "
                  "done_at IS NOT NULL",
                  it[0].id, sid, created),
            1);
  ASSERT_EQ(ledger_rows(db, it[0].id), 1);
  oq_items_free(it, 1);

  /* history off, or no opts: nothing in onceq_done. */
  oqt_enqueue_n(db, "nohist", 2);
  it = claim_one(db, s, "nohist");
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &nohist, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 0);
  oq_items_free(it, 1);
  it = claim_one(db, s, "nohist");
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, NULL, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 0);
  oq_items_free(it, 1);

  /* The attempt that succeeded is recorded; result may be NULL. */
  oqt_enqueue_n(db, "hist2", 1);
  it = claim_one(db, s, "hist2");
  oq_fail_outcome out = (oq_fail_outcome)-1;
  ASSERT_OK(db, oq_fail(db, s, &it[0], "first try", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_RETRY);
  oq_items_free(it, 1);
  it = claim_one(db, s, "hist2");
  ASSERT_EQ(it[0].attempt, 2);
  oq_ack_opts hist_null = {.history = true, .result = NULL};
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &hist_null, NULL));
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_done WHERE item_id = $1 AND "
                  "attempts = 2 AND result IS NULL",
                  it[0].id),
            1);
  oq_items_free(it, 1);

  /* Claim lost (released, then another session's): the ack rolls back,
   * history and the callback's row with it. */
  oqt_enqueue_n(db, "histlost", 2);
  oq_item *lost = NULL;
  size_t n = SEM_CLAIM(db, s, "histlost", 2, &lost);
  ASSERT_EQ(n, 2);
  ASSERT_EQ(QEXEC(db, "UPDATE onceq_items SET claim = NULL WHERE id = $1",
                  lost[0].id),
            1);
  ASSERT_EQ(QEXEC(db, "UPDATE onceq_items SET claim = $1 WHERE id = $2",
                  oq_session_id(v), lost[1].id),
            1);
  for (size_t i = 0; i < n; i++) {
    cb_ctx c = {s, OQ_OK, 0};
    ASSERT_ERR(OQ_ERR_CLAIM_LOST,
               oq_ack(db, s, &lost[i], ledger_cb, &c, &hist, NULL));
    ASSERT_EQ(done_rows(db, lost[i].id), 0);
    ASSERT_EQ(ledger_rows(db, lost[i].id), 0);
    ASSERT_EQ(
        QLONG(db, "SELECT count(*) FROM onceq_items WHERE id = $1", lost[i].id),
        1);
  }
  oq_items_free(lost, n);

  /* The callback fails: its code comes back, nothing is written, the item
   * stays ours; a later ack succeeds and writes history once. */
  oqt_enqueue_n(db, "histcb", 1);
  it = claim_one(db, s, "histcb");
  cb_ctx bad = {s, OQ_ERR_CALLBACK, 0};
  ASSERT_ERR(OQ_ERR_CALLBACK,
             oq_ack(db, s, &it[0], ledger_cb, &bad, &hist, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 0);
  ASSERT_EQ(ledger_rows(db, it[0].id), 0);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim = $2 AND attempts = 1",
                  it[0].id, sid),
            1);
  cb_ctx good = {s, OQ_OK, 0};
  ASSERT_OK(db, oq_ack(db, s, &it[0], ledger_cb, &good, &hist, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 1);
  ASSERT_EQ(ledger_rows(db, it[0].id), 1);
  /* A second ack of the acked item: claim lost, still one history row. */
  ASSERT_ERR(OQ_ERR_CLAIM_LOST,
             oq_ack(db, s, &it[0], ledger_cb, &good, &hist, NULL));
  ASSERT_EQ(done_rows(db, it[0].id), 1);
  ASSERT_EQ(ledger_rows(db, it[0].id), 1);
  oq_items_free(it, 1);

  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done"), 3);
  printf("ok oq_ack history: written with the ack, rolled back with it\n");
}

static void test_batch(oq_db *db, const oq_session *s)
{
  const char *sid = oq_session_id(s);
  oqt_enqueue_n(db, "hbatch", 6);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "hbatch", 6, &it);
  ASSERT_EQ(n, 6);
  const char *ids[6];
  for (size_t i = 0; i < n; i++)
    ids[i] = it[i].id;
  /* 2: released meanwhile; 5: acknowledged by someone else. */
  ASSERT_EQ(
      QEXEC(db, "UPDATE onceq_items SET claim = NULL WHERE id = $1", ids[2]),
      1);
  ASSERT_EQ(QEXEC(db, "DELETE FROM onceq_items WHERE id = $1", ids[5]), 1);

  oq_ack_opts hist = {.history = true, .result = "batch"};
  bool acked[6];
  memset(acked, 0, sizeof acked);
  size_t nacked = 99;
  ASSERT_OK(db, oq_ack_batch(db, s, ids, 6, acked, &nacked, &hist));
  ASSERT_EQ(nacked, 4);
  for (size_t i = 0; i < n; i++) {
    bool want = !(i == 2 || i == 5);
    if (acked[i] != want)
      OQT_FAIL("oq_ack_batch: acked[%zu] = %d, want %d", i, (int)acked[i],
               (int)want);
    ASSERT_EQ(done_rows(db, ids[i]), want ? 1 : 0);
    if (!want)
      continue;
    ASSERT_EQ(QLONG(db,
                    "SELECT count(*) FROM onceq_done WHERE item_id = $1 "
                    "AND queue = 'hbatch' AND attempts = 1 AND "
                    "session_id = $2",
                    ids[i], sid),
              1);
    /* opts.result is kept by the batch too, as by oq_ack. */
    char result[64];
    if (!QTEXT(db, result, "SELECT result FROM onceq_done WHERE item_id = $1",
               ids[i]))
      snprintf(result, sizeof result, "(null)");
    ASSERT_STREQ(result, "batch");
  }
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done "
                           "WHERE queue = 'hbatch'"),
            4);

  /* Without history: nothing written. */
  oqt_enqueue_n(db, "hbatch0", 3);
  oq_item *it0 = NULL;
  size_t n0 = SEM_CLAIM(db, s, "hbatch0", 3, &it0);
  ASSERT_EQ(n0, 3);
  const char *ids0[3] = {it0[0].id, it0[1].id, it0[2].id};
  bool acked0[3] = {false, false, false};
  nacked = 99;
  ASSERT_OK(db, oq_ack_batch(db, s, ids0, 3, acked0, &nacked, NULL));
  ASSERT_EQ(nacked, 3);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done "
                           "WHERE queue = 'hbatch0'"),
            0);
  oq_items_free(it0, n0);

  /* Again, all lost: no history either. */
  memset(acked, 0, sizeof acked);
  nacked = 99;
  ASSERT_OK(db, oq_ack_batch(db, s, ids, 6, acked, &nacked, &hist));
  ASSERT_EQ(nacked, 0);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done "
                           "WHERE queue = 'hbatch'"),
            4);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done"), 7);
  oq_items_free(it, n);
  printf("ok oq_ack_batch history: exactly the acked items\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("history", 1);
  oq_db *db = oqt_connect(dsn);
  oqt_exec(db, SEM_LEDGER_DDL);
  oq_session *s = SEM_LONG_SESSION(db);
  oq_session *v = SEM_LONG_SESSION(db);

  test_single(db, s, v);
  test_batch(db, s);

  ASSERT_OK(db, oq_session_end(db, s));
  ASSERT_OK(db, oq_session_end(db, v));
  oq_session_free(s);
  oq_session_free(v);
  oq_db_close(db);
  printf("PASS it_lib_history (isolation: %s)\n", oqt_isolation());
  return 0;
}
