/*
 * operator_calls.c: the library calls `onceq push`, `cancel` and `retry`
 * and the coordinator's retention make (issue 24), each run through
 * oq_db_transact as the programs do.
 *
 * Checks: oq_enqueue_many reports (ordinal, id) for the new items in
 * array order and skips an element whose key field a live item holds; a
 * refused element fails the statement with the server's own SQLSTATE and
 * inserts nothing. oq_cancel with an id that is not live deletes nothing
 * and says where each id is; with live ids it deletes them, each with a
 * 'cancelled' result row. oq_retry_dead is blocked by a unique key a live
 * item holds, else moves the item back with attempts 0; oq_retry_all_dead
 * counts the ones it keeps. oq_retention_delete deletes only rows older
 * than the age given.
 */
#include <stdbool.h>
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"

/* ---- oq_enqueue_many */

typedef struct many_ctx {
  const char *payloads;
  const char *key_field;
  long ord[8];
  char id[8][OQ_UUID_LEN + 1];
  int n;
} many_ctx;

static oq_err on_new(void *ud, int ncols, const char *const *v)
{
  many_ctx *c = ud;
  if (ncols < 2 || !v[0] || !v[1] || c->n >= 8)
    return OQ_ERR_SQL;
  c->ord[c->n] = strtol(v[0], NULL, 10);
  oqt_copy(c->id[c->n], sizeof c->id[0], v[1]);
  c->n++;
  return OQ_OK;
}

static oq_err many_tx(oq_db *db, void *ud)
{
  many_ctx *c = ud;
  c->n = 0;
  oq_enqueue_opts o = {.queue = "bulk", .priority = 3, .max_attempts = 7};
  return oq_enqueue_many(db, &o, c->payloads, c->key_field, on_new, c);
}

static void test_enqueue_many(oq_db *db)
{
  many_ctx c = {.payloads = "[{\"k\": \"a\"}, {\"k\": \"b\"}, {\"k\": \"c\"}]",
                .key_field = "k"};
  ASSERT_OK(db, oq_db_transact(db, many_tx, &c));
  ASSERT_EQ(c.n, 3);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(c.ord[i], i + 1);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = 'bulk'"
                  " AND priority = 3 AND max_attempts = 7 AND unique_key = $1",
                  "b"),
            1);
  /* "b" is live: skipped; "d" is new, ordinal 2 */
  c.payloads = "[{\"k\": \"b\"}, {\"k\": \"d\"}]";
  ASSERT_OK(db, oq_db_transact(db, many_tx, &c));
  ASSERT_EQ(c.n, 1);
  ASSERT_EQ(c.ord[0], 2);
  ASSERT_EQ(
      QLONG(db, "SELECT count(*) FROM onceq_items WHERE id = $1", c.id[0]), 1);
  /* a number out of numeric's range: the server's error, nothing in */
  c.payloads = "[{\"k\": \"e\"}, [1e999999]]";
  ASSERT_EQ(oq_db_transact(db, many_tx, &c) != OQ_OK, 1);
  ASSERT_STREQ(oq_db_sqlstate(db), "22003");
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"
                           " WHERE unique_key = 'e'"),
            0);
  printf("ok oq_enqueue_many\n");
}

/* ---- oq_cancel */

typedef struct cancel_ctx {
  const char *ids[3];
  size_t n;
  char where[3][16];
  int rows;
  long cancelled;
} cancel_ctx;

static oq_err on_where(void *ud, int ncols, const char *const *v)
{
  cancel_ctx *c = ud;
  if (ncols < 3 || c->rows >= 3)
    return OQ_ERR_SQL;
  for (size_t k = 0; k < c->n; k++)
    if (v[0] && strcmp(v[0], c->ids[k]) == 0)
      oqt_copy(c->where[k], sizeof c->where[k], v[1] ? v[1] : "");
  c->rows++;
  return OQ_OK;
}

static oq_err cancel_tx(oq_db *db, void *ud)
{
  cancel_ctx *c = ud;
  c->rows = 0;
  memset(c->where, 0, sizeof c->where);
  return oq_cancel(db, c->ids, c->n, on_where, c, &c->cancelled);
}

#define LIVE1 "10000000-0000-0000-0000-000000000001"
#define LIVE2 "10000000-0000-0000-0000-000000000002"
#define DEAD1 "20000000-0000-0000-0000-000000000001"
#define DEAD2 "20000000-0000-0000-0000-000000000002"
#define DEAD3 "20000000-0000-0000-0000-000000000003"
#define NONE1 "30000000-0000-0000-0000-000000000001"

static void test_cancel(oq_db *db)
{
  oqt_exec(db, "INSERT INTO onceq_items (id, queue, payload, last_error)"
               " VALUES ('" LIVE1 "', 'c', '{}', 'boom'),"
               " ('" LIVE2 "', 'c', '{}', NULL)");
  oqt_exec(db, "INSERT INTO onceq_dead (id, queue, payload, priority,"
               " attempts, max_attempts, unique_key, last_error, created_at)"
               " VALUES ('" DEAD1 "', 'd', '{}', 0, 3, 3, NULL, 'x', now())");
  cancel_ctx c = {.ids = {LIVE1, DEAD1, NONE1}, .n = 3};
  ASSERT_OK(db, oq_db_transact(db, cancel_tx, &c));
  ASSERT_EQ(c.cancelled, 0);
  ASSERT_STREQ(c.where[0], "live");
  ASSERT_STREQ(c.where[1], "dead");
  ASSERT_STREQ(c.where[2], "unknown");
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"
                           " WHERE queue = 'c'"),
            2);

  cancel_ctx ok = {.ids = {LIVE1, LIVE2}, .n = 2};
  ASSERT_OK(db, oq_db_transact(db, cancel_tx, &ok));
  ASSERT_EQ(ok.cancelled, 2);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"
                           " WHERE queue = 'c'"),
            0);
  char r[32];
  ASSERT(QTEXT(db, r,
               "SELECT outcome || ':' || coalesce(result, '-') || ':' ||"
               " truncated::text FROM onceq_results WHERE item_id = $1",
               LIVE1));
  ASSERT_STREQ(r, "cancelled:boom:false");
  ASSERT(QTEXT(db, r,
               "SELECT outcome || ':' || coalesce(result, '-')"
               " FROM onceq_results WHERE item_id = $1",
               LIVE2));
  ASSERT_STREQ(r, "cancelled:-");
  printf("ok oq_cancel\n");
}

/* ---- oq_retry_dead, oq_retry_all_dead */

typedef struct retry_ctx {
  const char *ids[2];
  size_t n;
  const char *queue; /* n == 0: oq_retry_all_dead of this queue */
  bool blocked;
  long kept;
  int moved;
} retry_ctx;

static oq_err on_moved(void *ud, int ncols, const char *const *v)
{
  retry_ctx *c = ud;
  (void)v;
  if (ncols < 1)
    return OQ_ERR_SQL;
  c->moved++;
  return OQ_OK;
}

static oq_err retry_tx(oq_db *db, void *ud)
{
  retry_ctx *c = ud;
  c->moved = 0;
  if (c->n > 0)
    return oq_retry_dead(db, c->ids, c->n, NULL, on_moved, c, &c->blocked);
  return oq_retry_all_dead(db, c->queue, on_moved, c, &c->kept);
}

static void test_retry(oq_db *db)
{
  /* DEAD2's key is held by a live item; DEAD1 (from test_cancel) and
   * DEAD3 are free */
  oqt_exec(db, "INSERT INTO onceq_items (queue, payload, unique_key)"
               " VALUES ('r', '{}', 'held')");
  oqt_exec(db, "INSERT INTO onceq_dead (id, queue, payload, priority,"
               " attempts, max_attempts, unique_key, last_error, created_at)"
               " VALUES ('" DEAD2 "', 'r', '{}', 0, 3, 3, 'held', 'y', now()),"
               " ('" DEAD3 "', 'r', '{}', 0, 3, 3, NULL, 'z', now())");
  retry_ctx c = {.ids = {DEAD1, DEAD2}, .n = 2};
  ASSERT_OK(db, oq_db_transact(db, retry_tx, &c));
  ASSERT_EQ(c.blocked, 1);
  ASSERT_EQ(c.moved, 0);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_dead"), 3);

  retry_ctx one = {.ids = {DEAD1}, .n = 1};
  ASSERT_OK(db, oq_db_transact(db, retry_tx, &one));
  ASSERT_EQ(one.blocked, 0);
  ASSERT_EQ(one.moved, 1);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1"
                  " AND attempts = 0 AND last_error = 'x'",
                  DEAD1),
            1);

  retry_ctx all = {.queue = "r"};
  ASSERT_OK(db, oq_db_transact(db, retry_tx, &all));
  ASSERT_EQ(all.moved, 1); /* DEAD3 */
  ASSERT_EQ(all.kept, 1);  /* DEAD2: its key is held */
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_dead WHERE id = $1", DEAD2),
            1);
  printf("ok oq_retry_dead, oq_retry_all_dead\n");
}

/* ---- oq_retention_delete */

typedef struct retain_ctx {
  oq_retained what;
  int64_t keep_ms;
  long deleted;
} retain_ctx;

static oq_err retain_tx(oq_db *db, void *ud)
{
  retain_ctx *c = ud;
  return oq_retention_delete(db, c->what, c->keep_ms, &c->deleted);
}

static void test_retention(oq_db *db)
{
  oqt_exec(db, "INSERT INTO onceq_done (item_id, queue, attempts,"
               " created_at, done_at) SELECT gen_random_uuid(), 'h', 1,"
               " now(), now() - g * interval '1 hour'"
               " FROM generate_series(0, 4) AS g");
  retain_ctx c = {OQ_RETAINED_DONE, 90LL * 60 * 1000, 0}; /* 90 min */
  ASSERT_OK(db, oq_db_transact(db, retain_tx, &c));
  ASSERT_EQ(c.deleted, 3); /* 2, 3 and 4 hours old */
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_done"), 2);
  /* DEAD2 died now: younger than a minute, kept */
  retain_ctx d = {OQ_RETAINED_DEAD, 60 * 1000, 0};
  ASSERT_OK(db, oq_db_transact(db, retain_tx, &d));
  ASSERT_EQ(d.deleted, 0);
  printf("ok oq_retention_delete\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("operator_calls", 1);
  oq_db *db = oqt_connect(dsn);
  test_enqueue_many(db);
  test_cancel(db);
  test_retry(db);
  test_retention(db);
  oq_db_close(db);
  printf("PASS it_lib_operator_calls (isolation: %s)\n", oqt_isolation());
  return 0;
}
