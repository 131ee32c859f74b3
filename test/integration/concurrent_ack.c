/*
 * concurrent_ack.c: several transactions try to acknowledge the same item at
 * once; exactly one commits, and the losers' writes in their ack transaction
 * (a ledger row each, no unique constraint) are rolled back.
 *
 * Terms: a "racer" is one thread running oq_ack on its own connection; its
 * callback writes one ledger row, then meets the other racer (so both
 * callbacks have run before either DELETE) or waits at a gate (so its ack
 * transaction stays open while the other runs to completion).
 *
 *  1. race: A holds the claim, B merely thinks it does (same oq_item);
 *     NITEMS rounds: A gets OQ_OK, B OQ_ERR_CLAIM_LOST, 1 ledger row.
 *  2. double: two connections of the SAME session ack one item at once;
 *     both pass the claim predicate, exactly one commits.
 *  3. gates: one ack transaction is held open inside its callback while the
 *     other ack runs to completion, in three orders (holder blocked,
 *     non-holder blocked, holder blocked while its claim moves to B).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "oq_test.h"
#include "sem_util.h"

#define NITEMS 50 /* rounds of the plain race */
#define NGATE 5   /* rounds of each gated order */
#define MEET_TIMEOUT_MS 10000

/* A meeting point for callbacks (first run only) and a gate to hold one. */
typedef struct meet {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived; /* callbacks that reached it */
  int need;    /* how many must arrive before anyone goes on */
  int open;    /* gate: set by the main thread to let the holder go on */
} meet;

typedef struct racer {
  oq_db *db;
  const oq_session *s; /* the session this racer acks as */
  const oq_item *item; /* the item, as A claimed it */
  const char *who;     /* tag written to ledger.who */
  meet *rdv;           /* both callbacks meet here (may be NULL) */
  meet *gate;          /* after its insert, wait for gate->open (or NULL) */
  int runs;            /* callback runs: restarts run it again */
  int meet_timeout;    /* the meeting or the gate timed out */
  oq_err result;
  bool reconciled;
  atomic_int done; /* oq_ack returned */
} racer;

static void meet_init(meet *m, int need)
{
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cv, NULL);
  m->arrived = 0;
  m->need = need;
  m->open = 0;
}

static void meet_destroy(meet *m)
{
  pthread_mutex_destroy(&m->mu);
  pthread_cond_destroy(&m->cv);
}

static struct timespec deadline_in(int ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Arrive, then wait (bounded) until `need` have arrived, or, as a gate,
 * until the main thread opens it. Returns 0, or -1 on timeout. */
static int meet_wait(meet *m, bool as_gate)
{
  struct timespec dl = deadline_in(MEET_TIMEOUT_MS);
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  m->arrived++;
  pthread_cond_broadcast(&m->cv);
  while (rc == 0 && (as_gate ? !m->open : m->arrived < m->need))
    rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
  int ok = as_gate ? m->open : m->arrived >= m->need;
  pthread_mutex_unlock(&m->mu);
  return ok ? 0 : -1;
}

/* Main thread: wait (bounded) until n callbacks arrived at m. */
static int meet_await_arrivals(meet *m, int n)
{
  struct timespec dl = deadline_in(MEET_TIMEOUT_MS);
  int rc = 0;
  pthread_mutex_lock(&m->mu);
  while (rc == 0 && m->arrived < n)
    rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
  int ok = m->arrived >= n;
  pthread_mutex_unlock(&m->mu);
  return ok ? 0 : -1;
}

static void gate_open(meet *m)
{
  pthread_mutex_lock(&m->mu);
  m->open = 1;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

/* The ack callback: one ledger row, then (first run only) meet or wait. */
static oq_err ledger_cb(oq_db *db, const oq_item *item, void *ud)
{
  racer *r = ud;
  const char *p[3] = {item->id, oq_session_id(r->s), r->who};
  r->runs++;
  oq_err e = oq_db_exec(db, SEM_LEDGER_INSERT, 3, p, NULL);
  if (r->runs == 1 && r->rdv && meet_wait(r->rdv, false) != 0)
    r->meet_timeout = 1;
  if (r->runs == 1 && r->gate && meet_wait(r->gate, true) != 0)
    r->meet_timeout = 1;
  return e;
}

static void *racer_main(void *arg)
{
  racer *r = arg;
  r->result = oq_ack(r->db, r->s, r->item, ledger_cb, r, NULL, &r->reconciled);
  atomic_store(&r->done, 1);
  return NULL;
}

static void racer_init(racer *r, oq_db *db, const oq_session *s,
                       const oq_item *item, const char *who)
{
  memset(r, 0, sizeof *r);
  r->db = db;
  r->s = s;
  r->item = item;
  r->who = who;
  r->result = OQ_ERR__COUNT;
  atomic_init(&r->done, 0);
}

static long ledger_rows(oq_db *db, const char *item_id)
{
  return QLONG(db, "SELECT count(*) FROM ledger WHERE item_id = $1", item_id);
}

/* The single ledger row's who for an item, into buf. */
static void ledger_who(oq_db *db, const char *item_id, char *buf, size_t len)
{
  char t[64];
  ASSERT(QTEXT(db, t, "SELECT who FROM ledger WHERE item_id = $1", item_id));
  oqt_copy(buf, len, t);
}

static long item_rows(oq_db *db, const char *item_id)
{
  return QLONG(db, "SELECT count(*) FROM onceq_items WHERE id = $1", item_id);
}

/* 1. A holds the claim; B acks the same oq_item; both callbacks run before
 * either DELETE. */
static void test_race(oq_db *admin, oq_db *dba, oq_session *sa, oq_db *dbb,
                      oq_session *sb)
{
  oqt_enqueue_n(admin, "race", NITEMS);
  oq_item *items = NULL;
  size_t n = SEM_CLAIM(dba, sa, "race", NITEMS, &items);
  ASSERT_EQ(n, NITEMS);

  for (size_t i = 0; i < n; i++) {
    meet rdv;
    racer a, b;
    pthread_t ta, tb;
    meet_init(&rdv, 2);
    racer_init(&a, dba, sa, &items[i], "A");
    racer_init(&b, dbb, sb, &items[i], "B");
    a.rdv = b.rdv = &rdv;
    ASSERT_EQ(pthread_create(&ta, NULL, racer_main, &a), 0);
    ASSERT_EQ(pthread_create(&tb, NULL, racer_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    meet_destroy(&rdv);

    if (a.result != OQ_OK || b.result != OQ_ERR_CLAIM_LOST)
      OQT_FAIL("race round %zu: A got %s (%s), B got %s (%s); want ok, "
               "claim lost",
               i, oq_strerror(a.result), oq_db_errmsg(dba),
               oq_strerror(b.result), oq_db_errmsg(dbb));
    ASSERT_EQ(a.meet_timeout, 0); /* both callbacks ran before a DELETE */
    ASSERT_EQ(b.meet_timeout, 0);
    ASSERT(a.runs >= 1);
    ASSERT(b.runs >= 1);
    ASSERT(!a.reconciled);
    ASSERT(!b.reconciled);
    ASSERT_EQ(ledger_rows(admin, items[i].id), 1);
    char who[16];
    ledger_who(admin, items[i].id, who, sizeof who);
    ASSERT_STREQ(who, "A");
    ASSERT_EQ(item_rows(admin, items[i].id), 0);
  }
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger"), NITEMS);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger WHERE who = 'B'"),
            0);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items "
                              "WHERE queue = 'race'"),
            0);
  oq_items_free(items, n);
  printf("ok race: %d rounds, holder always won, loser's row rolled back\n",
         NITEMS);
}

/* 2. The same session acks the same item on two connections at once. */
static void test_double(oq_db *admin, oq_db *dba, oq_db *dba2, oq_session *sa)
{
  oqt_exec(admin, "TRUNCATE ledger");
  oqt_enqueue_n(admin, "double", NITEMS);
  oq_item *items = NULL;
  size_t n = SEM_CLAIM(dba, sa, "double", NITEMS, &items);
  ASSERT_EQ(n, NITEMS);
  int wins1 = 0, wins2 = 0, reruns = 0;

  for (size_t i = 0; i < n; i++) {
    meet rdv;
    racer r1, r2;
    pthread_t t1, t2;
    meet_init(&rdv, 2);
    racer_init(&r1, dba, sa, &items[i], "A1");
    racer_init(&r2, dba2, sa, &items[i], "A2");
    r1.rdv = r2.rdv = &rdv;
    ASSERT_EQ(pthread_create(&t1, NULL, racer_main, &r1), 0);
    ASSERT_EQ(pthread_create(&t2, NULL, racer_main, &r2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    meet_destroy(&rdv);

    ASSERT_EQ(r1.meet_timeout, 0);
    ASSERT_EQ(r2.meet_timeout, 0);
    int oks = (r1.result == OQ_OK) + (r2.result == OQ_OK);
    int lost =
        (r1.result == OQ_ERR_CLAIM_LOST) + (r2.result == OQ_ERR_CLAIM_LOST);
    if (oks != 1 || lost != 1)
      OQT_FAIL("double round %zu: A1 got %s (%s), A2 got %s (%s); want "
               "exactly one ok and one claim lost",
               i, oq_strerror(r1.result), oq_db_errmsg(dba),
               oq_strerror(r2.result), oq_db_errmsg(dba2));
    const char *winner = r1.result == OQ_OK ? "A1" : "A2";
    wins1 += r1.result == OQ_OK;
    wins2 += r2.result == OQ_OK;
    reruns += (r1.runs - 1) + (r2.runs - 1);
    ASSERT_EQ(ledger_rows(admin, items[i].id), 1);
    char who[16];
    ledger_who(admin, items[i].id, who, sizeof who);
    ASSERT_STREQ(who, winner);
    ASSERT_EQ(item_rows(admin, items[i].id), 0);
  }
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger"), NITEMS);
  oq_items_free(items, n);
  printf("ok double: %d rounds, exactly one commit each (A1 won %d, A2 won "
         "%d, callback re-runs %d)\n",
         NITEMS, wins1, wins2, reruns);
}

enum gate_order {
  HOLDER_BLOCKED,    /* A (holder) waits in its callback; B (not) runs */
  NONHOLDER_BLOCKED, /* B (not holder) waits in its callback; A runs */
  HOLDER_SUPERSEDED  /* A waits; the claim moves to B; B acks; A goes on */
};

static const char *gate_name(enum gate_order o)
{
  return o == HOLDER_BLOCKED      ? "holder-blocked"
         : o == NONHOLDER_BLOCKED ? "nonholder-blocked"
                                  : "holder-superseded";
}

/* 3. One ack transaction held open inside its callback while the other
 * ack runs to completion on the main thread. */
static void test_gated(oq_db *admin, oq_db *dba, oq_session *sa, oq_db *dbb,
                       oq_session *sb, enum gate_order order)
{
  oqt_exec(admin, "TRUNCATE ledger");
  oqt_enqueue_n(admin, "gated", NGATE);
  oq_item *items = NULL;
  size_t n = SEM_CLAIM(dba, sa, "gated", NGATE, &items);
  ASSERT_EQ(n, NGATE);
  int held_reruns = 0;

  for (size_t i = 0; i < n; i++) {
    meet gate;
    racer a, b;
    meet_init(&gate, 1);
    racer_init(&a, dba, sa, &items[i], "A");
    racer_init(&b, dbb, sb, &items[i], "B");
    racer *held = order == NONHOLDER_BLOCKED ? &b : &a;
    racer *runner = held == &a ? &b : &a;
    held->gate = &gate;

    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, racer_main, held), 0);
    if (meet_await_arrivals(&gate, 1) != 0)
      OQT_FAIL("%s round %zu: the held ack never reached its callback",
               gate_name(order), i);

    if (order == HOLDER_SUPERSEDED) {
      /* What a reap plus B's claim would do, while A's tx is open. */
      long moved = QEXEC(admin,
                         "UPDATE onceq_items SET claim = $1, "
                         "attempts = attempts + 1, claimed_at = now() "
                         "WHERE id = $2 AND claim = $3",
                         oq_session_id(sb), items[i].id, oq_session_id(sa));
      ASSERT_EQ(moved, 1);
    }

    /* The other ack runs to completion while the held one is open. */
    racer_main(runner);
    ASSERT_EQ(atomic_load(&held->done), 0);

    gate_open(&gate);
    pthread_join(th, NULL);
    meet_destroy(&gate);
    ASSERT_EQ(held->meet_timeout, 0);
    held_reruns += held->runs - 1;

    oq_err want_a = order == HOLDER_SUPERSEDED ? OQ_ERR_CLAIM_LOST : OQ_OK;
    oq_err want_b = order == HOLDER_SUPERSEDED ? OQ_OK : OQ_ERR_CLAIM_LOST;
    if (a.result != want_a || b.result != want_b)
      OQT_FAIL("%s round %zu: A got %s (%s), B got %s (%s); want %s, %s",
               gate_name(order), i, oq_strerror(a.result), oq_db_errmsg(dba),
               oq_strerror(b.result), oq_db_errmsg(dbb), oq_strerror(want_a),
               oq_strerror(want_b));
    ASSERT(!a.reconciled);
    ASSERT(!b.reconciled);
    ASSERT_EQ(ledger_rows(admin, items[i].id), 1);
    char who[16];
    ledger_who(admin, items[i].id, who, sizeof who);
    ASSERT_STREQ(who, order == HOLDER_SUPERSEDED ? "B" : "A");
    ASSERT_EQ(item_rows(admin, items[i].id), 0);
  }
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM ledger"), NGATE);
  oq_items_free(items, n);
  printf("ok gated %s: %d rounds (held callback re-runs %d)\n",
         gate_name(order), NGATE, held_reruns);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("concurrent_ack", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *dba = oqt_connect(dsn);
  oq_db *dba2 = oqt_connect(dsn);
  oq_db *dbb = oqt_connect(dsn);
  oqt_exec(admin, SEM_LEDGER_DDL);

  oq_session *sa = SEM_LONG_SESSION(dba);
  oq_session *sb = SEM_LONG_SESSION(dbb);

  test_race(admin, dba, sa, dbb, sb);
  test_double(admin, dba, dba2, sa);
  test_gated(admin, dba, sa, dbb, sb, HOLDER_BLOCKED);
  test_gated(admin, dba, sa, dbb, sb, NONHOLDER_BLOCKED);
  test_gated(admin, dba, sa, dbb, sb, HOLDER_SUPERSEDED);

  ASSERT_OK(dba, oq_session_end(dba, sa));
  ASSERT_OK(dbb, oq_session_end(dbb, sb));
  oq_session_free(sa);
  oq_session_free(sb);
  oq_db_close(dbb);
  oq_db_close(dba2);
  oq_db_close(dba);
  oq_db_close(admin);
  printf("PASS it_lib_concurrent_ack (isolation: %s)\n", oqt_isolation());
  return 0;
}
