/*
 * ordering.c: ordering keys (schema v5, issue 23 item 1). Items of one
 * queue and one ordering_key are claimed one at a time and acknowledged in
 * enqueue order (enqueue_seq); items without a key behave as before.
 *
 * Checks:
 *  - one claim takes at most the head of each key, and every unkeyed item;
 *  - a failed head waiting for its retry blocks its key (strict order); a
 *    dead-lettered one does not;
 *  - a lower enqueue_seq committed after a higher one was claimed waits
 *    until that one is acknowledged (never two of one key at once), with
 *    no index of the claimed keys (schema v9); also when the two claims
 *    run at once around that commit, held there by the test: the claims
 *    of a keyed queue take its key locks first (READ COMMITTED), only
 *    their own stripes when partitioned, first as a statement of their own
 *    inside a caller's transaction; a keyed queue is not starved by an
 *    unkeyed one that fills every claim;
 *  - a keyed item's part is the key's slot, onceq_key_slot (--partitioned:
 *    one part owns the key), set by the trigger on INSERT and on an UPDATE
 *    that names the key or the part (schema v11: every probe of one key
 *    reads its part), and the partitioned claim (oq_parts_claim) takes
 *    heads only;
 *  - drained by several workers (threads, one connection and session
 *    each), every key's acknowledgements commit in enqueue order: each ack
 *    writes a ledger row in the ack transaction and refuses (the ack rolls
 *    back) if its key already has a later item in the ledger;
 *  - keys given through oq_enqueue and oq_enqueue_many (ordering_key,
 *    ordering_key_field) run in the order they were enqueued; an empty
 *    or too long key is refused;
 *  - a claim that wants fewer items than there are free keys starts with
 *    the front of the queue (priority first), not with the keys that sort
 *    first; unkeyed items of a keyed queue are claimed behind a front of
 *    keyed items whose keys are all in flight.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"
#include "internal.h" /* OQ_KEY_LOCK_SLOTS */
#include "test_hooks.h"

#define KEYS 20
#define PER_KEY 10
#define WORKERS 3

static const char *dsn_g;

static void put(oq_db *db, const char *queue, const char *key, int n,
                int max_attempts)
{
  char nb[16], mb[16];
  snprintf(nb, sizeof nb, "%d", n);
  snprintf(mb, sizeof mb, "%d", max_attempts);
  QEXEC(db,
        "INSERT INTO onceq_items (queue, ordering_key, max_attempts, payload)"
        " SELECT $1, $2, $4::int, jsonb_build_object('i', g)"
        " FROM generate_series(1, $3::int) g ORDER BY g",
        queue, key, nb, mb);
}

static long seq_of(oq_db *db, const char *id)
{
  return QLONG(db, "SELECT enqueue_seq FROM onceq_items WHERE id = $1", id);
}

/* One claim: heads only; acking a head makes the next one the head. */
static void test_heads(oq_db *db, const oq_session *w)
{
  put(db, "heads", "a", 3, 25);
  put(db, "heads", "b", 3, 25);
  QEXEC(db,
        "INSERT INTO onceq_items (queue) SELECT $1 FROM"
        " generate_series(1, 4)",
        "heads");
  long last_a = 0, last_b = 0;
  for (int round = 0; round < 3; round++) {
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(db, w, "heads", 100, &it);
    int a = 0, b = 0, none = 0;
    for (size_t i = 0; i < n; i++) {
      char key[16] = "";
      bool has =
          QTEXT(db, key, "SELECT ordering_key FROM onceq_items WHERE id = $1",
                it[i].id);
      long s = seq_of(db, it[i].id);
      if (!has) {
        none++;
      } else if (strcmp(key, "a") == 0) {
        a++;
        ASSERT(s > last_a);
        last_a = s;
      } else {
        b++;
        ASSERT(s > last_b);
        last_b = s;
      }
    }
    ASSERT_EQ(a, 1);
    ASSERT_EQ(b, 1);
    ASSERT_EQ(none, round == 0 ? 4 : 0);
    /* claimed heads block their keys until acknowledged */
    oq_item *again = NULL;
    size_t m = SEM_CLAIM(db, w, "heads", 100, &again);
    ASSERT_EQ(m, 0);
    oq_items_free(again, m);
    for (size_t i = 0; i < n; i++)
      ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
    oq_items_free(it, n);
  }
  ASSERT_EQ(
      QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = $1", "heads"),
      0);
  printf("ok one head per key per claim, unkeyed items unaffected\n");
}

/* A failing head blocks its key until it succeeds or dead-letters. */
static void test_fail_blocks(oq_db *db, const oq_session *w)
{
  put(db, "failk", "k", 1, 2); /* dead-letters on its 2nd failure */
  put(db, "failk", "k", 2, 25);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "failk", 10, &it);
  ASSERT_EQ(n, 1);
  char head[OQ_UUID_LEN + 1];
  snprintf(head, sizeof head, "%s", it[0].id);
  oq_fail_outcome out = (oq_fail_outcome)-1;
  ASSERT_OK(db, oq_fail(db, w, &it[0], "first", 60000, &out));
  ASSERT_EQ(out, OQ_FAIL_RETRY);
  oq_items_free(it, n);
  /* waiting for its retry a minute from now: the key stays blocked */
  n = SEM_CLAIM(db, w, "failk", 10, &it);
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  QEXEC(db, "UPDATE onceq_items SET run_at = now() WHERE id = $1", head);
  n = SEM_CLAIM(db, w, "failk", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].id, head);
  ASSERT_OK(db, oq_fail(db, w, &it[0], "second", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_DEAD);
  oq_items_free(it, n);
  /* dead-lettered: the next item of the key is the head now */
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_dead WHERE id = $1"
                  " AND ordering_key = 'k'",
                  head),
            1);
  n = SEM_CLAIM(db, w, "failk", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT(strcmp(it[0].id, head) != 0);
  /* a retried dead letter goes back to the end of its key */
  const char *ids[1] = {head};
  bool blocked = false;
  ASSERT_OK(db, oq_db_exec(db, "BEGIN", 0, NULL, NULL));
  ASSERT_OK(db, oq_retry_dead(db, ids, 1, NULL, NULL, NULL, &blocked));
  ASSERT_OK(db, oq_db_exec(db, "COMMIT", 0, NULL, NULL));
  ASSERT(!blocked);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1"
                  " AND ordering_key = 'k' AND enqueue_seq = (SELECT"
                  " max(enqueue_seq) FROM onceq_items WHERE queue ="
                  " 'failk' AND ordering_key = 'k')",
                  head),
            1);
  ASSERT_OK(db, oq_ack(db, w, &it[0], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  for (int k = 0; k < 2; k++) {
    n = SEM_CLAIM(db, w, "failk", 10, &it);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(strcmp(it[0].id, head) == 0, k == 1);
    ASSERT_OK(db, oq_ack(db, w, &it[0], NULL, NULL, NULL, NULL));
    oq_items_free(it, n);
  }
  printf("ok a failing head blocks its key until it dead-letters; retried,"
         " it runs last\n");
}

/* An enqueue with a lower enqueue_seq that commits after a higher one of
 * its key was claimed waits for that one: never two of a key at once.
 * Since schema v9 the claims learn that the key is busy from the rows
 * themselves, with no index of the claimed keys. */
static void test_late_commit(oq_db *db, const oq_session *w)
{
  if (oq_db_engine(db) == OQ_ENGINE_POSTGRES) /* CockroachDB keeps it */
    ASSERT_EQ(QLONG(db, "SELECT count(*) FROM pg_indexes WHERE indexname = $1",
                    "onceq_items_key_claimed"),
              0);
  oq_db *late = oqt_connect(dsn_g);
  ASSERT_OK(late, oq_db_exec(late, "BEGIN", 0, NULL, NULL));
  put(late, "late", "k", 1, 25); /* takes its enqueue_seq now */
  put(db, "late", "k", 1, 25);   /* a higher one, committed first */
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "late", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_OK(late, oq_db_exec(late, "COMMIT", 0, NULL, NULL));
  oq_item *more = NULL;
  size_t m = SEM_CLAIM(db, w, "late", 10, &more);
  ASSERT_EQ(m, 0);
  oq_items_free(more, m);
  ASSERT_OK(db, oq_ack(db, w, &it[0], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  m = SEM_CLAIM(db, w, "late", 10, &more);
  ASSERT_EQ(m, 1);
  ASSERT_OK(db, oq_ack(db, w, &more[0], NULL, NULL, NULL, NULL));
  oq_items_free(more, m);
  oq_db_close(late);
  printf("ok a late-committed lower enqueue_seq waits for the claimed one\n");
}

/* The same late commit while two claims run: claim 1's snapshot is taken
 * before the lower enqueue_seq commits, then it waits (on its session row,
 * which the test holds) while claim 2, of another session, takes that
 * lower one, the key's head in its snapshot; then claim 1 goes on. In its
 * snapshot the key's head is the higher item and nothing of the key is
 * claimed. READ COMMITTED claims of keyed queues take the queue's lock
 * before their snapshot (claim.c, keyed_stmt), so claim 1 sees claim 2's
 * commit and leaves the key alone; under SERIALIZABLE the database aborts
 * and the claim runs again. Either way one item of the key is claimed. */
/* One claim on its own thread: oq_claim, or oq_parts_claim with p. */
typedef struct late_claimer {
  oq_db *db;
  const oq_session *s;
  const char *queue;
  size_t n;
  oq_err e;
  bool done;
  oq_parts *p;
} late_claimer;

static void *late_claim(void *arg)
{
  late_claimer *c = arg;
  const char *q[1] = {c->queue};
  oq_item *it = NULL;
  c->e = c->p ? oq_parts_claim(c->db, c->s, c->p, q, 1, 100, &it, &c->n)
              : oq_claim(c->db, c->s, q, 1, 10, &it, &c->n);
  oq_items_free(it, c->n);
  __atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
  return NULL;
}

/* Wait (bounded) until the backend pid waits on a lock, or *done. */
static void wait_lock_wait(oq_db *db, const char *pid, const bool *done,
                           const char *what)
{
  uint64_t t0 = oq_monotonic_ms();
  while (QLONG(db,
               "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int"
               " AND wait_event_type = 'Lock'",
               pid) == 0) {
    if (done && __atomic_load_n(done, __ATOMIC_ACQUIRE))
      return;
    if (oq_monotonic_ms() - t0 > 10000)
      OQT_FAIL("%s never waited on a lock", what);
    oqt_sleep_ms(5);
  }
}

static void test_late_commit_race(oq_db *db, const oq_session *w)
{
  oq_db *late = oqt_connect(dsn_g);
  oq_db *hold = oqt_connect(dsn_g);
  oq_db *c1 = oqt_connect(dsn_g);
  oq_session *s1 = SEM_LONG_SESSION(c1);
  char pid[24], sid[OQ_UUID_LEN + 1];
  snprintf(pid, sizeof pid, "%ld", oqt_scalar(c1, "SELECT pg_backend_pid()"));
  oqt_copy(sid, sizeof sid, oq_session_id(s1));
  ASSERT_OK(late, oq_db_exec(late, "BEGIN", 0, NULL, NULL));
  put(late, "race", "k", 1, 25); /* A: the lower enqueue_seq, not committed */
  put(db, "race", "k", 1, 25);   /* B: committed first */
  ASSERT_OK(hold, oq_db_exec(hold, "BEGIN", 0, NULL, NULL));
  QEXEC(hold, "SELECT 1 FROM onceq_sessions WHERE id = $1::uuid FOR UPDATE",
        sid);
  late_claimer c = {c1, s1, "race", 0, OQ_OK, false, NULL};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, late_claim, &c), 0);
  /* claim 1 waits on its session row: its snapshot predates A's commit */
  wait_lock_wait(db, pid, NULL, "claim 1");
  ASSERT_OK(late, oq_db_exec(late, "COMMIT", 0, NULL, NULL));
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "race", 10, &it); /* claim 2: A, the head */
  ASSERT_EQ(n, 1);
  ASSERT_EQ(
      QLONG(db, "SELECT enqueue_seq FROM onceq_items WHERE id = $1", it[0].id),
      QLONG(db,
            "SELECT min(enqueue_seq) FROM onceq_items"
            " WHERE queue = $1",
            "race"));
  ASSERT_OK(hold, oq_db_exec(hold, "ROLLBACK", 0, NULL, NULL));
  pthread_join(th, NULL);
  ASSERT_OK(c1, c.e);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND claim IS NOT NULL",
                  "race"),
            1);
  ASSERT_EQ(c.n, 0);
  ASSERT_OK(db, oq_ack(db, w, &it[0], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "race");
  ASSERT_OK(c1, oq_session_end(c1, s1));
  oq_session_free(s1);
  oq_db_close(c1);
  oq_db_close(hold);
  oq_db_close(late);
  printf("ok two claims around a late commit take one item of the key\n");
}

/* The same race inside the keyed claims themselves: claim 1, stopped by a
 * test hook just before its keyed claim, goes on once the test holds its
 * session row, takes the queue's key lock and waits on that row inside the
 * keyed claim statement, its snapshot taken before the lower enqueue_seq
 * commits; claim 2, after that commit, must wait for the key lock instead
 * of taking the late item while claim 1 takes the other one. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stage; /* 1: claim 1 is about to claim a keyed queue; 2: go on */
} gate;

static void hold_before_keyed(void *ud)
{
  gate *g = ud;
  pthread_mutex_lock(&g->mu);
  if (g->stage == 0) {
    g->stage = 1;
    pthread_cond_broadcast(&g->cv);
    while (g->stage < 2)
      pthread_cond_wait(&g->cv, &g->mu);
  }
  pthread_mutex_unlock(&g->mu);
}

static void wait_stage(gate *g)
{
  uint64_t t0 = oq_monotonic_ms();
  pthread_mutex_lock(&g->mu);
  while (g->stage < 1) {
    pthread_mutex_unlock(&g->mu);
    if (oq_monotonic_ms() - t0 > 10000)
      OQT_FAIL("the claim never reached its keyed claim");
    oqt_sleep_ms(5);
    pthread_mutex_lock(&g->mu);
  }
  pthread_mutex_unlock(&g->mu);
}

static void go_on(gate *g)
{
  pthread_mutex_lock(&g->mu);
  g->stage = 2;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void test_late_commit_key_lock(oq_db *db)
{
  oq_db *late = oqt_connect(dsn_g);
  oq_db *hold = oqt_connect(dsn_g);
  oq_db *c1 = oqt_connect(dsn_g);
  oq_db *c2 = oqt_connect(dsn_g);
  oq_session *s1 = SEM_LONG_SESSION(c1);
  oq_session *s2 = SEM_LONG_SESSION(c2);
  char pid1[24], pid2[24], sid[OQ_UUID_LEN + 1];
  snprintf(pid1, sizeof pid1, "%ld", oqt_scalar(c1, "SELECT pg_backend_pid()"));
  snprintf(pid2, sizeof pid2, "%ld", oqt_scalar(c2, "SELECT pg_backend_pid()"));
  oqt_copy(sid, sizeof sid, oq_session_id(s1));
  ASSERT_OK(late, oq_db_exec(late, "BEGIN", 0, NULL, NULL));
  put(late, "race2", "k", 1, 25); /* A */
  put(db, "race2", "k", 1, 25);   /* B, committed first */
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  oq__claim_keyed_hook(c1, hold_before_keyed, &g);
  late_claimer a = {c1, s1, "race2", 0, OQ_OK, false, NULL};
  late_claimer b = {c2, s2, "race2", 0, OQ_OK, false, NULL};
  pthread_t ta, tb;
  ASSERT_EQ(pthread_create(&ta, NULL, late_claim, &a), 0);
  wait_stage(&g);
  ASSERT_OK(hold, oq_db_exec(hold, "BEGIN", 0, NULL, NULL));
  QEXEC(hold, "SELECT 1 FROM onceq_sessions WHERE id = $1::uuid FOR UPDATE",
        sid);
  go_on(&g);
  wait_lock_wait(db, pid1, NULL, "claim 1"); /* holding the key lock */
  /* a claim that is not partitioned holds every stripe's lock (READ
   * COMMITTED only: under SERIALIZABLE the database's check decides) */
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM pg_locks WHERE pid = $1::int"
                  " AND locktype = 'advisory' AND granted",
                  pid1),
            strcmp(oqt_isolation(), "read committed") == 0
                ? OQ_PARTS_SLOTS / OQ_KEY_LOCK_SLOTS
                : 0);
  ASSERT_OK(late, oq_db_exec(late, "COMMIT", 0, NULL, NULL));
  ASSERT_EQ(pthread_create(&tb, NULL, late_claim, &b), 0);
  wait_lock_wait(db, pid2, &b.done, "claim 2"); /* the key lock, or done */
  ASSERT_OK(hold, oq_db_exec(hold, "ROLLBACK", 0, NULL, NULL));
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  ASSERT_OK(c1, a.e);
  ASSERT_OK(c2, b.e);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND claim IS NOT NULL",
                  "race2"),
            1);
  ASSERT_EQ(a.n + b.n, 1);
  oq__claim_keyed_hook(c1, NULL, NULL);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "race2");
  ASSERT_OK(c1, oq_session_end(c1, s1));
  ASSERT_OK(c2, oq_session_end(c2, s2));
  oq_session_free(s1);
  oq_session_free(s2);
  oq_db_close(c2);
  oq_db_close(c1);
  oq_db_close(hold);
  oq_db_close(late);
  printf("ok a claim holding a queue's key lock makes the next one wait\n");
}

/* --partitioned: a keyed claim holds the key locks of its own slot run's
 * stripes only (OQ_KEY_LOCK_SLOTS slots each), so a member whose block lies
 * in other stripes claims its keys' heads meanwhile without waiting. READ
 * COMMITTED only (under SERIALIZABLE no key lock is taken). */
static void test_parts_key_lock(oq_db *db)
{
  if (strcmp(oqt_isolation(), "read committed") != 0)
    return;
  ASSERT_OK(db, oq_parts_set(db, 4));
  oq_db *hold = oqt_connect(dsn_g);
  oq_db *c1 = oqt_connect(dsn_g);
  oq_db *c2 = oqt_connect(dsn_g);
  oq_session *s1 = SEM_LONG_SESSION(c1);
  oq_session *s2 = SEM_LONG_SESSION(c2);
  oq_parts *p1 = NULL, *p2 = NULL;
  ASSERT_OK(c1, oq_parts_new(NULL, &p1));
  ASSERT_OK(c2, oq_parts_new(NULL, &p2));
  for (int i = 0; i < 2; i++) { /* the second round gives up and takes */
    ASSERT_OK(c1, oq_parts_rebalance(c1, s1, p1));
    ASSERT_OK(c2, oq_parts_rebalance(c2, s2, p2));
  }
  size_t n1 = 0, n2 = 0, f = 0, no = 0;
  const oq__slot_range *orph = NULL;
  int oms = 0;
  const oq__slot_range *r1 = oq__parts_runs(p1, &n1, &f, &orph, &no, &oms);
  ASSERT_EQ(n1, 1); /* two of the four parts each, one block */
  oq__slot_range run1 = r1[0];
  (void)oq__parts_runs(p2, &n2, &f, &orph, &no, &oms);
  ASSERT_EQ(n2, 1);
  for (int k = 0; k < 40; k++) {
    char key[16];
    snprintf(key, sizeof key, "pk%d", k);
    put(db, "pstripe", key, 2, 25);
  }
  char pid1[24], sid[OQ_UUID_LEN + 1];
  snprintf(pid1, sizeof pid1, "%ld", oqt_scalar(c1, "SELECT pg_backend_pid()"));
  oqt_copy(sid, sizeof sid, oq_session_id(s1));
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  oq__claim_keyed_hook(c1, hold_before_keyed, &g);
  late_claimer a = {c1, s1, "pstripe", 0, OQ_OK, false, p1};
  pthread_t ta;
  ASSERT_EQ(pthread_create(&ta, NULL, late_claim, &a), 0);
  wait_stage(&g);
  ASSERT_OK(hold, oq_db_exec(hold, "BEGIN", 0, NULL, NULL));
  QEXEC(hold, "SELECT 1 FROM onceq_sessions WHERE id = $1::uuid FOR UPDATE",
        sid);
  go_on(&g);
  wait_lock_wait(db, pid1, NULL, "member 1");
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM pg_locks WHERE pid = $1::int"
                  " AND locktype = 'advisory' AND granted",
                  pid1),
            (run1.hi - 1) / OQ_KEY_LOCK_SLOTS - run1.lo / OQ_KEY_LOCK_SLOTS +
                1);
  /* member 2, in other stripes, does not wait for member 1 */
  late_claimer b = {c2, s2, "pstripe", 0, OQ_OK, false, p2};
  pthread_t tb;
  ASSERT_EQ(pthread_create(&tb, NULL, late_claim, &b), 0);
  uint64_t t0 = oq_monotonic_ms();
  while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE)) {
    if (oq_monotonic_ms() - t0 > 10000)
      OQT_FAIL("member 2 waited for member 1's key locks");
    oqt_sleep_ms(5);
  }
  ASSERT_OK(hold, oq_db_exec(hold, "ROLLBACK", 0, NULL, NULL));
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  ASSERT_OK(c1, a.e);
  ASSERT_OK(c2, b.e);
  ASSERT(a.n > 0 && b.n > 0);
  ASSERT_EQ(a.n + b.n, 40); /* every key's head, once */
  oq__claim_keyed_hook(c1, NULL, NULL);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "pstripe");
  oq_parts_free(p1);
  oq_parts_free(p2);
  ASSERT_OK(c1, oq_session_end(c1, s1));
  ASSERT_OK(c2, oq_session_end(c2, s2));
  oq_session_free(s1);
  oq_session_free(s2);
  oq_db_close(c2);
  oq_db_close(c1);
  oq_db_close(hold);
  printf("ok a partitioned keyed claim locks its own stripes only\n");
}

/* oq_claim inside the caller's transaction: the key locks go first as a
 * statement of their own (db_tx.c, lock_in_transaction), held to the
 * caller's commit, and change none of its settings. */
typedef struct tx_claim {
  const oq_session *s;
  size_t n;
  long locks;
  char jit[16];
} tx_claim;

static oq_err claim_in_tx(oq_db *db, void *ud)
{
  tx_claim *t = ud;
  const char *q[1] = {"txq"};
  oq_item *it = NULL;
  oq_err e = oq_claim(db, t->s, q, 1, 10, &it, &t->n);
  oq_items_free(it, t->n);
  if (e != OQ_OK)
    return e;
  t->locks = oqt_scalar(db, "SELECT count(*) FROM pg_locks WHERE pid ="
                            " pg_backend_pid() AND locktype = 'advisory'");
  QTEXT(db, t->jit, "SELECT current_setting($1)", "jit");
  return OQ_OK;
}

static void test_claim_in_transaction(oq_db *db, const oq_session *w)
{
  put(db, "txq", "a", 2, 25);
  put(db, "txq", "b", 2, 25);
  char jit[16] = "";
  QTEXT(db, jit, "SELECT current_setting($1)", "jit");
  tx_claim t = {w, 0, -1, ""};
  ASSERT_OK(db, oq_db_transact(db, claim_in_tx, &t));
  ASSERT_EQ(t.n, 2); /* one head per key */
  ASSERT_EQ(t.locks, strcmp(oqt_isolation(), "read committed") == 0
                         ? OQ_PARTS_SLOTS / OQ_KEY_LOCK_SLOTS
                         : 0);
  ASSERT_STREQ(t.jit, jit); /* the caller's settings untouched */
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "txq");
  printf("ok a keyed claim inside a transaction takes its locks first\n");
}

/* A claim over a queue without keys that always fills it and a keyed
 * queue: the keyed one, claimed by its own statement after the others
 * (claim.c, claim_keyed), still gets the first pick every other call once
 * a claim has named it (with per-queue claims, the CockroachDB traits,
 * only a call whose turn starts with it does). */
static void test_keyed_not_starved(oq_db *db, const oq_session *w)
{
  oqt_enqueue_n(db, "deep", 40);
  put(db, "kq", "a", 1, 25);
  put(db, "kq", "b", 1, 25);
  put(db, "kq", "c", 1, 25);
  const char *q[2] = {"deep", "kq"};
  size_t keyed = 0;
  for (int call = 0; call < 4; call++) {
    oq_item *it = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, w, q, 2, 5, &it, &n));
    ASSERT_EQ(n, 5);
    for (size_t i = 0; i < n; i++)
      keyed += strcmp(it[i].queue, "kq") == 0;
    oq_items_free(it, n);
  }
  ASSERT_EQ(keyed, 3);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = ANY($1::text[])",
        "{deep,kq}");
  printf("ok a full claim of unkeyed items does not starve a keyed queue\n");
}

/* --partitioned: every item of a key falls into one slot, its hash, and
 * an UPDATE cannot move one of them to another (schema v11). */
static void test_parts(oq_db *db)
{
  put(db, "parts", "p1", 5, 25);
  put(db, "parts", "p2", 5, 25);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(DISTINCT (ordering_key, part)) FROM onceq_items"
                  " WHERE queue = $1",
                  "parts"),
            2);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND part <> onceq_key_slot(ordering_key)",
                  "parts"),
            0);
  /* the slot comes from SHA-256, the same on every server version: the
   * digest of 'p1' begins f64551fc, and its first 32 bits & 1023 = 508, of
   * 'ключ' (UTF-8) 562 (Python's hashlib agrees) */
  ASSERT_EQ(QLONG(db, "SELECT onceq_key_slot($1)", "p1"), 508);
  ASSERT_EQ(QLONG(db, "SELECT onceq_key_slot($1)", "ключ"), 562);
  QEXEC(db,
        "UPDATE onceq_items SET part = (part + 512) % 1024 WHERE queue = $1"
        " AND ordering_key = 'p1'",
        "parts");
  QEXEC(db,
        "UPDATE onceq_items SET ordering_key = 'p2' WHERE queue = $1"
        " AND ordering_key = 'p1' AND enqueue_seq = (SELECT min(enqueue_seq)"
        " FROM onceq_items WHERE queue = $1 AND ordering_key = 'p1')",
        "parts");
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND part <> onceq_key_slot(ordering_key)",
                  "parts"),
            0);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(DISTINCT (ordering_key, part)) FROM onceq_items"
                  " WHERE queue = $1",
                  "parts"),
            2);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "parts");
  printf("ok a key's items share one slot, and an UPDATE keeps it\n");
}

/* The partitioned claim (oq_parts_claim) takes heads only as well. An
 * UPDATE that tries to spread key z over two parts' slots (as a
 * CockroachDB producer might leave a key, where its claim looks across
 * parts) is undone by the trigger on PostgreSQL, whose probes of one key
 * read its one part (schema v11). */
static void test_parts_claim(oq_db *db)
{
  ASSERT_OK(db, oq_parts_set(db, 4));
  oq_session *s = SEM_LONG_SESSION(db);
  oq_parts *p = NULL;
  ASSERT_OK(db, oq_parts_new(NULL, &p));
  ASSERT_OK(db, oq_parts_rebalance(db, s, p));
  put(db, "pclaim", "x", 3, 25);
  put(db, "pclaim", "y", 3, 25);
  /* try to spread key z: its later items in another part's slots */
  put(db, "pclaim", "z", 3, 25);
  QEXEC(db,
        "UPDATE onceq_items SET part = (part + 512) % 1024 WHERE queue = $1"
        " AND ordering_key = 'z' AND enqueue_seq > (SELECT min(enqueue_seq)"
        " FROM onceq_items WHERE queue = $1 AND ordering_key = 'z')",
        "pclaim");
  ASSERT_EQ(QLONG(db,
                  "SELECT count(DISTINCT part) FROM onceq_items"
                  " WHERE queue = $1 AND ordering_key = 'z'",
                  "pclaim"),
            1);
  const char *q[1] = {"pclaim"};
  for (int round = 0; round < 3; round++) {
    oq_item *it = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_parts_claim(db, s, p, q, 1, 100, &it, &n));
    ASSERT_EQ(n, 3); /* one head of each key */
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(QLONG(db,
                      "SELECT count(*) FROM onceq_items a JOIN onceq_items b"
                      " ON a.queue = b.queue AND a.ordering_key ="
                      " b.ordering_key AND b.enqueue_seq < a.enqueue_seq"
                      " WHERE a.id = $1",
                      it[i].id),
                0);
      ASSERT_OK(db, oq_ack(db, s, &it[i], NULL, NULL, NULL, NULL));
    }
    oq_items_free(it, n);
  }
  oq_parts_free(p);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  printf("ok the partitioned claim takes heads only; a key keeps one part\n");
}

/* The key of a claimed item ("" when it has none). */
static void key_of(oq_db *db, const char *id, char *key, size_t len)
{
  char buf[64] = "";
  if (!QTEXT(db, buf, "SELECT ordering_key FROM onceq_items WHERE id = $1", id))
    buf[0] = '\0';
  snprintf(key, len, "%s", buf);
}

/* A claim that wants fewer items than there are free keys still starts
 * with the front of the queue: the head with the highest priority comes
 * first even when its key sorts last (the keyed claim reads the key heads
 * in key order, at most as many as it wants, and then the front too). */
static void test_key_front(oq_db *db, const oq_session *w)
{
  QEXEC(db,
        "INSERT INTO onceq_items (queue, ordering_key, payload)"
        " SELECT $1, 'k' || lpad((g % 30)::text, 2, '0'),"
        " jsonb_build_object('i', g) FROM generate_series(0, 59) g ORDER BY g",
        "front");
  QEXEC(db,
        "UPDATE onceq_items SET priority = 5 WHERE queue = $1"
        " AND ordering_key = 'k29' AND enqueue_seq = (SELECT min(enqueue_seq)"
        " FROM onceq_items WHERE queue = $1 AND ordering_key = 'k29')",
        "front");
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "front", 5, &it);
  ASSERT_EQ(n, 5);
  char key[64];
  key_of(db, it[0].id, key, sizeof key);
  ASSERT_STREQ(key, "k29");
  ASSERT_EQ(it[0].priority, 5);
  for (size_t i = 0; i < n; i++)
    ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "front");
  printf("ok a short keyed claim starts with the front of the queue\n");
}

/* The front walk looks past a few rows it cannot take: an unkeyed item
 * and a later item of a key at the front of the queue must not hide a
 * free head of a higher priority behind them, while more free heads of a
 * lower priority wait (the loose scan would return those in key order).
 * A claim of 2 takes the unkeyed item (priority 9) and z's head (7). */
static void test_key_front_window(oq_db *db, const oq_session *w)
{
  const char *ins = "INSERT INTO onceq_items (queue, ordering_key, priority,"
                    " payload) VALUES ('window', $1, $2::int, '{}')";
  QEXEC(db, ins, "m", "0"); /* m's head, at the back */
  QEXEC(db, "INSERT INTO onceq_items (queue, priority, payload)"
            " VALUES ('window', 9, '{}')");
  QEXEC(db, ins, "m", "8"); /* m's second: not a head */
  QEXEC(db, ins, "z", "7");
  QEXEC(db, "INSERT INTO onceq_items (queue, ordering_key, payload)"
            " SELECT 'window', 'k' || g, '{}' FROM generate_series(0, 9) g"
            " ORDER BY g");
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "window", 2, &it);
  ASSERT_EQ(n, 2);
  ASSERT_EQ(it[0].priority, 9);
  ASSERT(it[0].ordering_key == NULL);
  ASSERT_EQ(it[1].priority, 7);
  ASSERT_STREQ(it[1].ordering_key, "z");
  for (size_t i = 0; i < n; i++)
    ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
  oq_items_free(it, n);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = 'window'");
  printf("ok a free head of a higher priority behind the front is claimed "
         "before the loose scan's\n");
}

/* Items without a key in a queue that holds keyed ones are claimed even
 * behind a front of blocked keyed items (every key in flight), in claim
 * order with the heads. */
static void test_key_mixed(oq_db *db, const oq_session *w)
{
  QEXEC(db,
        "INSERT INTO onceq_items (queue, ordering_key, run_at, payload)"
        " SELECT $1, 'm' || (g % 40), now() - interval '1 hour',"
        " jsonb_build_object('i', g) FROM generate_series(0, 199) g ORDER BY g",
        "mixed");
  QEXEC(db,
        "INSERT INTO onceq_items (queue) SELECT $1 FROM"
        " generate_series(1, 3)",
        "mixed");
  oq_item *heads = NULL;
  size_t n = SEM_CLAIM(db, w, "mixed", 40, &heads);
  ASSERT_EQ(n, 40); /* the 40 heads: older than the unkeyed items */
  char key[64];
  for (size_t i = 0; i < n; i++) {
    key_of(db, heads[i].id, key, sizeof key);
    ASSERT(key[0] == 'm');
  }
  oq_item *plain = NULL;
  size_t m = SEM_CLAIM(db, w, "mixed", 40, &plain);
  ASSERT_EQ(m, 3); /* every key in flight: the unkeyed ones only */
  for (size_t i = 0; i < m; i++) {
    key_of(db, plain[i].id, key, sizeof key);
    ASSERT_STREQ(key, "");
    ASSERT_OK(db, oq_ack(db, w, &plain[i], NULL, NULL, NULL, NULL));
  }
  for (size_t i = 0; i < n; i++)
    ASSERT_OK(db, oq_ack(db, w, &heads[i], NULL, NULL, NULL, NULL));
  oq_items_free(plain, m);
  oq_items_free(heads, n);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "mixed");
  printf("ok unkeyed items of a keyed queue pass a blocked front\n");
}

typedef struct {
  oq_db *db;
  oq_session *s;
  int acked;
  int refused;
} worker;

/* In the ack transaction: the ledger row, unless the key already has a
 * later item there (then the ack rolls back and the test fails). */
static oq_err ledger_cb(oq_db *db, const oq_item *item, void *ud)
{
  worker *w = ud;
  const char *p[1] = {item->id};
  long rows = -1;
  oq_err e = oq_db_exec(
      db,
      "INSERT INTO oledger (item_id, okey, seq)"
      " SELECT i.id, i.ordering_key, i.enqueue_seq FROM onceq_items i"
      " WHERE i.id = $1::uuid AND NOT EXISTS (SELECT 1 FROM oledger l"
      " WHERE l.okey = i.ordering_key AND l.seq > i.enqueue_seq)",
      1, p, &rows);
  if (e == OQ_OK && rows != 1) {
    w->refused++;
    return OQ_ERR_CALLBACK;
  }
  return e;
}

static void *drain(void *arg)
{
  worker *w = arg;
  const char *q[1] = {"drain"};
  for (int round = 0; round < 2000; round++) {
    oq_item *it = NULL;
    size_t n = 0;
    ASSERT_OK(w->db, oq_claim(w->db, w->s, q, 1, 7, &it, &n));
    for (size_t i = 0; i < n; i++) {
      oq_err e = oq_ack(w->db, w->s, &it[i], ledger_cb, w, NULL, NULL);
      if (e == OQ_OK)
        w->acked++;
      else
        ASSERT_OK(w->db, oq_release(w->db, w->s, &it[i], 1, NULL));
    }
    oq_items_free(it, n);
    if (oqt_scalar(w->db, "SELECT count(*) FROM onceq_items"
                          " WHERE queue = 'drain'") == 0)
      break;
  }
  return NULL;
}

static void test_workers(oq_db *db)
{
  ASSERT_OK(db, oq_db_exec(db,
                           "CREATE TABLE oledger (n BIGSERIAL PRIMARY KEY,"
                           " item_id UUID NOT NULL, okey TEXT NOT NULL,"
                           " seq BIGINT NOT NULL)",
                           0, NULL, NULL));
  for (int k = 0; k < KEYS; k++) {
    char key[16];
    snprintf(key, sizeof key, "key-%d", k);
    put(db, "drain", key, PER_KEY, 25);
  }
  worker w[WORKERS];
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].db = oqt_connect(dsn_g);
    w[i].s = SEM_LONG_SESSION(w[i].db);
    ASSERT_EQ(pthread_create(&t[i], NULL, drain, &w[i]), 0);
  }
  int acked = 0, refused = 0;
  for (int i = 0; i < WORKERS; i++) {
    ASSERT_EQ(pthread_join(t[i], NULL), 0);
    acked += w[i].acked;
    refused += w[i].refused;
    ASSERT_OK(w[i].db, oq_session_end(w[i].db, w[i].s));
    oq_session_free(w[i].s);
    oq_db_close(w[i].db);
  }
  ASSERT_EQ(refused, 0);
  ASSERT_EQ(acked, KEYS * PER_KEY);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(DISTINCT item_id) FROM oledger"),
            KEYS * PER_KEY);
  /* commit order (n) and enqueue order (seq) agree within every key */
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM oledger a JOIN oledger b"
                           " ON a.okey = b.okey AND a.n < b.n"
                           " AND a.seq > b.seq"),
            0);
  printf("ok %d workers: %d acks, per-key ledger in enqueue order\n", WORKERS,
         acked);
}

/* The item's "i" payload field. */
static long payload_i(oq_db *db, const char *payload)
{
  return QLONG(db, "SELECT ($1::jsonb ->> 'i')::int8", payload);
}

/*
 * Keyed items enqueued through the C API (oq_enqueue's ordering_key;
 * oq_enqueue_many's ordering_key for every item, or ordering_key_field for
 * each element's own) are stored with their key and run in the order they
 * were enqueued: each claim takes at most one item per key, and per key
 * the "i" fields come back 1, 2, 3, ...
 */
static void test_enqueue_api(oq_db *db, const oq_session *w)
{
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_opts bad = {.queue = "api", .ordering_key = ""};
  ASSERT_ERR(OQ_ERR_INVALID, oq_enqueue(db, &bad, id, NULL));
  ASSERT(strstr(oq_db_errmsg(db), "ordering_key") != NULL);
  char longkey[OQ_MAX_ORDERING_KEY_BYTES + 2];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  bad.ordering_key = longkey;
  ASSERT_ERR(OQ_ERR_INVALID, oq_enqueue(db, &bad, id, NULL));
  ASSERT_ERR(OQ_ERR_INVALID,
             oq_enqueue_many(db, &bad, "[{}]", NULL, NULL, NULL));
  bad.ordering_key = NULL;
  bad.ordering_key_field = "";
  ASSERT_ERR(OQ_ERR_INVALID,
             oq_enqueue_many(db, &bad, "[{}]", NULL, NULL, NULL));

  for (int i = 1; i <= 4; i++) {
    char payload[32];
    snprintf(payload, sizeof payload, "{\"i\": %d}", i);
    oq_enqueue_opts o = {
        .queue = "api", .payload = payload, .ordering_key = "one"};
    ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
  }
  oq_enqueue_opts all = {.queue = "api", .ordering_key = "many"};
  ASSERT_OK(db,
            oq_enqueue_many(db, &all, "[{\"i\": 1}, {\"i\": 2}, {\"i\": 3}]",
                            NULL, NULL, NULL));
  oq_enqueue_opts per = {.queue = "api", .ordering_key_field = "k"};
  ASSERT_OK(db, oq_enqueue_many(
                    db, &per,
                    "[{\"k\": \"x\", \"i\": 1}, {\"k\": \"y\", \"i\": 1},"
                    " {\"k\": \"x\", \"i\": 2}, {\"k\": 7, \"i\": 1},"
                    " {\"k\": \"y\", \"i\": 2}, {\"k\": \"x\", \"i\": 3}]",
                    NULL, NULL, NULL));
  ASSERT_EQ(QLONG(db,
                  "SELECT count(DISTINCT ordering_key) FROM onceq_items"
                  " WHERE queue = $1",
                  "api"),
            5);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND ordering_key IS NULL",
                  "api"),
            0);
  const char *keys[5] = {"one", "many", "x", "y", "7"};
  long next[5] = {1, 1, 1, 1, 1};
  for (int round = 0; round < 10; round++) {
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(db, w, "api", 100, &it);
    if (n == 0) {
      oq_items_free(it, n);
      break;
    }
    bool seen[5] = {false};
    for (size_t i = 0; i < n; i++) {
      char key[16] = "";
      ASSERT(QTEXT(db, key,
                   "SELECT ordering_key FROM onceq_items WHERE id = $1",
                   it[i].id));
      int k = 0;
      while (k < 5 && strcmp(keys[k], key) != 0)
        k++;
      ASSERT(k < 5);
      ASSERT(!seen[k]); /* one item per key per claim */
      seen[k] = true;
      ASSERT_EQ(payload_i(db, it[i].payload), next[k]);
      next[k]++;
      ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
    }
    oq_items_free(it, n);
  }
  ASSERT_EQ(next[0], 5);
  ASSERT_EQ(next[1], 4);
  ASSERT_EQ(next[2], 4);
  ASSERT_EQ(next[3], 3);
  ASSERT_EQ(next[4], 2);
  printf("ok ordering_key through oq_enqueue and oq_enqueue_many: per-key "
         "enqueue order\n");
}

/* Queue `queue` holds 9 items on keys k0..k2 (item g has key g % 3 and
 * payload i = g): from round `first` to 2 each claim takes the next item
 * of each key, in enqueue order, and acknowledges it. */
static void claim_in_order(oq_db *db, const oq_session *w, const char *queue,
                           int first)
{
  const char *q[1] = {queue};
  for (int round = first; round < 3; round++) {
    oq_item *it = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, w, q, 1, 100, &it, &n));
    ASSERT_EQ(n, 3);
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(payload_i(db, it[i].payload) / 3, round);
      ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
    }
    oq_items_free(it, n);
  }
}

/* Schema v11 on a database that has keyed items: they move to their
 * SHA-256 slot, the index gains part, a re-run recomputes stale slots,
 * and their order holds. The v10 state is
 * rebuilt by hand: v5's index, and parts from v5's hashtext, written with
 * the trigger off (v10's trigger gave those). */
static void test_v11_migration(oq_db *db, const oq_session *w)
{
  QEXEC(db, "DROP INDEX onceq_items_key_order");
  QEXEC(db, "CREATE INDEX onceq_items_key_order ON onceq_items"
            " (queue, ordering_key, enqueue_seq)"
            " WHERE ordering_key IS NOT NULL");
  QEXEC(db, "ALTER TABLE onceq_items DISABLE TRIGGER onceq_items_key_part");
  QEXEC(db, "INSERT INTO onceq_items (queue, ordering_key, part, payload)"
            " SELECT 'v11', 'k' || (g % 3), hashtext('k' || (g % 3)) & 1023,"
            " jsonb_build_object('i', g)"
            " FROM generate_series(0, 8) g ORDER BY g");
  QEXEC(db, "ALTER TABLE onceq_items ENABLE TRIGGER onceq_items_key_part");
  QEXEC(db, "DELETE FROM onceq_migrations WHERE version >= 11");
  ASSERT(QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = 'v11'"
                   " AND part <> onceq_key_slot(ordering_key)") > 0);
  int from = 0, to = 0;
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, 10);
  ASSERT_EQ(to, oq_migrate_latest());
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = 'v11'"
                      " AND part <> onceq_key_slot(ordering_key)"),
            0);
  ASSERT_EQ(QLONG(db, "SELECT position('(queue, part, ordering_key,"
                      " enqueue_seq)' IN pg_get_indexdef("
                      "'onceq_items_key_order'::regclass))") > 0,
            1);
  /* v11 again, on its own index, with slots made stale behind the
   * trigger's back: the slots are recomputed all the same */
  QEXEC(db, "ALTER TABLE onceq_items DISABLE TRIGGER onceq_items_key_part");
  QEXEC(db, "UPDATE onceq_items SET part = (part + 1) % 1024"
            " WHERE queue = 'v11'");
  QEXEC(db, "ALTER TABLE onceq_items ENABLE TRIGGER onceq_items_key_part");
  QEXEC(db, "DELETE FROM onceq_migrations WHERE version >= 11");
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, 10);
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = 'v11'"
                      " AND part <> onceq_key_slot(ordering_key)"),
            0);
  claim_in_order(db, w, "v11", 0);
  printf("ok schema v11 moves queued keyed items to their slot, in order\n");
}

/* Schema v12 on a database with keyed items, some claimed: the key index
 * is rebuilt to hold only the unclaimed keyed rows (once: a re-run keeps
 * it), and a key whose head is claimed stays busy though its next item is
 * now the first one the index holds. */
static void test_v12_migration(oq_db *db, const oq_session *w)
{
  QEXEC(db, "DROP INDEX onceq_items_key_order");
  QEXEC(db, "CREATE INDEX onceq_items_key_order ON onceq_items"
            " (queue, part, ordering_key, enqueue_seq)"
            " WHERE ordering_key IS NOT NULL");
  QEXEC(db, "INSERT INTO onceq_items (queue, ordering_key, payload)"
            " SELECT 'v12', 'k' || (g % 3), jsonb_build_object('i', g)"
            " FROM generate_series(0, 8) g ORDER BY g");
  const char *q[1] = {"v12"};
  oq_item *heads = NULL;
  size_t nh = 0;
  ASSERT_OK(db, oq_claim(db, w, q, 1, 100, &heads, &nh));
  ASSERT_EQ(nh, 3);
  QEXEC(db, "DELETE FROM onceq_migrations WHERE version >= 12");
  int from = 0, to = 0;
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, 11);
  ASSERT_EQ(to, oq_migrate_latest());
  ASSERT_EQ(QLONG(db, "SELECT position('claim IS NULL' IN pg_get_indexdef("
                      "'onceq_items_key_order'::regclass))") > 0,
            1);
  long oid = QLONG(db, "SELECT 'onceq_items_key_order'::regclass::oid::int8");
  QEXEC(db, "DELETE FROM onceq_migrations WHERE version >= 12");
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, 11);
  ASSERT_EQ(QLONG(db, "SELECT 'onceq_items_key_order'::regclass::oid::int8"),
            oid);
  /* the heads claimed before the migration keep their keys busy */
  oq_item *none = NULL;
  size_t nn = 0;
  ASSERT_OK(db, oq_claim(db, w, q, 1, 100, &none, &nn));
  ASSERT_EQ(nn, 0);
  oq_items_free(none, nn);
  for (size_t i = 0; i < nh; i++) {
    ASSERT_EQ(payload_i(db, heads[i].payload) / 3, 0);
    ASSERT_OK(db, oq_ack(db, w, &heads[i], NULL, NULL, NULL, NULL));
  }
  oq_items_free(heads, nh);
  claim_in_order(db, w, "v12", 1);
  printf("ok schema v12: the key index holds the unclaimed keyed rows, a "
         "claimed head still holds its key\n");
}

int main(void)
{
  dsn_g = oqt_fresh_db("ordering", 1);
  oq_db *db = oqt_connect(dsn_g);
  oq_session *w = SEM_LONG_SESSION(db);

  test_heads(db, w);
  test_fail_blocks(db, w);
  test_late_commit(db, w);
  test_late_commit_race(db, w);
  test_late_commit_key_lock(db);
  test_keyed_not_starved(db, w);
  test_claim_in_transaction(db, w);
  test_parts(db);
  test_workers(db);
  test_parts_claim(db);
  test_enqueue_api(db, w);
  test_key_front(db, w);
  test_key_front_window(db, w);
  test_key_mixed(db, w);
  test_parts_key_lock(db);
  test_v11_migration(db, w);
  test_v12_migration(db, w);

  ASSERT_OK(db, oq_session_end(db, w));
  oq_session_free(w);
  oq_db_close(db);
  printf("PASS it_lib_ordering (isolation: %s)\n", oqt_isolation());
  return 0;
}
