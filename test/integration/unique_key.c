/*
 * unique_key.c: at most one live item per unique_key.
 *
 * Checks: a second enqueue with the same key (separate committed
 * transactions) inserts nothing and returns OQ_ENQUEUE_DUPLICATE with the
 * existing id; a duplicate inside a transaction leaves it usable; a claimed
 * item still holds its key, an acknowledged or dead-lettered one does not;
 * two concurrent transactions with the same key (the second blocks until
 * the first ends) leave exactly one item, whether the first commits or
 * rolls back.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "oq_test.h"
#include "sem_util.h"

static oq_enqueue_status enqueue_key(oq_db *db, const char *queue,
                                     const char *key, const char *payload,
                                     char *id)
{
  oq_enqueue_status st = (oq_enqueue_status)-1;
  oq_enqueue_opts o = {.queue = queue, .payload = payload, .unique_key = key};
  ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  ASSERT_EQ(strlen(id), OQ_UUID_LEN);
  return st;
}

static long key_rows(oq_db *db, const char *key)
{
  return QLONG(db, "SELECT count(*) FROM onceq_items WHERE unique_key = $1",
               key);
}

static void test_sequential(oq_db *db)
{
  char id1[OQ_UUID_LEN + 1], id2[OQ_UUID_LEN + 1], id3[OQ_UUID_LEN + 1];
  oqt_exec(db, "BEGIN");
  ASSERT_EQ(enqueue_key(db, "u", "k1", "{\"v\": \"first\"}", id1), OQ_ENQUEUED);
  oqt_exec(db, "COMMIT");
  oqt_exec(db, "BEGIN");
  ASSERT_EQ(enqueue_key(db, "u", "k1", "{\"v\": \"second\"}", id2),
            OQ_ENQUEUE_DUPLICATE);
  oqt_exec(db, "COMMIT");
  ASSERT_STREQ(id2, id1);
  ASSERT_EQ(key_rows(db, "k1"), 1);
  char v[64];
  ASSERT(
      QTEXT(db, v, "SELECT payload->>'v' FROM onceq_items WHERE id = $1", id1));
  ASSERT_STREQ(v, "first");

  /* Outside an explicit transaction too. */
  ASSERT_EQ(enqueue_key(db, "u", "k1", NULL, id3), OQ_ENQUEUE_DUPLICATE);
  ASSERT_STREQ(id3, id1);
  ASSERT_EQ(key_rows(db, "k1"), 1);

  /* A duplicate does not break the caller's transaction. */
  char ka[OQ_UUID_LEN + 1], kb[OQ_UUID_LEN + 1];
  oqt_exec(db, "BEGIN");
  ASSERT_EQ(enqueue_key(db, "u", "k1", NULL, ka), OQ_ENQUEUE_DUPLICATE);
  ASSERT_EQ(enqueue_key(db, "u", "k2", NULL, kb), OQ_ENQUEUED);
  oqt_exec(db, "COMMIT");
  ASSERT_STREQ(ka, id1);
  ASSERT_EQ(key_rows(db, "k2"), 1);
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE id = $1", kb), 1);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items "
                           "WHERE queue = 'u'"),
            2);
  printf("ok sequential duplicates\n");
}

/* The key belongs to the live item: claimed still holds it; acked or
 * dead-lettered frees it. */
static void test_lifecycle(oq_db *db, const oq_session *s)
{
  char id1[OQ_UUID_LEN + 1], id2[OQ_UUID_LEN + 1], id3[OQ_UUID_LEN + 1];
  ASSERT_EQ(enqueue_key(db, "life", "k5", NULL, id1), OQ_ENQUEUED);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "life", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(enqueue_key(db, "life", "k5", NULL, id2), OQ_ENQUEUE_DUPLICATE);
  ASSERT_STREQ(id2, id1);
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  ASSERT_EQ(enqueue_key(db, "life", "k5", NULL, id3), OQ_ENQUEUED);
  ASSERT(strcmp(id3, id1) != 0);
  ASSERT_EQ(key_rows(db, "k5"), 1);

  /* Dead-lettered: the key is free again. */
  char d1[OQ_UUID_LEN + 1], d2[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "life1", .unique_key = "k6", .max_attempts = 1};
  oq_enqueue_status st = (oq_enqueue_status)-1;
  ASSERT_OK(db, oq_enqueue(db, &o, d1, &st));
  ASSERT_EQ(st, OQ_ENQUEUED);
  n = SEM_CLAIM(db, s, "life1", 10, &it);
  ASSERT_EQ(n, 1);
  oq_fail_outcome out = OQ_FAIL_RETRY;
  ASSERT_OK(db, oq_fail(db, s, &it[0], "gone", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_DEAD);
  oq_items_free(it, n);
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_dead WHERE id = $1", d1), 1);
  ASSERT_EQ(enqueue_key(db, "life1", "k6", NULL, d2), OQ_ENQUEUED);
  ASSERT(strcmp(d2, d1) != 0);
  printf("ok key lifecycle (claimed holds, acked/dead frees)\n");
}

/* The second transaction, on its own thread and connection. */
typedef struct second_tx {
  oq_db *db;
  const char *key;
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_status status;
  oq_err result;
  int runs;        /* transaction bodies run (restarts re-run it) */
  atomic_int done; /* oq_db_transact returned */
} second_tx;

static oq_err second_body(oq_db *db, void *ud)
{
  second_tx *t = ud;
  oq_enqueue_opts o = {
      .queue = "conc", .unique_key = t->key, .payload = "{\"v\": \"second\"}"};
  t->runs++;
  t->status = (oq_enqueue_status)-1;
  return oq_enqueue(db, &o, t->id, &t->status);
}

static void *second_main(void *arg)
{
  second_tx *t = arg;
  t->result = oq_db_transact(t->db, second_body, t);
  atomic_store(&t->done, 1);
  return NULL;
}

/* Two connections enqueue the same key at once. The first holds its
 * transaction open; the second blocks on the key until the first ends. */
static void test_concurrent(oq_db *db1, oq_db *db2, oq_db *admin,
                            const char *key, bool first_commits)
{
  char id1[OQ_UUID_LEN + 1];
  oqt_exec(db1, "BEGIN");
  ASSERT_EQ(enqueue_key(db1, "conc", key, "{\"v\": \"first\"}", id1),
            OQ_ENQUEUED);

  second_tx t;
  memset(&t, 0, sizeof t);
  t.db = db2;
  t.key = key;
  t.result = OQ_ERR__COUNT;
  atomic_init(&t.done, 0);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, second_main, &t), 0);

  /* Bounded wait until the second really waits on the first's key. */
  uint64_t t0 = oq_monotonic_ms();
  long waiting = 0;
  while (oq_monotonic_ms() - t0 < 5000) {
    waiting = oqt_scalar(admin, "SELECT count(*) FROM pg_stat_activity WHERE "
                                "datname = current_database() AND "
                                "wait_event_type = 'Lock' AND "
                                "pid <> pg_backend_pid()");
    if (waiting > 0 || atomic_load(&t.done))
      break;
    oqt_sleep_ms(10);
  }
  oqt_sleep_ms(100);
  ASSERT_EQ(atomic_load(&t.done), 0); /* it blocks while the first is open */
  ASSERT_EQ(waiting, 1);

  oqt_exec(db1, first_commits ? "COMMIT" : "ROLLBACK");
  t0 = oq_monotonic_ms();
  while (!atomic_load(&t.done) && oq_monotonic_ms() - t0 < 10000)
    oqt_sleep_ms(10);
  if (!atomic_load(&t.done))
    OQT_FAIL("second enqueue of %s still blocked 10 s after the first "
             "transaction ended",
             key);
  pthread_join(th, NULL);
  if (t.result != OQ_OK)
    OQT_FAIL("second transaction (%s): %s (%s)", key, oq_strerror(t.result),
             oq_db_errmsg(db2));
  printf("concurrent %s (%s): second tx body ran %d time(s), restarts %llu\n",
         key, first_commits ? "first commits" : "first rolls back", t.runs,
         (unsigned long long)oq_db_restarts(db2));

  ASSERT_EQ(key_rows(admin, key), 1);
  char v[64];
  if (first_commits) {
    ASSERT_EQ(t.status, OQ_ENQUEUE_DUPLICATE);
    ASSERT_STREQ(t.id, id1);
    ASSERT(QTEXT(admin, v,
                 "SELECT payload->>'v' FROM onceq_items WHERE unique_key = $1",
                 key));
    ASSERT_STREQ(v, "first");
  } else {
    ASSERT_EQ(t.status, OQ_ENQUEUED);
    ASSERT(strcmp(t.id, id1) != 0);
    ASSERT_EQ(
        QLONG(admin, "SELECT count(*) FROM onceq_items WHERE id = $1", id1), 0);
    ASSERT(QTEXT(admin, v,
                 "SELECT payload->>'v' FROM onceq_items WHERE id = $1", t.id));
    ASSERT_STREQ(v, "second");
  }
  printf("ok concurrent same key, first %s\n",
         first_commits ? "commits" : "rolls back");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("unique_key", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *db1 = oqt_connect(dsn);
  oq_db *db2 = oqt_connect(dsn);
  oq_session *s = SEM_LONG_SESSION(admin);

  test_sequential(db1);
  test_lifecycle(db1, s);
  test_concurrent(db1, db2, admin, "k3", true);
  test_concurrent(db1, db2, admin, "k4", false);

  ASSERT_OK(admin, oq_session_end(admin, s));
  oq_session_free(s);
  oq_db_close(db2);
  oq_db_close(db1);
  oq_db_close(admin);
  printf("PASS it_lib_unique_key (isolation: %s)\n", oqt_isolation());
  return 0;
}
