/*
 * item_ids.c: on PostgreSQL an item's default id is a version 7 UUID
 * (schema v10, onceq_item_id()): its first 48 bits are the Unix time in
 * milliseconds when it was made, so ids grow with time and the claims'
 * index writes stay on a few pages (docs/benchmarks.md, "Time-ordered
 * item ids"). CockroachDB keeps random ids (0010_item_id_order.crdb.sql).
 *
 * Checks, for the three ways items come in (oq_enqueue, oq_enqueue_many,
 * a producer's plain INSERT): every default id has version 7 and the RFC
 * 9562 variant, and its time is the server's, to a minute; an item
 * enqueued in a later transaction (3 ms later) has a larger id; the ids of
 * one bulk INSERT or oq_enqueue_many never go back in time in enqueue
 * order; two INSERTs 5 ms apart in one transaction get different times
 * (clock_timestamp(), not the transaction's now()); onceq_items_ready has
 * enqueue_seq after run_at.
 */
#include <string.h>
#include <time.h>

#include "oq_test.h"
#include "sem_util.h"

/* version nibble 7, variant bits 10 (hex 8..b): text positions 14 and 19 */
static void assert_v7(const char *id)
{
  ASSERT_EQ((long)strlen(id), 36);
  if (id[14] != '7' || !strchr("89ab", id[19]))
    OQT_FAIL("not a version 7 UUID: %s", id);
}

/* The id's time against the server's clock, in ms. */
#define ID_SKEW_MS                                                             \
  "SELECT abs(('x' || substr(replace($1, '-', ''), 1, 12))::bit(48)::int8"     \
  " - floor(date_part('epoch', clock_timestamp()) * 1000)::int8)"

static void enqueue_one(oq_db *db, char *id)
{
  oq_enqueue_status st = (oq_enqueue_status)-1;
  oq_enqueue_opts o = {.queue = "ids"};
  ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  ASSERT_EQ((long)st, (long)OQ_ENQUEUED);
}

static void test_enqueue(oq_db *db)
{
  char a[OQ_UUID_LEN + 1], b[OQ_UUID_LEN + 1];
  enqueue_one(db, a);
  struct timespec gap = {0, 3 * 1000 * 1000};
  nanosleep(&gap, NULL);
  enqueue_one(db, b);
  assert_v7(a);
  assert_v7(b);
  if (strcmp(a, b) >= 0)
    OQT_FAIL("an item enqueued 3 ms later has no larger id: %s, then %s", a, b);
  if (QLONG(db, ID_SKEW_MS, a) > 60000)
    OQT_FAIL("id %s does not carry the server's time", a);
  printf("ok oq_enqueue: version 7 ids, growing with time\n");
}

typedef struct many_ctx {
  char id[4][OQ_UUID_LEN + 1];
  int n;
} many_ctx;

static oq_err on_new(void *ud, int ncols, const char *const *v)
{
  many_ctx *c = ud;
  if (ncols < 2 || !v[1] || c->n >= 4)
    return OQ_ERR_SQL;
  oqt_copy(c->id[c->n++], sizeof c->id[0], v[1]);
  return OQ_OK;
}

static oq_err many_tx(oq_db *db, void *ud)
{
  many_ctx *c = ud;
  c->n = 0;
  oq_enqueue_opts o = {.queue = "ids-many"};
  return oq_enqueue_many(db, &o, "[{\"k\": 1}, {\"k\": 2}, {\"k\": 3}]", NULL,
                         on_new, c);
}

static void test_enqueue_many(oq_db *db)
{
  many_ctx c = {.n = 0};
  ASSERT_OK(db, oq_db_transact(db, many_tx, &c));
  ASSERT_EQ(c.n, 3);
  for (int i = 0; i < 3; i++) {
    assert_v7(c.id[i]);
    /* the time part (first 13 characters) never decreases in array order */
    if (i > 0 && strncmp(c.id[i - 1], c.id[i], 13) > 0)
      OQT_FAIL("element %d's id %s is older than element %d's %s", i + 1,
               c.id[i], i, c.id[i - 1]);
  }
  printf("ok oq_enqueue_many: version 7 ids in array order\n");
}

static void test_plain_insert(oq_db *db)
{
  oqt_exec(db, "INSERT INTO onceq_items (queue, payload)"
               " SELECT 'ids-bulk', jsonb_build_object('k', g)"
               " FROM generate_series(1, 3000) g");
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"
                           " WHERE queue = 'ids-bulk' AND (substr(id::text,"
                           " 15, 1) <> '7' OR substr(id::text, 20, 1)"
                           " NOT IN ('8', '9', 'a', 'b'))"),
            0);
  /* enqueue order is enqueue_seq (docs/enqueue.md): no id's time is older
   * than the one before it */
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM (SELECT substr(id::text, 1,"
                           " 13) t, lag(substr(id::text, 1, 13)) OVER (ORDER"
                           " BY enqueue_seq) p FROM onceq_items WHERE queue ="
                           " 'ids-bulk') s WHERE t < p"),
            0);
  /* the time is the INSERT's (clock_timestamp()), not its transaction's
   * (now()): two INSERTs 5 ms apart in one transaction differ */
  ASSERT_EQ(oqt_scalar(db, "WITH a AS (INSERT INTO onceq_items (queue) VALUES"
                           " ('ids-tx') RETURNING id), w AS (SELECT"
                           " pg_sleep(0.005) FROM a), b AS (INSERT INTO"
                           " onceq_items (queue) SELECT 'ids-tx' FROM w"
                           " RETURNING id) SELECT (substr(b.id::text, 1, 13) >"
                           " substr(a.id::text, 1, 13))::int FROM a, b"),
            1);
  long times = oqt_scalar(db, "SELECT count(DISTINCT substr(id::text, 1, 13))"
                              " FROM onceq_items WHERE queue = 'ids-bulk'");
  printf("ok plain INSERT: 3,000 version 7 ids, %ld times, in enqueue order\n",
         times);
}

/* The ready index walks the items of one (priority, run_at) in enqueue
 * order, so their ids come in order too. */
static void test_ready_index(oq_db *db)
{
  ASSERT_EQ(oqt_scalar(db, "SELECT (pg_get_indexdef('onceq_items_ready'"
                           "::regclass) LIKE '%(queue, priority DESC, run_at,"
                           " enqueue_seq, part) WHERE (claim IS NULL)')::int"),
            1);
  printf("ok onceq_items_ready: (queue, priority DESC, run_at, enqueue_seq,"
         " part)\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("item_ids", 1);
  oq_db *db = oqt_connect(dsn);
  if (oq_db_engine(db) != OQ_ENGINE_POSTGRES) {
    printf(
        "SKIP: CockroachDB keeps random ids (0010_item_id_order.crdb.sql)\n");
    return 77;
  }
  test_enqueue(db);
  test_enqueue_many(db);
  test_plain_insert(db);
  test_ready_index(db);
  oq_db_close(db);
  printf("PASS it_lib_item_ids (isolation: %s)\n", oqt_isolation());
  return 0;
}
