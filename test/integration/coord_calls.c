/*
 * coord_calls.c: the library calls `onceq schedule` and the coordinator's
 * leader make on their own tables (issue 24): oq_lease_try,
 * oq_schedule_add / _remove / _advance / _set_last_item and
 * oq_dead_mark_notified, each as the programs call it.
 *
 * Checks: a free lease goes to the first session, the second reads the
 * holder; the lease ends with its session; a session that is gone gets
 * OQ_ERR_SESSION_LOST. A schedule name is added once; a payload that is
 * not JSON is OQ_ERR_INVALID; the compare-and-set advances an occurrence
 * once and says whether the next one is due too; the last item is
 * recorded; remove counts what it removed. A death is marked notified
 * once, and only the death named by its died_at.
 */
#include <stdbool.h>
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"

#define GONE "00000000-0000-4000-8000-00000000dead"
#define DEAD1 "00000000-0000-4000-8000-000000000d01"
#define ITEM1 "00000000-0000-4000-8000-000000000101"

static oq_session *open_session(oq_db *db)
{
  oq_session_opts so = {
      .heartbeat_interval_ms = 5000, .expiry_ms = 60000, .queues = "c"};
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  return s;
}

static void test_lease(oq_db *db)
{
  oq_session *a = open_session(db), *b = open_session(db);
  bool held = false;
  char holder[OQ_UUID_LEN + 1];
  ASSERT_OK(db, oq_lease_try(db, "t", oq_session_id(a), &held, holder,
                             sizeof holder));
  ASSERT_EQ(held, true);
  ASSERT_STREQ(holder, oq_session_id(a));
  ASSERT_OK(db, oq_lease_try(db, "t", oq_session_id(b), &held, holder,
                             sizeof holder));
  ASSERT_EQ(held, false);
  ASSERT_STREQ(holder, oq_session_id(a));
  /* a's row goes (as a reap deletes it): the lease goes with it */
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_sessions WHERE id = $1",
                  oq_session_id(a)),
            1);
  const char *p[1] = {oq_session_id(a)};
  ASSERT_OK(db, oq_db_exec(db, "DELETE FROM onceq_sessions WHERE id = $1", 1, p,
                           NULL));
  ASSERT_OK(db, oq_lease_try(db, "t", oq_session_id(b), &held, NULL, 0));
  ASSERT_EQ(held, true);
  ASSERT_EQ(oq_lease_try(db, "u", GONE, &held, holder, sizeof holder),
            OQ_ERR_SESSION_LOST);
  ASSERT_EQ(held, false);
  ASSERT_STREQ(holder, "");
  oq_session_free(a);
  oq_session_free(b);
  printf("ok oq_lease_try\n");
}

typedef struct fire_ctx {
  const char *due_at, *next_at;
  bool advanced, still_due;
} fire_ctx;

static oq_err fire_tx(oq_db *db, void *ud)
{
  fire_ctx *f = ud;
  oq_err e = oq_schedule_advance(db, "s1", f->due_at, f->next_at, &f->advanced,
                                 &f->still_due);
  if (e == OQ_OK && f->advanced)
    e = oq_schedule_set_last_item(db, "s1", ITEM1);
  return e;
}

typedef struct rm_ctx {
  long removed;
} rm_ctx;

static oq_err rm_tx(oq_db *db, void *ud)
{
  rm_ctx *r = ud;
  return oq_schedule_remove(db, "s1", &r->removed);
}

static void test_schedule(oq_db *db)
{
  bool added = false;
  ASSERT_OK(db, oq_schedule_add(db, "s1", "0 0 * * *", "c", "{\"x\": 1}",
                                "2020-01-01T00:00:00Z", &added));
  ASSERT_EQ(added, true);
  ASSERT_OK(db, oq_schedule_add(db, "s1", "0 0 * * *", "c", "{}",
                                "2020-01-01T00:00:00Z", &added));
  ASSERT_EQ(added, false);
  ASSERT_EQ(oq_schedule_add(db, "s2", "0 0 * * *", "c", "{x",
                            "2020-01-01T00:00:00Z", &added),
            OQ_ERR_INVALID);
  ASSERT_EQ(added, false);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_schedules"), 1);
  /* the occurrence as the database writes it; the next one is past too */
  fire_ctx f = {.due_at = "2020-01-01 00:00:00+00",
                .next_at = "2020-01-02T00:00:00Z"};
  ASSERT_OK(db, oq_db_transact(db, fire_tx, &f));
  ASSERT_EQ(f.advanced, true);
  ASSERT_EQ(f.still_due, true);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_schedules WHERE name = 's1'"
                  " AND last_item_id = $1"
                  " AND last_run_at = '2020-01-01T00:00:00Z'"
                  " AND next_run_at = '2020-01-02T00:00:00Z'",
                  ITEM1),
            1);
  /* the same occurrence again (another leader): no match */
  ASSERT_OK(db, oq_db_transact(db, fire_tx, &f));
  ASSERT_EQ(f.advanced, false);
  ASSERT_EQ(f.still_due, false);
  /* next one far ahead: advanced, not due */
  f = (fire_ctx){.due_at = "2020-01-02 00:00:00+00",
                 .next_at = "2999-01-01T00:00:00Z"};
  ASSERT_OK(db, oq_db_transact(db, fire_tx, &f));
  ASSERT_EQ(f.advanced, true);
  ASSERT_EQ(f.still_due, false);
  rm_ctx r = {0};
  ASSERT_OK(db, oq_db_transact(db, rm_tx, &r));
  ASSERT_EQ(r.removed, 1);
  ASSERT_OK(db, oq_db_transact(db, rm_tx, &r));
  ASSERT_EQ(r.removed, 0);
  printf("ok oq_schedule_*\n");
}

static void test_dead_mark(oq_db *db)
{
  oqt_exec(db, "INSERT INTO onceq_dead (id, queue, payload, priority,"
               " attempts, max_attempts, unique_key, last_error, created_at,"
               " died_at) VALUES ('" DEAD1 "', 'd', '{}', 0, 3, 3, NULL,"
               " 'x', now(), '2021-06-01T00:00:00Z')");
  long marked = -1;
  /* another death of the same item: not this row */
  ASSERT_OK(db, oq_dead_mark_notified(db, DEAD1, "2021-06-02 00:00:00+00", 200,
                                      &marked));
  ASSERT_EQ(marked, 0);
  ASSERT_OK(db, oq_dead_mark_notified(db, DEAD1, "2021-06-01 00:00:00+00", 410,
                                      &marked));
  ASSERT_EQ(marked, 1);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_dead WHERE id = $1"
                  " AND notify_status = 410 AND notified_at IS NOT NULL",
                  DEAD1),
            1);
  /* marked once: a second leader's mark changes nothing */
  ASSERT_OK(db, oq_dead_mark_notified(db, DEAD1, "2021-06-01 00:00:00+00", 200,
                                      &marked));
  ASSERT_EQ(marked, 0);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_dead WHERE id = $1"
                  " AND notify_status = 410",
                  DEAD1),
            1);
  printf("ok oq_dead_mark_notified\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("coord_calls", 1);
  oq_db *db = oqt_connect(dsn);
  test_lease(db);
  test_schedule(db);
  test_dead_mark(db);
  oq_db_close(db);
  printf("PASS it_lib_coord_calls (isolation: %s)\n", oqt_isolation());
  return 0;
}
