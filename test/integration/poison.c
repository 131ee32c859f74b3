/*
 * poison.c: items that fail, or that kill their worker, still end; and the
 * claim-checked calls that end an attempt (oq_fail, oq_release,
 * oq_ack_batch) act only on items still claimed by the caller.
 *
 * Checks:
 *  - oq_fail: RETRY on attempts 1 and 2 (claim released, run_at moved,
 *    last_error kept), DEAD on attempt 3 (moved to onceq_dead); a delay is
 *    honoured; a lost claim gives OQ_ERR_CLAIM_LOST and changes nothing;
 *  - oq_release: gives items back without counting the attempt, skips
 *    items no longer ours;
 *  - oq_ack_batch: reports exactly which items it acknowledged;
 *  - poison: an item whose worker dies on every attempt (session abandoned,
 *    connection closed, then reaped) is dead-lettered by the reap that
 *    follows its last attempt, with attempts = 3 and a last_error.
 */
#include <stdbool.h>

#include "oq_test.h"
#include "sem_util.h"

#define DOOMED_INTERVAL_MS 100
#define DOOMED_EXPIRY_MS 1300 /* 3 * interval + 1000 */

static void one_item(oq_db *db, const char *queue, int max_attempts, char *id)
{
  oq_enqueue_opts o = {.queue = queue,
                       .payload = "{\"poison\": true}",
                       .max_attempts = max_attempts};
  ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
}

static long in_items(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM onceq_items WHERE id = $1", id);
}

static long in_dead(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT count(*) FROM onceq_dead WHERE id = $1", id);
}

/* oq_fail with delay 0: RETRY, RETRY, then DEAD on the third attempt. */
static void test_fail_path(oq_db *db, const oq_session *w)
{
  char id[OQ_UUID_LEN + 1], want_err[32];
  one_item(db, "fail", 3, id);
  for (int a = 1; a <= 3; a++) {
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(db, w, "fail", 10, &it);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(it[0].id, id);
    ASSERT_EQ(it[0].attempt, a);
    ASSERT_EQ(it[0].max_attempts, 3);
    snprintf(want_err, sizeof want_err, "boom %d", a);
    oq_fail_outcome out = (oq_fail_outcome)-1;
    ASSERT_OK(db, oq_fail(db, w, &it[0], want_err, 0, &out));
    oq_items_free(it, n);
    char got[64];
    if (a < 3) {
      ASSERT_EQ(out, OQ_FAIL_RETRY);
      ASSERT_EQ(in_items(db, id), 1);
      ASSERT_EQ(in_dead(db, id), 0);
      ASSERT_EQ(QLONG(db,
                      "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                      "claim IS NULL AND run_at > created_at AND "
                      "run_at <= now()",
                      id),
                1);
      ASSERT_EQ(QLONG(db, "SELECT attempts FROM onceq_items WHERE id = $1", id),
                a);
      ASSERT(QTEXT(db, got, "SELECT last_error FROM onceq_items WHERE id = $1",
                   id));
      ASSERT_STREQ(got, want_err);
    } else {
      ASSERT_EQ(out, OQ_FAIL_DEAD);
      ASSERT_EQ(in_items(db, id), 0);
      ASSERT_EQ(in_dead(db, id), 1);
      ASSERT_EQ(QLONG(db,
                      "SELECT count(*) FROM onceq_dead WHERE id = $1 AND "
                      "attempts = 3 AND max_attempts = 3 AND "
                      "queue = 'fail' AND payload = '{\"poison\": true}'",
                      id),
                1);
      ASSERT(QTEXT(db, got, "SELECT last_error FROM onceq_dead WHERE id = $1",
                   id));
      ASSERT_STREQ(got, "boom 3");
    }
  }
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "fail", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);

  /* A delay is honoured: not claimable for a minute. */
  char d[OQ_UUID_LEN + 1];
  one_item(db, "faildelay", 3, d);
  n = SEM_CLAIM(db, w, "faildelay", 10, &it);
  ASSERT_EQ(n, 1);
  oq_fail_outcome out = (oq_fail_outcome)-1;
  ASSERT_OK(db, oq_fail(db, w, &it[0], "later", 60000, &out));
  ASSERT_EQ(out, OQ_FAIL_RETRY);
  oq_items_free(it, n);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim IS NULL AND attempts = 1 AND "
                  "run_at BETWEEN now() + interval '55 s' AND "
                  "now() + interval '61 s'",
                  d),
            1);
  n = SEM_CLAIM(db, w, "faildelay", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);

  /* delay_ms < 0: the item policy (1 s base: at most ~1 s on attempt 1). */
  char p[OQ_UUID_LEN + 1];
  one_item(db, "failpolicy", 3, p);
  n = SEM_CLAIM(db, w, "failpolicy", 10, &it);
  ASSERT_EQ(n, 1);
  out = (oq_fail_outcome)-1;
  ASSERT_OK(db, oq_fail(db, w, &it[0], "policy", -1, &out));
  ASSERT_EQ(out, OQ_FAIL_RETRY);
  oq_items_free(it, n);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim IS NULL AND run_at > created_at AND "
                  "run_at <= now() + interval '1100 ms'",
                  p),
            1);
  printf("ok oq_fail: retry, retry, dead; delay honoured\n");
}

/* oq_fail after the claim was lost changes nothing. */
static void test_fail_lost(oq_db *db, const oq_session *w, const oq_session *v)
{
  const char *vid = oq_session_id(v);
  char l1[OQ_UUID_LEN + 1], l2[OQ_UUID_LEN + 1], l3[OQ_UUID_LEN + 1];
  one_item(db, "lost", 3, l1);
  one_item(db, "lost", 3, l2);
  one_item(db, "lost", 1, l3); /* a failure would dead-letter it */
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "lost", 10, &it);
  ASSERT_EQ(n, 3);
  /* l1, l3: released as by a reap; l2: now another session's. */
  ASSERT_EQ(QEXEC(db,
                  "UPDATE onceq_items SET claim = NULL "
                  "WHERE id IN ($1, $2)",
                  l1, l3),
            2);
  ASSERT_EQ(
      QEXEC(db, "UPDATE onceq_items SET claim = $1 WHERE id = $2", vid, l2), 1);
  char before[1024], after[1024];
  ASSERT(QTEXT(db, before,
               "SELECT string_agg(id || ' ' || run_at::text, ',' ORDER BY id)"
               " FROM onceq_items WHERE queue = $1",
               "lost"));
  for (size_t i = 0; i < n; i++) {
    oq_fail_outcome out = (oq_fail_outcome)-1;
    oq_err e = oq_fail(db, w, &it[i], "too late", 0, &out);
    if (e != OQ_ERR_CLAIM_LOST)
      OQT_FAIL("oq_fail on a lost claim (item %s): got %s (%s), want claim "
               "lost",
               it[i].id, oq_strerror(e), oq_db_errmsg(db));
  }
  oq_items_free(it, n);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items WHERE "
                           "queue = 'lost' AND attempts = 1 AND "
                           "last_error IS NULL"),
            3);
  ASSERT(QTEXT(db, after,
               "SELECT string_agg(id || ' ' || run_at::text, ',' ORDER BY id)"
               " FROM onceq_items WHERE queue = $1",
               "lost"));
  ASSERT_STREQ(after, before); /* run_at untouched */
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim = $2",
                  l2, vid),
            1);
  ASSERT_EQ(in_dead(db, l3), 0);
  ASSERT_EQ(in_items(db, l3), 1);
  /* l3 is now abandoned on its last attempt: the next reap dead-letters it
   * (and only it). */
  int reaped = -1, dead = -1;
  ASSERT_OK(db, oq_reap(db, &reaped, &dead));
  ASSERT_EQ(reaped, 0);
  ASSERT_EQ(dead, 1);
  ASSERT_EQ(in_dead(db, l3), 1);
  ASSERT_EQ(in_items(db, l3), 0);
  printf("ok oq_fail on lost claims: claim lost, nothing changed\n");
}

/* oq_release gives items back without counting the attempt. */
static void test_release(oq_db *db, const oq_session *w, const oq_session *v)
{
  const char *vid = oq_session_id(v);
  oqt_enqueue_n(db, "rel", 3);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "rel", 10, &it);
  ASSERT_EQ(n, 3);
  ASSERT_EQ(QEXEC(db, "UPDATE onceq_items SET claim = $1 WHERE id = $2", vid,
                  it[2].id),
            1);
  const char *ids[3] = {it[0].id, it[1].id, it[2].id};
  size_t nrel = 99;
  ASSERT_OK(db, oq_release(db, w, it, 3, &nrel));
  ASSERT_EQ(nrel, 2);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id IN ($1, $2) AND "
                  "claim IS NULL AND attempts = 0",
                  ids[0], ids[1]),
            2);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim = $2 AND attempts = 1",
                  ids[2], vid),
            1);
  nrel = 99;
  ASSERT_OK(db, oq_release(db, w, it, 2, &nrel));
  ASSERT_EQ(nrel, 0);

  oq_item *again = NULL;
  size_t m = SEM_CLAIM(db, w, "rel", 10, &again);
  ASSERT_EQ(m, 2);
  for (size_t i = 0; i < m; i++) {
    ASSERT_EQ(again[i].attempt, 1);
    ASSERT(strcmp(again[i].id, ids[2]) != 0);
    ASSERT(again[i].claimed_at_us != 0);
  }
  /* ABA: the same session claimed them again; a retry of the first
   * release (its reply lost) carries the old claims' identity and must not
   * release the new claims */
  nrel = 99;
  ASSERT_OK(db, oq_release(db, w, it, 2, &nrel));
  ASSERT_EQ(nrel, 0);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id IN ($1, $2) AND "
                  "claim = $3",
                  ids[0], ids[1], oq_session_id(w)),
            2);
  /* nor may a stale failure report fail or dead-letter them */
  oq_item stale = it[0];
  stale.max_attempts = 1; /* would dead-letter if it matched */
  oq_fail_outcome out = OQ_FAIL_RETRY;
  oq_err fe = oq_fail(db, w, &stale, "stale", 0, &out);
  ASSERT_EQ(fe, OQ_ERR_CLAIM_LOST);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim = $2 AND last_error IS NULL",
                  ids[0], oq_session_id(w)),
            1);
  ASSERT_EQ(in_dead(db, ids[0]), 0);
  /* the current identity still works */
  nrel = 99;
  ASSERT_OK(db, oq_release(db, w, again, m, &nrel));
  ASSERT_EQ(nrel, 2);
  oq_items_free(again, m);
  oq_items_free(it, n);
  printf("ok oq_release: attempt not counted, foreign claim skipped, a "
         "stale release or failure cannot touch a newer claim\n");
}

/* oq_ack_batch: 10 claimed, 3 taken meanwhile: exactly the 7 are acked. */
static void test_ack_batch(oq_db *db, const oq_session *w, const oq_session *v)
{
  const char *vid = oq_session_id(v);
  oqt_enqueue_n(db, "batch", 10);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "batch", 10, &it);
  ASSERT_EQ(n, 10);
  const char *ids[10];
  for (size_t i = 0; i < n; i++)
    ids[i] = it[i].id;
  /* 1: another session's now; 4: released by a reap; 8: acked by someone
   * else already. */
  ASSERT_EQ(
      QEXEC(db, "UPDATE onceq_items SET claim = $1 WHERE id = $2", vid, ids[1]),
      1);
  ASSERT_EQ(
      QEXEC(db, "UPDATE onceq_items SET claim = NULL WHERE id = $1", ids[4]),
      1);
  ASSERT_EQ(QEXEC(db, "DELETE FROM onceq_items WHERE id = $1", ids[8]), 1);

  bool acked[10];
  memset(acked, 0, sizeof acked);
  size_t nacked = 99;
  ASSERT_OK(db, oq_ack_batch(db, w, ids, 10, acked, &nacked, NULL));
  ASSERT_EQ(nacked, 7);
  for (size_t i = 0; i < 10; i++) {
    bool want = !(i == 1 || i == 4 || i == 8);
    if (acked[i] != want)
      OQT_FAIL("oq_ack_batch: acked[%zu] = %d, want %d", i, (int)acked[i],
               (int)want);
    ASSERT_EQ(in_items(db, ids[i]), (i == 1 || i == 4) ? 1 : 0);
  }
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items "
                           "WHERE queue = 'batch'"),
            2);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                  "claim = $2",
                  ids[1], vid),
            1);

  /* Again: nothing left that is ours. */
  memset(acked, 0, sizeof acked);
  nacked = 99;
  ASSERT_OK(db, oq_ack_batch(db, w, ids, 10, acked, &nacked, NULL));
  ASSERT_EQ(nacked, 0);
  for (size_t i = 0; i < 10; i++)
    ASSERT_EQ(acked[i], 0);
  oq_items_free(it, n);
  printf("ok oq_ack_batch: exactly the 7 still ours were acked\n");
}

/* Wait (bounded) until the item is claimable again. */
static void await_ready(oq_db *db, const char *id)
{
  uint64_t t0 = oq_monotonic_ms();
  while (oq_monotonic_ms() - t0 < 10000) {
    if (QLONG(db,
              "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
              "claim IS NULL AND run_at <= now()",
              id) == 1)
      return;
    oqt_sleep_ms(20);
  }
  OQT_FAIL("item %s not claimable 10 s after its session was reaped", id);
}

/* Each attempt's worker claims the item, then dies: its session is never
 * ended and its connection closes; a reap after expiry releases the item.
 * After the third, the reap dead-letters it. */
static void test_poison(oq_db *admin, const char *dsn, const oq_session *w)
{
  char id[OQ_UUID_LEN + 1];
  one_item(admin, "poison", 3, id);
  for (int a = 1; a <= 3; a++) {
    await_ready(admin, id);
    oq_db *doomed = oqt_connect(dsn);
    oq_session *ds = SEM_SESSION(doomed, DOOMED_INTERVAL_MS, DOOMED_EXPIRY_MS);
    uint64_t opened = oq_monotonic_ms();
    char dsid[OQ_UUID_LEN + 1];
    snprintf(dsid, sizeof dsid, "%s", oq_session_id(ds));
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(doomed, ds, "poison", 10, &it);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(it[0].id, id);
    ASSERT_EQ(it[0].attempt, a);
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                    "claim = $2",
                    id, dsid),
              1);
    /* The process dies: nothing ended, connection gone. */
    oq_items_free(it, n);
    oq_session_free(ds);
    oq_db_close(doomed);

    /* Not expired yet: still held, nobody else can take it. */
    int reaped = -1, dead = -1;
    ASSERT_OK(admin, oq_reap(admin, &reaped, &dead));
    ASSERT_EQ(reaped, 0);
    ASSERT_EQ(dead, 0);
    n = SEM_CLAIM(admin, w, "poison", 10, &it);
    ASSERT_EQ(n, 0);
    oq_items_free(it, n);

    uint64_t until = opened + DOOMED_EXPIRY_MS + 400;
    uint64_t now = oq_monotonic_ms();
    if (until > now)
      oqt_sleep_ms((int)(until - now));
    reaped = dead = -1;
    ASSERT_OK(admin, oq_reap(admin, &reaped, &dead));
    ASSERT_EQ(reaped, 1);
    ASSERT_EQ(dead, a == 3 ? 1 : 0);
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM onceq_sessions "
                    "WHERE id = $1",
                    dsid),
              0);
    if (a < 3) {
      ASSERT_EQ(QLONG(admin,
                      "SELECT count(*) FROM onceq_items WHERE id = $1 AND "
                      "claim IS NULL AND attempts = $2::int",
                      id, a == 1 ? "1" : "2"),
                1);
      ASSERT_EQ(in_dead(admin, id), 0);
    }
  }
  ASSERT_EQ(in_items(admin, id), 0);
  ASSERT_EQ(QLONG(admin,
                  "SELECT count(*) FROM onceq_dead WHERE id = $1 AND "
                  "attempts = 3 AND max_attempts = 3 AND queue = 'poison' "
                  "AND last_error IS NOT NULL AND length(last_error) > 0",
                  id),
            1);
  char err[256];
  ASSERT(
      QTEXT(admin, err, "SELECT last_error FROM onceq_dead WHERE id = $1", id));
  printf("poison item dead-lettered with last_error \"%s\"\n", err);

  /* A reap with nothing to do changes nothing; nothing left to claim. */
  int reaped = -1, dead = -1;
  ASSERT_OK(admin, oq_reap(admin, &reaped, &dead));
  ASSERT_EQ(reaped, 0);
  ASSERT_EQ(dead, 0);
  ASSERT_EQ(in_dead(admin, id), 1);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(admin, w, "poison", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  printf("ok poison: dead-lettered after 3 abandoned attempts\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("poison", 1);
  oq_db *db = oqt_connect(dsn);
  oq_session *w = SEM_LONG_SESSION(db);
  oq_session *v = SEM_LONG_SESSION(db);

  test_fail_path(db, w);
  test_fail_lost(db, w, v);
  test_release(db, w, v);
  test_ack_batch(db, w, v);
  test_poison(db, dsn, w);

  ASSERT_OK(db, oq_session_end(db, w));
  ASSERT_OK(db, oq_session_end(db, v));
  oq_session_free(w);
  oq_session_free(v);
  oq_db_close(db);
  printf("PASS it_lib_poison (isolation: %s)\n", oqt_isolation());
  return 0;
}
