/*
 * claim_reap_race.c: a claim racing the reap of its own session never
 * leaves an item claimed by a session whose row is gone (docs/design.md
 * section 1; schema v8, where no foreign key releases the claims: the
 * claim locks its session row, the reap releases explicitly in the
 * transaction that deletes it; lib/src/dialect.c, SESSION_LIVE).
 *
 * Each round: a fresh session S; a thread claims up to BATCH items for S
 * (one statement, some tens of ms) after a random delay of 0-11 ms while
 * the main thread, after one of 0-39 ms, expires S in the database and reaps it
 * (oq_reap, on another connection). Then, before anything else reaps
 * again: no item may be claimed by a session that no longer exists, and
 * the claim either succeeded (and the reap released its items) or
 * reported OQ_ERR_SESSION_LOST. Bounded: ROUNDS rounds or MAX_SECONDS.
 * Then: a claim of a reaped session fails and claims nothing, and a reap
 * releases the items of a session row deleted by hand.
 * Runs under the harness's isolation (READ COMMITTED and SERIALIZABLE).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "race"
#define NITEMS 3000
#define BATCH 1000
#define ROUNDS 60
#define MAX_SECONDS 20

typedef struct claimer {
  oq_db *db;
  const oq_session *s;
  int delay_ms; /* before the claim */
  oq_err e;
  size_t n;
  char errmsg[512];
} claimer;

static void *claim_once(void *arg)
{
  claimer *c = arg;
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  c->n = 0;
  oqt_sleep_ms(c->delay_ms);
  c->e = oq_claim(c->db, c->s, q, 1, BATCH, &items, &c->n);
  if (c->e != OQ_OK)
    oqt_copy(c->errmsg, sizeof c->errmsg, oq_db_errmsg(c->db));
  oq_items_free(items, c->n);
  return NULL;
}

int main(void)
{
  const char *dsn = oqt_fresh_db("claim_reap_race", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *reaper = oqt_connect(dsn);
  oq_db *dbc = oqt_connect(oqt_worker_dsn(dsn));
  oqt_enqueue_n(admin, QUEUE, NITEMS);
  srand((unsigned)oq_monotonic_ms());

  int rounds = 0, claimed_rounds = 0, lost_rounds = 0;
  uint64_t t0 = oq_monotonic_ms();
  while (rounds < ROUNDS && oq_monotonic_ms() - t0 < MAX_SECONDS * 1000) {
    rounds++;
    oq_session *s = SEM_LONG_SESSION(dbc);
    char sid[OQ_UUID_LEN + 1];
    oqt_copy(sid, sizeof sid, oq_session_id(s));
    claimer c = {dbc, s, rand() % 12, OQ_OK, 0, ""};
    pthread_t th;
    if (pthread_create(&th, NULL, claim_once, &c) != 0)
      OQT_FAIL("pthread_create");
    /* the reap somewhere inside the claim (a 1,000-row claim takes some
     * tens of ms here), or just before it starts */
    oqt_sleep_ms(rand() % 40);
    QEXEC(reaper,
          "UPDATE onceq_sessions SET heartbeated_at = now() - interval"
          " '1 hour' WHERE id = $1::uuid",
          sid);
    int ns = 0, nd = 0;
    ASSERT_OK(reaper, oq_reap(reaper, &ns, &nd));
    pthread_join(th, NULL);
    /* the invariant, before any other reap could hide a violation */
    long orphans = oqt_scalar(
        admin, "SELECT count(*) FROM onceq_items i WHERE i.claim IS NOT NULL"
               " AND NOT EXISTS (SELECT 1 FROM onceq_sessions s"
               " WHERE s.id = i.claim)");
    if (orphans != 0)
      OQT_FAIL("round %d: %ld item(s) claimed by a session whose row is gone"
               " (claim: %s, %zu item(s); reap deleted %d session(s))",
               rounds, orphans, oq_strerror(c.e), c.n, ns);
    ASSERT_EQ(ns, 1);
    ASSERT_EQ(QLONG(admin,
                    "SELECT count(*) FROM onceq_sessions"
                    " WHERE id = $1::uuid",
                    sid),
              0);
    if (c.e == OQ_OK) {
      claimed_rounds += c.n > 0;
    } else if (c.e == OQ_ERR_SESSION_LOST) {
      lost_rounds++;
    } else {
      OQT_FAIL("round %d: oq_claim: %s (%s)", rounds, oq_strerror(c.e),
               c.errmsg);
    }
    /* the queue full again for the next round */
    oqt_exec(admin, "UPDATE onceq_items SET claim = NULL, attempts = 0"
                    " WHERE claim IS NOT NULL OR attempts > 0");
    oq_session_free(s);
  }
  printf("ok %d rounds: %d claimed then released by the reap, %d found "
         "their session gone\n",
         rounds, claimed_rounds, lost_rounds);
  /* a claim on a reaped session fails and claims nothing */
  oq_session *s = SEM_LONG_SESSION(dbc);
  char sid[OQ_UUID_LEN + 1];
  oqt_copy(sid, sizeof sid, oq_session_id(s));
  QEXEC(reaper,
        "UPDATE onceq_sessions SET heartbeated_at = now() - interval"
        " '1 hour' WHERE id = $1::uuid",
        sid);
  ASSERT_OK(reaper, oq_reap(reaper, NULL, NULL));
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_EQ(oq_claim(dbc, s, q, 1, BATCH, &items, &n), OQ_ERR_SESSION_LOST);
  ASSERT_EQ(n, 0);
  ASSERT_EQ(oq_session_state_get(s), OQ_SESSION_LOST);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            0);
  oq_items_free(items, n);
  oq_session_free(s);
  printf("ok a claim of a reaped session fails with SESSION_LOST\n");

  /* A session row deleted by hand, not through onceq (no release in its
   * transaction): its items stay claimed until the next reap, which
   * releases them (OQ__SQL_RELEASE_ORPHANS). */
  oq_session *h = SEM_LONG_SESSION(dbc);
  char hid[OQ_UUID_LEN + 1];
  oqt_copy(hid, sizeof hid, oq_session_id(h));
  ASSERT_EQ(SEM_CLAIM(dbc, h, QUEUE, 5, &items), 5);
  oq_items_free(items, 5);
  ASSERT_EQ(QEXEC(admin, "DELETE FROM onceq_sessions WHERE id = $1::uuid", hid),
            1);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_items WHERE claim = $1", hid),
      5);
  ASSERT_OK(reaper, oq_reap(reaper, NULL, NULL));
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            0);
  oq_session_free(h);
  printf("ok a reap releases the items of a session row deleted by hand\n");
  oq_db_close(dbc);
  oq_db_close(reaper);
  oq_db_close(admin);
  return 0;
}
