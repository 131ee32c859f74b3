/*
 * wait_settled.c: the claim loop's wait after a short claim
 * (wk_wait_settled, worker/src/jobs.c). A job that settled between the
 * claim and the wait ends it at once; before, the wait slept its whole
 * timeout on a wake-up that had already gone by (the --drain tail: about
 * 50 ms of a 0.65 s drain of 20,000 items, after the last ack). No
 * database; the timeouts are long so that a lost wake-up cannot pass for
 * a slow machine.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "oq_test.h"
#include "runtime.h"

static void cond_init(pthread_cond_t *cv)
{
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

/* An executor that finishes its one job 50 ms from now. */
static void *finish_later(void *arg)
{
  wk *w = arg;
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  wk_job_done(w);
  return NULL;
}

int main(void)
{
  wk w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  cond_init(&w.slot_cv);

  /* settled before the wait began (during the claim): no wait at all */
  w.inflight = 0;
  w.acks_pending = 0;
  uint64_t t0 = wk_now_ms();
  ASSERT(wk_wait_settled(&w, 1, 3000));
  uint64_t took = wk_now_ms() - t0;
  if (took >= 1000)
    OQT_FAIL("a job settled before the wait: waited %llu ms of 3000 "
             "(want at once)",
             (unsigned long long)took);

  /* acks still pending count as busy; one settling during the wait ends
   * it at the wake-up */
  w.inflight = 1;
  w.acks_pending = 1;
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, finish_later, &w), 0);
  t0 = wk_now_ms();
  bool settled = false;
  while (!settled && wk_now_ms() - t0 < 3000)
    settled = wk_wait_settled(&w, 2, 3000);
  took = wk_now_ms() - t0;
  ASSERT_EQ(pthread_join(th, NULL), 0);
  ASSERT(settled);
  if (took >= 1000)
    OQT_FAIL("a job settled during the wait: %llu ms (want about 50)",
             (unsigned long long)took);

  /* nothing of ours to settle (busy_then 0): a plain wait of its time */
  t0 = wk_now_ms();
  ASSERT(!wk_wait_settled(&w, 0, 100));
  took = wk_now_ms() - t0;
  if (took < 90)
    OQT_FAIL("a plain wait of 100 ms took %llu ms", (unsigned long long)took);

  pthread_cond_destroy(&w.slot_cv);
  wk_jobs_fini(&w);
  pthread_mutex_destroy(&w.mu);
  printf("PASS\n");
  return 0;
}
