/*
 * queue_rate.c: a queue's fleet-wide rate limit (oq_queue_set_rate,
 * onceq/queues.h): a token bucket of N tokens refilled at N per interval.
 *
 * Checks, per claim form: a full bucket gives N claims at once and then
 * none; removing the limit claims the rest. Then CLAIMERS threads with
 * their own connections and sessions claim and ack as fast as they can
 * for RUN_MS: the starts (claims) over the run are at most N + N * run /
 * interval (the bucket's burst plus its refill) and at least the refill
 * less one interval's worth; no window of one interval holds more than 2N.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define N 5
#define INTERVAL_MS 500
#define RUN_MS 3000
#define CLAIMERS 3
#define MAX_STARTS 1000

static size_t take(oq_db *db, const oq_session *s, const char *queue, int max)
{
  const char *q[1] = {queue};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, 1, max, &items, &n));
  oq_items_free(items, n);
  return n;
}

static void run_form(oq_db *db, bool per_queue)
{
  oq__claim_force_per_queue(db, per_queue);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue = $1", "rq_a");
  SEM_ENQUEUE(db, "rq_a", 3 * N);
  ASSERT_OK(db, oq_queue_set_rate(db, "rq_a", N, 60000)); /* slow refill */
  oq_session *s = SEM_LONG_SESSION(db);
  ASSERT_EQ(take(db, s, "rq_a", 100), N); /* the full bucket */
  ASSERT_EQ(take(db, s, "rq_a", 100), 0);
  ASSERT_OK(db, oq_queue_set_rate(db, "rq_a", 0, 0)); /* none */
  ASSERT_EQ(take(db, s, "rq_a", 100), 2 * N);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq__claim_force_per_queue(db, false);
  printf("ok %s: rate limit bucket\n",
         per_queue ? "per-queue" : "one-statement");
}

static const char *g_dsn;
static atomic_bool g_stop;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_starts[MAX_STARTS];
static size_t g_nstarts;

static void *claimer(void *arg)
{
  (void)arg;
  oq_db *db = oqt_connect(g_dsn);
  oq_session *s = SEM_LONG_SESSION(db);
  const char *q[1] = {"rq_c"};
  while (!atomic_load(&g_stop)) {
    oq_item *items = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, s, q, 1, 10, &items, &n));
    uint64_t now = oq_monotonic_ms();
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < n && g_nstarts < MAX_STARTS; i++)
      g_starts[g_nstarts++] = now;
    pthread_mutex_unlock(&g_mu);
    for (size_t i = 0; i < n; i++)
      ASSERT_OK(db, oq_ack(db, s, &items[i], NULL, NULL, NULL, NULL));
    oq_items_free(items, n);
    struct timespec nap = {0, 5 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void run_concurrent(oq_db *db)
{
  SEM_ENQUEUE(db, "rq_c", 200);
  ASSERT_OK(db, oq_queue_set_rate(db, "rq_c", N, INTERVAL_MS));
  uint64_t t0 = oq_monotonic_ms();
  pthread_t t[CLAIMERS];
  for (int i = 0; i < CLAIMERS; i++)
    ASSERT_EQ(pthread_create(&t[i], NULL, claimer, NULL), 0);
  struct timespec run = {RUN_MS / 1000, (RUN_MS % 1000) * 1000L * 1000L};
  nanosleep(&run, NULL);
  atomic_store(&g_stop, true);
  for (int i = 0; i < CLAIMERS; i++)
    pthread_join(t[i], NULL);
  uint64_t took = oq_monotonic_ms() - t0;
  qsort(g_starts, g_nstarts, sizeof g_starts[0], cmp_u64);
  size_t most = 0;
  for (size_t i = 0, j = 0; i < g_nstarts; i++) {
    while (g_starts[i] - g_starts[j] >= INTERVAL_MS)
      j++;
    if (i - j + 1 > most)
      most = i - j + 1;
  }
  long upper = N + (long)(N * took / INTERVAL_MS);
  long lower = (long)(N * RUN_MS / INTERVAL_MS) - N;
  printf("concurrent: %zu starts in %llu ms (bounds %ld..%ld), at most %zu "
         "in one %d ms window (limit %d per interval)\n",
         g_nstarts, (unsigned long long)took, lower, upper, most, INTERVAL_MS,
         N);
  ASSERT_LE((long)g_nstarts, upper);
  ASSERT((long)g_nstarts >= lower);
  ASSERT_LE((long)most, 2 * N);
  printf("ok concurrent claimers under the rate limit\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("queue_rate", 1);
  oq_db *db = oqt_connect(dsn);
  ASSERT_ERR(OQ_ERR_INVALID, oq_queue_set_rate(db, "rq", 1, 0));
  if (oq_db_traits(db)->multi_queue_claim)
    run_form(db, false);
  run_form(db, true);
  g_dsn = dsn;
  run_concurrent(db);
  oq_db_close(db);
  return 0;
}
