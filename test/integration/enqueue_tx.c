/*
 * enqueue_tx.c: enqueue is a plain INSERT in the caller's transaction, and
 * claim takes only ready items of the asked queues, in priority order, at
 * most `max`, counting the attempt at claim time.
 *
 * Checks: rolled-back enqueues never run and uncommitted ones are invisible;
 * delay_ms / run_at; priority order (then run_at); queue filtering; the
 * claim's max and attempt counting; the defaults that make a plain SQL
 * INSERT claimable.
 */
#include <stdbool.h>

#include "oq_test.h"
#include "sem_util.h"

static void enqueue(oq_db *db, const oq_enqueue_opts *o, char *id)
{
  oq_enqueue_status st = OQ_ENQUEUE_DUPLICATE;
  ASSERT_OK(db, oq_enqueue(db, o, id, &st));
  ASSERT_EQ(st, OQ_ENQUEUED);
  ASSERT_EQ(strlen(id), OQ_UUID_LEN);
}

/* A rolled-back enqueue is never claimed; an open one is invisible; a
 * committed one is claimed. */
static void test_rollback(oq_db *db, oq_db *db2, const oq_session *s)
{
  char rb1[OQ_UUID_LEN + 1], rb2[OQ_UUID_LEN + 1], c1[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "tx", .payload = "{\"k\": \"rolled back\"}"};
  oqt_exec(db2, "BEGIN");
  enqueue(db2, &o, rb1);
  enqueue(db2, &o, rb2);
  oqt_exec(db2, "ROLLBACK");
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE id IN ($1, $2)",
                  rb1, rb2),
            0);

  o.payload = "{\"k\": \"committed\"}";
  oqt_exec(db2, "BEGIN");
  enqueue(db2, &o, c1);
  /* Not committed yet: nobody can claim it. */
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "tx", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  oqt_exec(db2, "COMMIT");

  n = SEM_CLAIM(db, s, "tx", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, c1);
  ASSERT_STREQ(it[0].queue, "tx");
  ASSERT_CONTAINS(it[0].payload, "committed");
  ASSERT_EQ(it[0].attempt, 1);
  oq_items_free(it, n);
  n = SEM_CLAIM(db, s, "tx", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  printf("ok rollback: rolled back never claimed, open invisible\n");
}

/* delay_ms: not claimable before now() + delay; run_at in the future; a
 * past run_at wins over delay_ms. */
static void test_delay(oq_db *db, const oq_session *s)
{
  char id[OQ_UUID_LEN + 1], fut[OQ_UUID_LEN + 1], past[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "delay", .delay_ms = 1500};
  uint64_t t0 = oq_monotonic_ms();
  enqueue(db, &o, id);
  long gap = QLONG(db,
                   "SELECT round(extract(epoch FROM run_at - created_at) "
                   "* 1000)::bigint FROM onceq_items WHERE id = $1",
                   id);
  ASSERT_LE(1490, gap);
  ASSERT_LE(gap, 1600);

  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "delay", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  uint64_t got_at = 0;
  while (oq_monotonic_ms() - t0 < 5000) {
    n = SEM_CLAIM(db, s, "delay", 10, &it);
    if (n > 0) {
      got_at = oq_monotonic_ms();
      ASSERT_EQ(n, 1);
      ASSERT_STREQ(it[0].id, id);
      oq_items_free(it, n);
      break;
    }
    oq_items_free(it, n);
    oqt_sleep_ms(50);
  }
  if (!got_at)
    OQT_FAIL("an item with delay_ms 1500 was not claimable after 5 s");
  printf("delay 1500 ms: first claimed after %llu ms\n",
         (unsigned long long)(got_at - t0));
  /* not early; "not too late" is the 5 s loop bound (a loaded or
   * sanitizer-built run needs the slack) */
  ASSERT_LE(1450, got_at - t0);

  oq_enqueue_opts of = {.queue = "future", .run_at = "2999-01-01T00:00:00Z"};
  enqueue(db, &of, fut);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "run_at = '2999-01-01T00:00:00Z'::timestamptz",
                  fut),
            1);
  n = SEM_CLAIM(db, s, "future", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);

  /* run_at set: delay_ms is ignored. */
  oq_enqueue_opts op = {.queue = "past",
                        .run_at = "2000-01-01T00:00:00Z",
                        .delay_ms = 3600 * 1000};
  enqueue(db, &op, past);
  n = SEM_CLAIM(db, s, "past", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, past);
  oq_items_free(it, n);
  printf("ok delay/run_at\n");
}

/* Higher priority first; equal priority: earlier run_at first; a
 * high-priority item that is not ready does not block ready ones. */
static void test_priority(oq_db *db, const oq_session *s)
{
  static const int prios[] = {0, 5, -3, 10, 1};
  static const int want[] = {10, 5, 1, 0, -3};
  char id[OQ_UUID_LEN + 1];
  oqt_exec(db, "BEGIN");
  for (size_t i = 0; i < sizeof prios / sizeof prios[0]; i++) {
    char payload[32];
    snprintf(payload, sizeof payload, "{\"p\": %d}", prios[i]);
    oq_enqueue_opts o = {
        .queue = "prio", .payload = payload, .priority = prios[i]};
    enqueue(db, &o, id);
  }
  oqt_exec(db, "COMMIT");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(db, s, "prio", 1, &it);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(it[0].priority, want[i]);
    oq_items_free(it, n);
  }

  char late[OQ_UUID_LEN + 1], early[OQ_UUID_LEN + 1];
  char notyet[OQ_UUID_LEN + 1], low[OQ_UUID_LEN + 1];
  oq_enqueue_opts ol = {
      .queue = "tie", .priority = 7, .run_at = "2001-01-01T00:00:00Z"};
  oq_enqueue_opts oe = {
      .queue = "tie", .priority = 7, .run_at = "2000-01-01T00:00:00Z"};
  enqueue(db, &ol, late);
  enqueue(db, &oe, early);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "tie", 1, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, early);
  oq_items_free(it, n);
  n = SEM_CLAIM(db, s, "tie", 1, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, late);
  oq_items_free(it, n);

  oq_enqueue_opts on = {
      .queue = "ready", .priority = 100, .run_at = "2999-01-01T00:00:00Z"};
  oq_enqueue_opts ow = {.queue = "ready", .priority = -100};
  enqueue(db, &on, notyet);
  enqueue(db, &ow, low);
  n = SEM_CLAIM(db, s, "ready", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, low);
  oq_items_free(it, n);
  printf("ok priority order\n");
}

/* Claiming queue "a" never returns "b" items. */
static void test_queues(oq_db *db, const oq_session *s)
{
  oqt_enqueue_n(db, "a", 3);
  oqt_enqueue_n(db, "b", 4);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "a", 10, &it);
  ASSERT_EQ(n, 3);
  for (size_t i = 0; i < n; i++)
    ASSERT_STREQ(it[i].queue, "a");
  oq_items_free(it, n);
  n = SEM_CLAIM(db, s, "a", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  n = SEM_CLAIM(db, s, "c", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);

  const char *qs[2] = {"c", "b"};
  n = 0;
  ASSERT_OK(db, oq_claim(db, s, qs, 2, 10, &it, &n));
  ASSERT_EQ(n, 4);
  for (size_t i = 0; i < n; i++)
    ASSERT_STREQ(it[i].queue, "b");
  oq_items_free(it, n);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items WHERE "
                           "queue IN ('a', 'b') AND claim IS NULL"),
            0);
  printf("ok queue filtering\n");
}

/* claim 3 of 10 returns exactly 3, attempt 1, attempts = 1 in the DB. */
static void test_max(oq_db *db, const oq_session *s)
{
  const char *sid = oq_session_id(s);
  oqt_enqueue_n(db, "max", 10);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "max", 3, &it);
  ASSERT_EQ(n, 3);
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(it[i].attempt, 1);
    ASSERT_EQ(it[i].max_attempts, OQ_DEFAULT_MAX_ATTEMPTS);
    ASSERT_EQ(it[i].priority, 0);
    ASSERT_STREQ(it[i].queue, "max");
    ASSERT_CONTAINS(it[i].payload, "\"n\"");
    ASSERT(it[i].enqueued_at_us > 0);
    ASSERT_LE(it[i].enqueued_at_us, it[i].claimed_at_us);
    ASSERT_EQ(QLONG(db,
                    "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                    "attempts = 1 AND claim = $2 AND claimed_at IS NOT NULL",
                    it[i].id, sid),
              1);
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      ASSERT(strcmp(it[i].id, it[j].id) != 0);
  oq_items_free(it, n);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = 'max' AND "
                  "claim = $1",
                  sid),
            3);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items WHERE "
                           "queue = 'max' AND claim IS NULL AND attempts = 0"),
            7);
  n = SEM_CLAIM(db, s, "max", 100, &it);
  ASSERT_EQ(n, 7);
  oq_items_free(it, n);
  ASSERT_EQ(oqt_scalar(db, "SELECT sum(attempts) FROM onceq_items WHERE "
                           "queue = 'max'"),
            10);
  printf("ok claim max\n");
}

/* Defaults: a plain SQL INSERT and an all-defaults oq_enqueue. */
static void test_defaults(oq_db *db, const oq_session *s)
{
  oqt_exec(db, "INSERT INTO onceq_items (queue, payload) "
               "VALUES ('q', '{\"x\":1}')");
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "q", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].queue, "q");
  ASSERT_CONTAINS(it[0].payload, "\"x\"");
  ASSERT_EQ(it[0].attempt, 1);
  ASSERT_EQ(it[0].max_attempts, OQ_DEFAULT_MAX_ATTEMPTS);
  ASSERT_EQ(it[0].priority, 0);
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);

  char id[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {0};
  ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "queue = 'default' AND payload = '{}'::jsonb AND "
                  "max_attempts = 25 AND priority = 0 AND attempts = 0 AND "
                  "unique_key IS NULL AND claim IS NULL",
                  id),
            1);
  n = SEM_CLAIM(db, s, OQ_DEFAULT_QUEUE, 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, id);
  oq_items_free(it, n);

  oq_enqueue_opts o7 = {.queue = "seven", .max_attempts = 7};
  enqueue(db, &o7, id);
  n = SEM_CLAIM(db, s, "seven", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(it[0].max_attempts, 7);
  oq_items_free(it, n);
  printf("ok defaults and plain INSERT\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("enqueue_tx", 1);
  oq_db *db = oqt_connect(dsn);
  oq_db *db2 = oqt_connect(dsn);
  oq_session *s = SEM_LONG_SESSION(db);

  test_rollback(db, db2, s);
  test_delay(db, s);
  test_priority(db, s);
  test_queues(db, s);
  test_max(db, s);
  test_defaults(db, s);

  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db2);
  oq_db_close(db);
  printf("PASS it_lib_enqueue_tx (isolation: %s)\n", oqt_isolation());
  return 0;
}
