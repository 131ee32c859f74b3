/*
 * wait_results.c: results and waiting (wait.h, schema v3), against the
 * harness database under ONCEQ_TEST_ISOLATION:
 *  - an acknowledged keep_result item is reported DONE with the result
 *    its ack kept (oq_ack and oq_ack_batch, per item), woken by the ack's
 *    NOTIFY on PostgreSQL (well before the 2 s re-check);
 *  - dead-lettered: DEAD with the last error; still live: OQ_ERR_TIMEOUT;
 *  - an ack that rolled back (the callback failed, or a hand-made ack
 *    transaction ending in ROLLBACK) is never reported: the item stays
 *    PENDING and no result row exists;
 *  - exactly once: a second ack of the same item is rejected, the result
 *    row stays single, concurrent waiters all see the one result;
 *  - a plain INSERT may ask (keep_result = true); oq_wait opts a live item
 *    in; results are bounded (truncated flag); unknown and bad ids.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"

static const char *g_dsn;

/* Enqueue one item asking for its result; its id into id. */
static void enqueue_keep(oq_db *db, const char *queue, int max_attempts,
                         char *id)
{
  oq_enqueue_opts o = {.queue = queue,
                       .payload = "{\"k\": 1}",
                       .max_attempts = max_attempts,
                       .keep_result = true};
  ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "keep_result",
                  id),
            1);
}

static long result_rows(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM onceq_results WHERE item_id = $1", id);
}

/* A waiter on its own thread and connection. */
typedef struct waiter {
  pthread_t t;
  const char *ids[4];
  size_t n;
  long timeout_ms;
  oq_err e;
  oq_wait_result out[4];
  uint64_t done_ms; /* monotonic time oq_wait returned */
} waiter;

static void *waiter_main(void *arg)
{
  waiter *w = arg;
  oq_db *db = oqt_connect(g_dsn);
  oq_wait_opts o = {.timeout_ms = w->timeout_ms};
  w->e = oq_wait(db, w->ids, w->n, &o, w->out);
  w->done_ms = oq_monotonic_ms();
  oq_db_close(db);
  return NULL;
}

static void waiter_start(waiter *w)
{
  ASSERT_EQ(pthread_create(&w->t, NULL, waiter_main, w), 0);
  oqt_sleep_ms(300); /* let it LISTEN and see the item live */
}

static oq_item *claim_one(oq_db *db, const oq_session *s, const char *queue)
{
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, queue, 1, &it), 1);
  return it;
}

static void test_done(oq_db *db, const oq_session *s)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wdone", 25, id);
  waiter w = {.ids = {id}, .n = 1, .timeout_ms = 10000};
  waiter_start(&w);
  oq_item *it = claim_one(db, s, "wdone");
  oq_ack_opts ao = {.result = "{\"answer\": 42}"};
  uint64_t acked_ms = oq_monotonic_ms();
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &ao, NULL));
  pthread_join(w.t, NULL);
  ASSERT_EQ(w.e, OQ_OK);
  ASSERT_EQ(w.out[0].state, OQ_WAIT_DONE);
  ASSERT_STREQ(w.out[0].result, "{\"answer\": 42}");
  ASSERT(!w.out[0].truncated);
  ASSERT_EQ(result_rows(db, id), 1);
  long woke_ms = (long)(w.done_ms - acked_ms);
  if (oq_db_traits(db)->listen_notify)
    ASSERT_LE(woke_ms, 1500); /* NOTIFY, not the 2 s re-check */
  printf("ok done: result kept by the ack, waiter woke %ld ms after it\n",
         woke_ms);
  oqt_metric("wait_wake_ms", (double)woke_ms, "ms");
  oq_wait_results_free(w.out, 1);
  oq_items_free(it, 1);
}

static void test_batch(oq_db *db, const oq_session *s)
{
  char ids[3][OQ_UUID_LEN + 1];
  for (int i = 0; i < 3; i++)
    enqueue_keep(db, "wbatch", 25, ids[i]);
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, "wbatch", 3, &it), 3);
  const char *cids[3] = {it[0].id, it[1].id, it[2].id};
  const char *res[3] = {"r0", NULL, "r2 \"quoted\" \\ back"};
  /* r0 is what is left of a longer output (a handler's own bound); a flag
   * without a result (item 1) flags nothing */
  const bool cut[3] = {true, true, false};
  const bool want_cut[3] = {true, false, false};
  oq_ack_opts ao = {.results = res, .results_truncated = cut};
  bool acked[3];
  size_t nacked = 0;
  ASSERT_OK(db, oq_ack_batch(db, s, cids, 3, acked, &nacked, &ao));
  ASSERT_EQ(nacked, 3);
  oq_wait_result out[3];
  oq_wait_opts o = {.timeout_ms = 5000};
  ASSERT_OK(db, oq_wait(db, cids, 3, &o, out));
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(out[i].state, OQ_WAIT_DONE);
    if (res[i])
      ASSERT_STREQ(out[i].result, res[i]);
    else
      ASSERT(out[i].result == NULL);
    ASSERT_EQ(out[i].truncated, want_cut[i]);
  }
  oq_wait_results_free(out, 3);
  oq_items_free(it, 3);
  printf("ok batch: each item's own result and cut flag\n");
}

/* oq_ack_many_sql: each item's first row is its result; one whose
 * statement fails is not acknowledged and gets no result; a statement
 * that returns no rows gives no result. */
static void test_many_sql(oq_db *db, const oq_session *s)
{
  char ids[4][OQ_UUID_LEN + 1];
  for (int i = 0; i < 4; i++)
    enqueue_keep(db, "wmany", 25, ids[i]);
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, "wmany", 4, &it), 4);
  /* the third claimed item fails: 1/0 */
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT $2::text AS id, $4 AS attempt,"
           " 1 / (CASE WHEN $2 = '%s'::uuid THEN 0 ELSE 1 END) AS one",
           it[2].id);
  oq_ack_result r[4];
  ASSERT_OK(db, oq_ack_many_sql(db, s, it, 4, sql, NULL, r));
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(r[i].verdict, i == 2 ? OQ_ACK_FAILED : OQ_ACK_DONE);
    if (i == 2) {
      ASSERT_EQ(result_rows(db, it[i].id), 0);
      continue;
    }
    char want[160];
    snprintf(want, sizeof want, "{\"id\": \"%s\", \"attempt\": 1, \"one\": 1}",
             it[i].id);
    const char *wid = it[i].id;
    oq_wait_result out;
    oq_wait_opts o = {.timeout_ms = 5000};
    ASSERT_OK(db, oq_wait(db, &wid, 1, &o, &out));
    ASSERT_EQ(out.state, OQ_WAIT_DONE);
    ASSERT_STREQ(out.result, want);
    oq_wait_results_free(&out, 1);
  }
  oq_items_free(it, 4);
  /* no rows: acknowledged, no result text */
  enqueue_keep(db, "wmany0", 25, ids[0]);
  ASSERT_EQ(SEM_CLAIM(db, s, "wmany0", 1, &it), 1);
  ASSERT_OK(db, oq_ack_many_sql(db, s, it, 1,
                                "INSERT INTO ledger VALUES ($2, $2, "
                                "'many')",
                                NULL, r));
  ASSERT_EQ(r[0].verdict, OQ_ACK_DONE);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_results WHERE item_id = $1 "
                  "AND result IS NULL",
                  ids[0]),
            1);
  oq_items_free(it, 1);
  printf("ok many_sql: each item's first row is its result, the failed "
         "one has none\n");
}

static void test_dead(oq_db *db, const oq_session *s)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wdead", 1, id);
  waiter w = {.ids = {id}, .n = 1, .timeout_ms = 10000};
  waiter_start(&w);
  oq_item *it = claim_one(db, s, "wdead");
  oq_fail_outcome out;
  ASSERT_OK(db, oq_fail(db, s, &it[0], "boom <script>", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_DEAD);
  pthread_join(w.t, NULL);
  ASSERT_EQ(w.e, OQ_OK);
  ASSERT_EQ(w.out[0].state, OQ_WAIT_DEAD);
  ASSERT_STREQ(w.out[0].error, "boom <script>");
  ASSERT_EQ(w.out[0].attempts, 1);
  ASSERT_EQ(result_rows(db, id), 0);
  oq_wait_results_free(w.out, 1);
  oq_items_free(it, 1);
  printf("ok dead: reported with its last error\n");
}

static void test_timeout(oq_db *db)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wtimeout", 25, id);
  const char *ids[1] = {id};
  oq_wait_result out[1];
  oq_wait_opts o = {.timeout_ms = 400};
  uint64_t t0 = oq_monotonic_ms();
  ASSERT_ERR(OQ_ERR_TIMEOUT, oq_wait(db, ids, 1, &o, out));
  long took = (long)(oq_monotonic_ms() - t0);
  ASSERT_EQ(out[0].state, OQ_WAIT_PENDING);
  ASSERT(took >= 400);
  ASSERT_LE(took, 3000);
  oq_wait_results_free(out, 1);
  printf("ok timeout: OQ_ERR_TIMEOUT after %ld ms, still pending\n", took);
}

static oq_err failing_cb(oq_db *db, const oq_item *item, void *ud)
{
  (void)ud;
  const char *p[1] = {item->id};
  /* the handler's write, rolled back with the ack */
  oq_err e =
      oq_db_exec(db, "INSERT INTO ledger VALUES ($1, $1, 'x')", 1, p, NULL);
  return e != OQ_OK ? e : OQ_ERR_CALLBACK;
}

static void test_rollback(oq_db *db, const oq_session *s)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wrollback", 25, id);
  waiter w = {.ids = {id}, .n = 1, .timeout_ms = 2500};
  waiter_start(&w);
  oq_item *it = claim_one(db, s, "wrollback");
  oq_ack_opts ao = {.result = "never"};
  /* 1. the handler fails: the ack rolls back */
  ASSERT_ERR(OQ_ERR_CALLBACK,
             oq_ack(db, s, &it[0], failing_cb, NULL, &ao, NULL));
  /* 2. an ack transaction that deleted the item and kept its result, then
   * rolled back (what a crash before COMMIT leaves) */
  oqt_exec(db, "BEGIN");
  ASSERT_EQ(QEXEC(db, "DELETE FROM onceq_items WHERE id = $1", id), 1);
  ASSERT_EQ(QEXEC(db,
                  "INSERT INTO onceq_results (item_id, queue, outcome, "
                  "result) VALUES ($1, 'wrollback', 'done', 'never')",
                  id),
            1);
  /* a check while that ack is still open, then after it rolled back: the
   * background waiter may not look inside the window, this one does */
  oq_db *other = oqt_connect(g_dsn);
  const char *ids1[1] = {id};
  oq_wait_result mid[1];
  oq_wait_opts once = {.timeout_ms = 0};
  ASSERT_ERR(OQ_ERR_TIMEOUT, oq_wait(other, ids1, 1, &once, mid));
  ASSERT_EQ(mid[0].state, OQ_WAIT_PENDING);
  oq_wait_results_free(mid, 1);
  oqt_exec(db, "ROLLBACK");
  ASSERT_ERR(OQ_ERR_TIMEOUT, oq_wait(other, ids1, 1, &once, mid));
  ASSERT_EQ(mid[0].state, OQ_WAIT_PENDING);
  ASSERT(mid[0].result == NULL);
  oq_wait_results_free(mid, 1);
  oq_db_close(other);
  pthread_join(w.t, NULL);
  ASSERT_EQ(w.e, OQ_ERR_TIMEOUT);
  ASSERT_EQ(w.out[0].state, OQ_WAIT_PENDING);
  ASSERT(w.out[0].result == NULL);
  ASSERT_EQ(result_rows(db, id), 0);
  oq_wait_results_free(w.out, 1);
  /* the real ack afterwards is reported, once */
  oq_ack_opts ok = {.result = "after"};
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &ok, NULL));
  const char *ids[1] = {id};
  oq_wait_result out[1];
  oq_wait_opts o = {.timeout_ms = 3000};
  ASSERT_OK(db, oq_wait(db, ids, 1, &o, out));
  ASSERT_EQ(out[0].state, OQ_WAIT_DONE);
  ASSERT_STREQ(out[0].result, "after");
  oq_wait_results_free(out, 1);
  oq_items_free(it, 1);
  printf("ok rollback: a rolled-back ack is never reported\n");
}

static void test_exactly_once(oq_db *db, const oq_session *s,
                              const oq_session *v)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wonce", 25, id);
  waiter w[3];
  for (int i = 0; i < 3; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].ids[0] = id;
    w[i].ids[1] = id; /* the same id twice: each slot settles once */
    w[i].n = 2;
    w[i].timeout_ms = 10000;
    ASSERT_EQ(pthread_create(&w[i].t, NULL, waiter_main, &w[i]), 0);
  }
  oqt_sleep_ms(300);
  oq_item *it = claim_one(db, s, "wonce");
  oq_ack_opts a1 = {.result = "first"}, a2 = {.result = "second"};
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &a1, NULL));
  /* a second ack (another session, then the same one) is rejected */
  ASSERT_ERR(OQ_ERR_CLAIM_LOST, oq_ack(db, v, &it[0], NULL, NULL, &a2, NULL));
  ASSERT_ERR(OQ_ERR_CLAIM_LOST, oq_ack(db, s, &it[0], NULL, NULL, &a2, NULL));
  for (int i = 0; i < 3; i++) {
    pthread_join(w[i].t, NULL);
    ASSERT_EQ(w[i].e, OQ_OK);
    for (int k = 0; k < 2; k++) {
      ASSERT_EQ(w[i].out[k].state, OQ_WAIT_DONE);
      ASSERT_STREQ(w[i].out[k].result, "first");
    }
    oq_wait_results_free(w[i].out, 2);
  }
  ASSERT_EQ(result_rows(db, id), 1);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_results WHERE item_id = $1 "
                  "AND result = 'first'",
                  id),
            1);
  oq_items_free(it, 1);
  printf("ok exactly once: one result row, every waiter sees it\n");
}

static void test_plain_insert_and_opt_in(oq_db *db, const oq_session *s)
{
  /* any language: a plain INSERT asks with the column */
  char id1[OQ_UUID_LEN + 1], id2[OQ_UUID_LEN + 1];
  ASSERT(QTEXT(db, id1,
               "INSERT INTO onceq_items (queue, payload, keep_result) VALUES "
               "($1, '{}', true) RETURNING id::text",
               "wplain"));
  /* no keep_result: oq_wait asks for it on the live item */
  ASSERT(QTEXT(db, id2,
               "INSERT INTO onceq_items (queue, payload) VALUES "
               "($1, '{}') RETURNING id::text",
               "wplain"));
  const char *ids[2] = {id1, id2};
  oq_wait_result out[2];
  oq_wait_opts once = {.timeout_ms = 0};
  ASSERT_ERR(OQ_ERR_TIMEOUT, oq_wait(db, ids, 2, &once, out));
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "keep_result",
                  id2),
            1);
  oq_wait_results_free(out, 2);
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, "wplain", 2, &it), 2);
  char big[70001];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (int i = 0; i < 2; i++) {
    oq_ack_opts ao = {.result = strcmp(it[i].id, id1) == 0 ? "plain" : big};
    ASSERT_OK(db, oq_ack(db, s, &it[i], NULL, NULL, &ao, NULL));
  }
  oq_wait_opts o = {.timeout_ms = 3000};
  ASSERT_OK(db, oq_wait(db, ids, 2, &o, out));
  ASSERT_EQ(out[0].state, OQ_WAIT_DONE);
  ASSERT_STREQ(out[0].result, "plain");
  ASSERT(!out[0].truncated);
  ASSERT_EQ(out[1].state, OQ_WAIT_DONE);
  ASSERT_EQ((long)strlen(out[1].result), OQ_RESULT_MAX_CHARS);
  ASSERT(out[1].truncated);
  oq_wait_results_free(out, 2);
  oq_items_free(it, 2);
  printf("ok plain INSERT asks; oq_wait opts in; results bounded\n");
}

/* A handler that kept only part of its output says so (oq_ack's
 * result_truncated): the waiter sees truncated though the text is short. */
static void test_single_cut(oq_db *db, const oq_session *s)
{
  char id[OQ_UUID_LEN + 1];
  enqueue_keep(db, "wcut", 25, id);
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, "wcut", 1, &it), 1);
  oq_ack_opts ao = {.result = "...the tail", .result_truncated = true};
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, &ao, NULL));
  const char *ids[1] = {id};
  oq_wait_result out[1];
  oq_wait_opts o = {.timeout_ms = 3000};
  ASSERT_OK(db, oq_wait(db, ids, 1, &o, out));
  ASSERT_EQ(out[0].state, OQ_WAIT_DONE);
  ASSERT_STREQ(out[0].result, "...the tail");
  ASSERT(out[0].truncated);
  oq_wait_results_free(out, 1);
  oq_items_free(it, 1);
  printf("ok single: a result the handler cut is truncated\n");
}

static void test_bad_ids(oq_db *db)
{
  const char *ids[1] = {"00000000-0000-0000-0000-000000000000"};
  oq_wait_result out[1];
  oq_wait_opts o = {.timeout_ms = 1000};
  ASSERT_OK(db, oq_wait(db, ids, 1, &o, out));
  ASSERT_EQ(out[0].state, OQ_WAIT_UNKNOWN);
  oq_wait_results_free(out, 1);
  const char *bad[1] = {"not-a-uuid"};
  ASSERT_ERR(OQ_ERR_INVALID, oq_wait(db, bad, 1, &o, out));
  oq_wait_results_free(out, 1);
  printf("ok unknown and invalid ids\n");
}

int main(void)
{
  g_dsn = oqt_fresh_db("wait_results", 1);
  oq_db *db = oqt_connect(g_dsn);
  oqt_exec(db, SEM_LEDGER_DDL);
  oq_session *s = SEM_LONG_SESSION(db);
  oq_session *v = SEM_LONG_SESSION(db);

  test_done(db, s);
  test_batch(db, s);
  test_single_cut(db, s);
  test_many_sql(db, s);
  test_dead(db, s);
  test_timeout(db);
  test_rollback(db, s);
  test_exactly_once(db, s, v);
  test_plain_insert_and_opt_in(db, s);
  test_bad_ids(db);

  ASSERT_OK(db, oq_session_end(db, s));
  ASSERT_OK(db, oq_session_end(db, v));
  oq_session_free(s);
  oq_session_free(v);
  oq_db_close(db);
  printf("PASS it_lib_wait_results (isolation: %s)\n", oqt_isolation());
  return 0;
}
