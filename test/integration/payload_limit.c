/*
 * payload_limit.c: the maximum payload size and the claim's byte budget
 * (issue 20, finding 7), against a real server.
 *  - oq_enqueue of a payload over OQ_MAX_PAYLOAD_BYTES (the JSON text as
 *    the server prints it) is refused by the schema's own check (SQLSTATE
 *    23514, onceq_items_payload_size), so a plain INSERT from any language
 *    is refused too, and the library says so in one line naming the limit
 *    and the fix; a payload under it goes in;
 *  - oq_claim_bytes stops taking items once the budget is taken (the item
 *    that crosses it is the last one; one item always comes, however big),
 *    counted in the rows the session holds; oq_claim has no byte budget;
 *  - a row larger than the limit that was there before version 4 does not
 *    fail the migration, and is claimed, failed and released like any
 *    other (the trigger checks only rows that write a payload; a CHECK,
 *    NOT VALID or not, would fail every UPDATE of that row on PostgreSQL).
 */
#include <stdlib.h>
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"

/* {"blob": "xxx..."} whose text is about n bytes */
static char *blob(size_t n)
{
  char *p = malloc(n + 16);
  if (!p)
    OQT_FAIL("out of memory");
  size_t k = snprintf(p, n + 16, "{\"blob\": \"");
  memset(p + k, 'x', n);
  snprintf(p + k + n, 16, "\"}");
  return p;
}

static long held_by(oq_db *db, const oq_session *s)
{
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM onceq_items WHERE claim = '%s'",
           oq_session_id(s));
  return oqt_scalar(db, sql);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("payload_limit", 1);
  oq_db *db = oqt_connect(dsn);

  /* over the limit: refused, one line with the limit and the fix */
  char *big = blob(OQ_MAX_PAYLOAD_BYTES + 100);
  oq_enqueue_opts o = {.queue = "big", .payload = big};
  char id[OQ_UUID_LEN + 1];
  ASSERT_ERR(OQ_ERR_INVALID, oq_enqueue(db, &o, id, NULL));
  printf("refused: %s\n", oq_db_errmsg(db));
  ASSERT_STREQ(oq_db_sqlstate(db), "23514");
  ASSERT_CONTAINS(oq_db_errmsg(db), "larger than the 1 MiB limit");
  ASSERT_CONTAINS(oq_db_errmsg(db), "onceq_items_payload_size");
  ASSERT_CONTAINS(oq_db_errmsg(db),
                  "store the data elsewhere and enqueue a reference to it");
  ASSERT_NOT_CONTAINS(oq_db_errmsg(db), "\n");
  free(big);
  /* a plain INSERT is refused the same way */
  oq_err e = oq_db_exec(db,
                        "INSERT INTO onceq_items (queue, payload) VALUES "
                        "('big', jsonb_build_object('b', repeat('x', "
                        "1100000)))",
                        0, NULL, NULL);
  ASSERT_EQ(e, OQ_ERR_SQL);
  ASSERT_STREQ(oq_db_sqlstate(db), "23514");
  ASSERT_CONTAINS(oq_db_errmsg(db), "onceq_items_payload_size");
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), 0);

  /* 10 items of about 100 kB: under the limit, they go in */
  char *mid = blob(100000);
  o.payload = mid;
  for (int i = 0; i < 10; i++)
    ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
  free(mid);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), 10);

  /* a budget of 250,000 bytes: 3 items (0, 100k and 200k taken before
   * each), not the 10 the count allows */
  oq_session *s = SEM_LONG_SESSION(db);
  const char *q[1] = {"big"};
  oq_item *it = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim_bytes(db, s, q, 1, 10, 250000, &it, &n));
  ASSERT_EQ(n, 3);
  ASSERT_EQ(held_by(db, s), 3);
  oq_items_free(it, n);
  /* a budget smaller than one item still takes one */
  ASSERT_OK(db, oq_claim_bytes(db, s, q, 1, 10, 1, &it, &n));
  ASSERT_EQ(n, 1);
  ASSERT_EQ(held_by(db, s), 4);
  oq_items_free(it, n);
  /* no byte budget: the count alone */
  ASSERT_OK(db, oq_claim(db, s, q, 1, 10, &it, &n));
  ASSERT_EQ(n, 6);
  ASSERT_EQ(held_by(db, s), 10);
  oq_items_free(it, n);

  /* a schema at version 3 with a 2 MB row: version 4 applies anyway */
  oqt_exec(db,
           "DROP TRIGGER IF EXISTS onceq_items_payload_size ON onceq_items");
  oqt_exec(db, "DROP FUNCTION IF EXISTS onceq_payload_too_large()");
  oqt_exec(db, "ALTER TABLE onceq_items DROP CONSTRAINT IF EXISTS "
               "onceq_items_payload_size");
  /* the later versions run again too: each is idempotent */
  oqt_exec(db, "DELETE FROM onceq_migrations WHERE version >= 4");
  oqt_exec(db, "INSERT INTO onceq_items (queue, payload) VALUES ('old', "
               "jsonb_build_object('b', repeat('x', 2000000)))");
  int from = 0, to = 0;
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, 3);
  ASSERT_EQ(to, oq_migrate_latest());
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items WHERE queue = "
                           "'old' AND octet_length(payload::text) > 2000000"),
            1);
  o.queue = "old";
  big = blob(OQ_MAX_PAYLOAD_BYTES + 1);
  o.payload = big;
  ASSERT_ERR(OQ_ERR_INVALID, oq_enqueue(db, &o, id, NULL));
  free(big);
  {
    const char *qo[1] = {"old"};
    ASSERT_OK(db, oq_claim_bytes(db, s, qo, 1, 10, 1, &it, &n));
    ASSERT_EQ(n, 1);
    oq_fail_outcome out;
    ASSERT_OK(db, oq_fail(db, s, &it[0], "boom", 0, &out));
    oq_items_free(it, n);
    ASSERT_OK(db, oq_claim(db, s, qo, 1, 10, &it, &n));
    ASSERT_EQ(n, 1);
    size_t released = 0;
    ASSERT_OK(db, oq_release(db, s, it, n, &released));
    ASSERT_EQ(released, 1);
    oq_items_free(it, n);
    printf("ok: a 2 MB row from before version 4 is claimed, failed and "
           "released\n");
  }

  oq_session_free(s);
  oq_db_close(db);
  printf("PASS it_lib_payload_limit\n");
  return 0;
}
