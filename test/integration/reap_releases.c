/*
 * reap_releases.c: a session that stops heartbeating fences itself on its
 * own clock before it expires, is lost on its own clock once it expires
 * (final, even while its heartbeat is stalled), is reaped, and its claims
 * go to another session; its late acks all fail and none of their writes
 * survive; its heartbeat never revives the row. A session whose row
 * expired by the database's clock (not reaped yet) is not revived by a
 * heartbeat either: the heartbeat reports it lost.
 *
 * Session A: heartbeat thread, interval 200 ms, expiry 1600 ms (the minimum:
 * 3 * interval + 1000), so it fences 600 ms after its last good heartbeat
 * (expiry - OQ_FENCE_MARGIN_MS). Session B: no heartbeat, long expiry.
 */
#include <pthread.h>
#include <stdbool.h>

#include "oq_test.h"
#include "sem_util.h"
#include "test_hooks.h"

#define INTERVAL_MS 200
#define EXPIRY_MS 1600
#define NCLAIM 5

/* What the session-event callback saw (written on the heartbeat thread). */
typedef struct events {
  pthread_mutex_t mu;
  int n;                 /* events seen */
  oq_session_state last; /* the newest state reported */
  uint64_t fenced_ms;    /* monotonic ms of the first FENCED, 0: none */
  uint64_t lost_ms;      /* monotonic ms of the first LOST, 0: none */
  int live_after_lost;   /* a LIVE/FENCED event came after LOST */
} events;

static void on_event(void *ud, oq_session *s, oq_session_state st)
{
  events *ev = ud;
  uint64_t now = oq_monotonic_ms();
  (void)s;
  pthread_mutex_lock(&ev->mu);
  ev->n++;
  if (ev->lost_ms && st != OQ_SESSION_LOST)
    ev->live_after_lost = 1;
  ev->last = st;
  if (st == OQ_SESSION_FENCED && !ev->fenced_ms)
    ev->fenced_ms = now;
  if (st == OQ_SESSION_LOST && !ev->lost_ms)
    ev->lost_ms = now;
  pthread_mutex_unlock(&ev->mu);
}

static uint64_t ev_get(events *ev, uint64_t *field)
{
  pthread_mutex_lock(&ev->mu);
  uint64_t v = *field;
  pthread_mutex_unlock(&ev->mu);
  return v;
}

typedef struct ack_ctx {
  const oq_session *s;
  const char *who;
  int runs;
} ack_ctx;

static oq_err ledger_cb(oq_db *db, const oq_item *item, void *ud)
{
  ack_ctx *c = ud;
  const char *p[3] = {item->id, oq_session_id(c->s), c->who};
  c->runs++;
  return oq_db_exec(db, SEM_LEDGER_INSERT, 3, p, NULL);
}

static void sleep_until(uint64_t t_ms)
{
  uint64_t now = oq_monotonic_ms();
  if (t_ms > now)
    oqt_sleep_ms((int)(t_ms - now));
}

int main(void)
{
  const char *dsn = oqt_fresh_db("reap_releases", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *dba = oqt_connect(dsn);
  oq_db *dbb = oqt_connect(dsn);
  oqt_exec(admin, SEM_LEDGER_DDL);
  oqt_enqueue_n(admin, "work", NCLAIM);

  oq_session_opts ao = {.heartbeat_interval_ms = INTERVAL_MS,
                        .expiry_ms = EXPIRY_MS,
                        .queues = "work"};
  char err[OQ_ERRBUF_SIZE] = "";
  oq_err e = oq_session_validate(&ao, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("oq_session_validate(200 ms, 1600 ms): %s: %s", oq_strerror(e),
             err);
  oq_session *sa = NULL;
  ASSERT_OK(dba, oq_session_open(dba, &ao, &sa));
  ASSERT_EQ(oq_session_expiry_ms(sa), EXPIRY_MS);
  ASSERT_EQ(oq_session_interval_ms(sa), INTERVAL_MS);
  char sa_id[OQ_UUID_LEN + 1];
  snprintf(sa_id, sizeof sa_id, "%s", oq_session_id(sa));

  events ev;
  memset(&ev, 0, sizeof ev);
  pthread_mutex_init(&ev.mu, NULL);
  oq_db_opts hbo = {.conninfo = dsn, .application_name = "onceq-test-hb"};
  oq_heartbeat *hb = NULL;
  e = oq_heartbeat_start(&hbo, sa, on_event, &ev, &hb, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("oq_heartbeat_start: %s: %s", oq_strerror(e), err);

  /* A is live: wait (bounded) for two heartbeats to land. */
  uint64_t t0 = oq_monotonic_ms();
  while (oq_heartbeat_count(hb) < 2 && oq_monotonic_ms() - t0 < 5000)
    oqt_sleep_ms(20);
  ASSERT_LE(2, oq_heartbeat_count(hb));
  ASSERT_EQ(oq_session_state_get(sa), OQ_SESSION_LIVE);

  oq_item *ia = NULL;
  size_t na = SEM_CLAIM(dba, sa, "work", 10, &ia);
  ASSERT_EQ(na, NCLAIM);
  for (size_t i = 0; i < na; i++)
    ASSERT_EQ(ia[i].attempt, 1);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_items WHERE claim = $1", sa_id),
      NCLAIM);

  /* Stall A: no heartbeat goes out; its own clock must fence it first. */
  oq__heartbeat_pause(hb, true);
  uint64_t t_pause = oq_monotonic_ms();
  uint64_t fenced_seen = 0;
  while (oq_monotonic_ms() - t_pause < 3 * EXPIRY_MS) {
    if (oq_session_state_get(sa) == OQ_SESSION_FENCED) {
      fenced_seen = oq_monotonic_ms();
      break;
    }
    oqt_sleep_ms(5);
  }
  uint64_t last_ok = oq_session_last_ok_ms(sa);
  if (!fenced_seen)
    OQT_FAIL("A never became FENCED within %d ms of the pause (state %d)",
             3 * EXPIRY_MS, (int)oq_session_state_get(sa));
  printf("fenced %llu ms after the last good heartbeat was sent\n",
         (unsigned long long)(fenced_seen - last_ok));
  /* Not before expiry - margin, and well before expiry. */
  ASSERT_LE(EXPIRY_MS - OQ_FENCE_MARGIN_MS, fenced_seen - last_ok);
  ASSERT_LE(fenced_seen - last_ok, EXPIRY_MS - 1);
  /* Reported through the callback too, not just stored. */
  while (!ev_get(&ev, &ev.fenced_ms) &&
         oq_monotonic_ms() - fenced_seen < 2 * INTERVAL_MS + 500)
    oqt_sleep_ms(5);
  ASSERT(ev_get(&ev, &ev.fenced_ms) != 0);

  /* Fenced is not expired: a reap now takes nobody (checked only when
   * there is a safe distance left to the expiry). */
  int reaped = -1, dead = -1;
  if (oq_monotonic_ms() - last_ok < EXPIRY_MS - 300) {
    ASSERT_OK(dbb, oq_reap(dbb, &reaped, &dead));
    ASSERT_EQ(reaped, 0);
    ASSERT_EQ(dead, 0);
  }
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_sessions WHERE id = $1", sa_id),
      1);

  /* Past A's expiry (by the database's clock, which the row's
   * heartbeated_at is on): B reaps exactly A. */
  sleep_until(last_ok + EXPIRY_MS + 400);
  oq_session *sb = SEM_LONG_SESSION(dbb);
  char sb_id[OQ_UUID_LEN + 1];
  snprintf(sb_id, sizeof sb_id, "%s", oq_session_id(sb));
  reaped = dead = -1;
  ASSERT_OK(dbb, oq_reap(dbb, &reaped, &dead));
  ASSERT_EQ(reaped, 1);
  ASSERT_EQ(dead, 0);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_sessions WHERE id = $1", sa_id),
      0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items "
                              "WHERE queue = 'work' AND claim IS NULL"),
            NCLAIM);
  /* still paused, and past its expiry on its own clock: lost, for good */
  ASSERT_EQ(oq_session_state_get(sa), OQ_SESSION_LOST);

  /* B takes the released items (second attempt) and acks all but the
   * last; that one B still holds while A comes back. */
  oq_item *ib = NULL;
  size_t nb = SEM_CLAIM(dbb, sb, "work", 10, &ib);
  ASSERT_EQ(nb, NCLAIM);
  ack_ctx cb = {sb, "B", 0};
  for (size_t i = 0; i < nb; i++) {
    ASSERT_EQ(ib[i].attempt, 2);
    if (i == nb - 1)
      break;
    bool rec = true;
    ASSERT_OK(dbb, oq_ack(dbb, sb, &ib[i], ledger_cb, &cb, NULL, &rec));
    ASSERT(!rec);
  }
  ASSERT_EQ(QLONG(admin,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 "
                  "AND claim = $2",
                  ib[nb - 1].id, sb_id),
            1);

  /* A wakes up and acks what it had: every ack fails, nothing survives,
   * and the item B still holds is untouched. */
  ack_ctx ca = {sa, "A", 0};
  for (size_t i = 0; i < na; i++) {
    bool rec = false;
    oq_err r = oq_ack(dba, sa, &ia[i], ledger_cb, &ca, NULL, &rec);
    if (r != OQ_ERR_CLAIM_LOST)
      OQT_FAIL("A's late ack of item %zu: got %s (%s), want claim lost", i,
               oq_strerror(r), oq_db_errmsg(dba));
  }
  printf("A's late ack callbacks ran %d times (all rolled back)\n", ca.runs);
  ASSERT_EQ(QLONG(admin,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 "
                  "AND claim = $2 AND attempts = 2",
                  ib[nb - 1].id, sb_id),
            1);
  {
    bool rec = true;
    ASSERT_OK(dbb, oq_ack(dbb, sb, &ib[nb - 1], ledger_cb, &cb, NULL, &rec));
    ASSERT(!rec);
  }
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger"), NCLAIM);
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM ledger WHERE session_id = $1", sb_id),
      NCLAIM);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(DISTINCT item_id) FROM ledger"),
            NCLAIM);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items "
                              "WHERE queue = 'work'"),
            0);

  /* A may not claim any more: its row is gone (or it is fenced). */
  oqt_enqueue_n(admin, "work", 1);
  {
    const char *q[1] = {"work"};
    oq_item *ix = NULL;
    size_t nx = 0;
    ASSERT_ERR(OQ_ERR_SESSION_LOST, oq_claim(dba, sa, q, 1, 10, &ix, &nx));
    oq_items_free(ix, nx);
    ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items "
                                "WHERE queue = 'work' AND claim IS NULL"),
              1);
  }

  /* Resume A's heartbeat: LOST was reported (during the stall, when the
   * expiry passed on A's clock, or at the latest within about one interval
   * of resuming). */
  uint64_t t_resume = oq_monotonic_ms();
  oq__heartbeat_pause(hb, false);
  while (!ev_get(&ev, &ev.lost_ms) &&
         oq_monotonic_ms() - t_resume < INTERVAL_MS + 3000)
    oqt_sleep_ms(5);
  uint64_t lost_ms = ev_get(&ev, &ev.lost_ms);
  if (!lost_ms)
    OQT_FAIL("no OQ_SESSION_LOST event within %d ms of resuming",
             INTERVAL_MS + 3000);
  uint64_t lost_after = lost_ms > t_resume ? lost_ms - t_resume : 0;
  oqt_metric("lost_detect_after_resume", (double)lost_after, "ms");
  ASSERT_LE(lost_after, INTERVAL_MS + 1000);
  ASSERT_EQ(oq_session_state_get(sa), OQ_SESSION_LOST);
  /* LOST is final: a few more intervals change nothing. */
  oqt_sleep_ms(3 * INTERVAL_MS);
  ASSERT_EQ(oq_session_state_get(sa), OQ_SESSION_LOST);
  pthread_mutex_lock(&ev.mu);
  ASSERT_EQ(ev.last, OQ_SESSION_LOST);
  ASSERT_EQ(ev.live_after_lost, 0);
  pthread_mutex_unlock(&ev.mu);
  oq_heartbeat_stop(hb);
  /* The heartbeat must not have re-created A's row. */
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_sessions WHERE id = $1", sa_id),
      0);

  /* B's graceful end deletes its row and releases what it still holds. */
  oq_item *ib2 = NULL;
  size_t nb2 = SEM_CLAIM(dbb, sb, "work", 10, &ib2);
  ASSERT_EQ(nb2, 1);
  ASSERT_OK(dbb, oq_session_end(dbb, sb));
  ASSERT_EQ(
      QLONG(admin, "SELECT count(*) FROM onceq_sessions WHERE id = $1", sb_id),
      0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items "
                              "WHERE queue = 'work' AND claim IS NULL"),
            1);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_sessions"), 0);

  /* C: its row expired by the database's clock but nobody reaped it yet;
   * its own clock is far from the expiry. The heartbeat must not revive
   * it: 0 rows, LOST, heartbeated_at untouched. */
  oq_session_opts co = {.heartbeat_interval_ms = INTERVAL_MS,
                        .expiry_ms = 60000,
                        .queues = "work"};
  oq_session *sc = NULL;
  ASSERT_OK(dba, oq_session_open(dba, &co, &sc));
  char sc_id[OQ_UUID_LEN + 1];
  snprintf(sc_id, sizeof sc_id, "%s", oq_session_id(sc));
  ASSERT_EQ(QEXEC(admin,
                  "UPDATE onceq_sessions SET heartbeated_at = now() - "
                  "interval '2 minutes' WHERE id = $1",
                  sc_id),
            1);
  ASSERT_EQ(oq_session_state_get(sc), OQ_SESSION_LIVE);
  events evc;
  memset(&evc, 0, sizeof evc);
  pthread_mutex_init(&evc.mu, NULL);
  oq_heartbeat *hbc = NULL;
  e = oq_heartbeat_start(&hbo, sc, on_event, &evc, &hbc, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("oq_heartbeat_start(C): %s: %s", oq_strerror(e), err);
  uint64_t tc = oq_monotonic_ms();
  while (!ev_get(&evc, &evc.lost_ms) && oq_monotonic_ms() - tc < 5000)
    oqt_sleep_ms(10);
  ASSERT(ev_get(&evc, &evc.lost_ms) != 0);
  ASSERT_EQ(oq_session_state_get(sc), OQ_SESSION_LOST);
  oq_heartbeat_stop(hbc);
  ASSERT_EQ(QLONG(admin,
                  "SELECT count(*) FROM onceq_sessions WHERE id = $1 AND "
                  "heartbeated_at < now() - interval '1 minute'",
                  sc_id),
            1);
  oq_session_free(sc);
  pthread_mutex_destroy(&evc.mu);

  oq_items_free(ib2, nb2);
  oq_items_free(ib, nb);
  oq_items_free(ia, na);
  oq_session_free(sb);
  oq_session_free(sa);
  pthread_mutex_destroy(&ev.mu);
  oq_db_close(dbb);
  oq_db_close(dba);
  oq_db_close(admin);
  printf("PASS it_lib_reap_releases (isolation: %s)\n", oqt_isolation());
  return 0;
}
