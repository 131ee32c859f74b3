/*
 * queue_limit.c: a queue's fleet-wide concurrency limit
 * (oq_queue_set_limits, onceq/queues.h), in both claim forms.
 *
 * Checks: a limited queue is claimed up to its limit across sessions and
 * no further; an ack makes room again; a crashed session's claims count
 * until it is reaped; limit 0 claims nothing; `none` lifts the limit; an
 * unlimited queue in the same claim is unaffected. Then CLAIMERS threads,
 * each with its own connection and session, claim and ack the limited
 * queue as fast as they can while a sampler counts its claimed items every
 * 20 ms: never more than the limit, and every item is acknowledged once.
 * oq_queue_controls_get reads the controls back.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define LIMIT 3
#define CLAIMERS 4
#define ITEMS 120

/* Claim up to max of q; keep them in *held (appended); returns how many. */
static size_t take(oq_db *db, const oq_session *s, const char *const *q,
                   size_t nq, int max, const char *queue_of_interest)
{
  oq_item *items = NULL;
  size_t n = 0, k = 0;
  ASSERT_OK(db, oq_claim(db, s, q, nq, max, &items, &n));
  for (size_t i = 0; i < n; i++)
    k += strcmp(items[i].queue, queue_of_interest) == 0;
  oq_items_free(items, n); /* they stay claimed in the database */
  return k;
}

static long claimed(oq_db *db, const char *queue)
{
  return QLONG(db,
               "SELECT count(*) FROM onceq_items WHERE queue = $1"
               " AND claim IS NOT NULL",
               queue);
}

static void run_form(oq_db *db, bool per_queue)
{
  const char *form = SEM_FORM_BEGIN(db, per_queue, "lq_%");
  if (!form)
    return;
  QEXEC(db, "DELETE FROM onceq_queues WHERE queue LIKE $1", "lq_%");
  SEM_ENQUEUE(db, "lq_a", 10);
  SEM_ENQUEUE(db, "lq_free", 4);
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_a", 3));
  const char *both[2] = {"lq_a", "lq_free"};
  const char *qa[1] = {"lq_a"};
  oq_session *a = SEM_LONG_SESSION(db);
  oq_session *b = SEM_LONG_SESSION(db);

  /* up to the limit, across sessions; the free queue is not limited */
  ASSERT_EQ(take(db, a, both, 2, 20, "lq_a"), 3);
  ASSERT_EQ(claimed(db, "lq_free"), 4);
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 0);
  ASSERT_EQ(claimed(db, "lq_a"), 3);
  /* an ack (here: a release of one claim) makes room for one */
  QEXEC(db,
        "DELETE FROM onceq_items WHERE id = (SELECT id FROM onceq_items"
        " WHERE queue = 'lq_a' AND claim IS NOT NULL LIMIT 1) AND $1 = $1",
        "x");
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 1);
  ASSERT_EQ(claimed(db, "lq_a"), 3);

  /* a crashed session's claims count until it is reaped */
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_a", 5));
  oq_session *c = SEM_SESSION(db, 100, 1300);
  ASSERT_EQ(take(db, c, qa, 1, 10, "lq_a"), 2); /* then c "crashes" */
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 0);
  struct timespec pause = {1, 400 * 1000 * 1000};
  nanosleep(&pause, NULL); /* past c's expiry: still counted, not reaped */
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 0);
  int reaped = 0, dead = 0;
  ASSERT_OK(db, oq_reap(db, &reaped, &dead));
  ASSERT(reaped >= 1);
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 2); /* c's two, released */
  oq_session_free(c);

  /* 0 claims nothing; none lifts the limit at once */
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_a", 0));
  QEXEC(db, "UPDATE onceq_items SET claim = NULL WHERE queue = $1", "lq_a");
  ASSERT_EQ(take(db, b, qa, 1, 10, "lq_a"), 0);
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_a", -1));
  ASSERT_EQ(take(db, b, qa, 1, 20, "lq_a"), 9);

  ASSERT_OK(db, oq_session_end(db, a));
  ASSERT_OK(db, oq_session_end(db, b));
  oq_session_free(a);
  oq_session_free(b);
  oq__claim_force_per_queue(db, false);
  printf("ok %s: concurrency limit\n", form);
}

/* ---- concurrent claimers ---------------------------------------------- */

static const char *g_dsn;
static atomic_bool g_stop;
static atomic_long g_acked;

static void *claimer(void *arg)
{
  (void)arg;
  oq_db *db = oqt_connect(g_dsn);
  oq_session *s = SEM_LONG_SESSION(db);
  const char *q[1] = {"lq_c"};
  while (!atomic_load(&g_stop) && atomic_load(&g_acked) < ITEMS) {
    oq_item *items = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, s, q, 1, 5, &items, &n));
    struct timespec hold = {0, (long)(10 + n * 10) * 1000 * 1000};
    nanosleep(&hold, NULL);
    for (size_t i = 0; i < n; i++) {
      ASSERT_OK(db, oq_ack(db, s, &items[i], NULL, NULL, NULL, NULL));
      atomic_fetch_add(&g_acked, 1);
    }
    oq_items_free(items, n);
  }
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  return NULL;
}

static void run_concurrent(oq_db *db)
{
  SEM_ENQUEUE(db, "lq_c", ITEMS);
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_c", LIMIT));
  pthread_t t[CLAIMERS];
  for (int i = 0; i < CLAIMERS; i++)
    ASSERT_EQ(pthread_create(&t[i], NULL, claimer, NULL), 0);
  long most = 0, samples = 0;
  uint64_t deadline = oq_monotonic_ms() + 30000;
  while (atomic_load(&g_acked) < ITEMS && oq_monotonic_ms() < deadline) {
    long k = QLONG(db,
                   "SELECT count(*) FROM onceq_items i JOIN onceq_sessions s"
                   " ON s.id = i.claim WHERE i.queue = $1",
                   "lq_c");
    if (k > most)
      most = k;
    samples++;
    struct timespec every = {0, 20 * 1000 * 1000};
    nanosleep(&every, NULL);
  }
  atomic_store(&g_stop, true);
  for (int i = 0; i < CLAIMERS; i++)
    pthread_join(t[i], NULL);
  printf("concurrent: %ld samples, at most %ld claimed (limit %d), %ld acked\n",
         samples, most, LIMIT, atomic_load(&g_acked));
  ASSERT_LE(most, LIMIT);
  ASSERT(most >= 1);
  ASSERT_EQ(atomic_load(&g_acked), ITEMS);
  ASSERT_EQ(
      QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = $1", "lq_c"),
      0);
  printf("ok concurrent claimers under the limit\n");
}

/* oq_queue_controls_get reads back what the setters stored, and -1 (none)
 * for a queue without controls. */
static void controls_read_back(oq_db *db)
{
  oq_queue_controls qc;
  ASSERT_ERR(OQ_ERR_INVALID, oq_queue_controls_get(db, "", &qc));
  ASSERT_OK(db, oq_queue_controls_get(db, "lq_none", &qc));
  ASSERT_EQ(qc.paused, false);
  ASSERT_EQ(qc.max_running, -1);
  ASSERT_EQ(qc.rate_limit, -1);
  ASSERT_EQ(qc.rate_interval_ms, -1);
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_ctl", 7));
  ASSERT_OK(db, oq_queue_set_rate(db, "lq_ctl", 10, 1500));
  ASSERT_OK(db, oq_queue_pause(db, "lq_ctl"));
  ASSERT_OK(db, oq_queue_controls_get(db, "lq_ctl", &qc));
  ASSERT_EQ(qc.paused, true);
  ASSERT_EQ(qc.max_running, 7);
  ASSERT_EQ(qc.rate_limit, 10);
  ASSERT_EQ(qc.rate_interval_ms, 1500);
  ASSERT_OK(db, oq_queue_set_limits(db, "lq_ctl", -1));
  ASSERT_OK(db, oq_queue_set_rate(db, "lq_ctl", 0, 0));
  ASSERT_OK(db, oq_queue_controls_get(db, "lq_ctl", &qc));
  ASSERT_EQ(qc.max_running, -1);
  ASSERT_EQ(qc.rate_limit, -1);
  ASSERT_EQ(qc.rate_interval_ms, -1);
  ASSERT_OK(db, oq_queue_resume(db, "lq_ctl"));
  printf("ok controls read back\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("queue_limit", 1);
  oq_db *db = oqt_connect(dsn);
  ASSERT_ERR(OQ_ERR_INVALID, oq_queue_set_limits(db, "", 1));
  controls_read_back(db);
  run_form(db, false);
  run_form(db, true);
  g_dsn = dsn;
  run_concurrent(db);
  oq_db_close(db);
  return 0;
}
