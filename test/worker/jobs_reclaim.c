/*
 * jobs_reclaim.c: a claim that brings an item a job of the same session
 * already holds (worker/src/jobs.c, wk_jobs_push). That happens when an
 * earlier claim's commit was lost in a server crash (claims commit
 * asynchronously) and the session claimed the row again: the chaos test
 * once saw the first run's ack free the item's ordering key while the
 * second run still ran ("key x1: n=162 by x6 started while n=158 by x6
 * ran"). The running job stays the only one; a job of another session
 * generation (a lost session's) does not stop the new claim. Also checks
 * the held-id table through growth and removals against wk_holds. No
 * database.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oq_test.h"
#include "runtime.h"

static oq_item item(const char *id)
{
  oq_item it;
  memset(&it, 0, sizeof it);
  snprintf(it.id, sizeof it.id, "%s", id);
  it.queue = strdup("q");
  it.payload = strdup("{}");
  it.attempt = 1;
  return it;
}

static void id_of(int n, char *out, size_t len)
{
  snprintf(out, len, "00000000-0000-4000-8000-%012d", n);
}

/* Take every queued job off the work list, as executors would. */
static size_t take_all(wk *w, wk_job **out, size_t max)
{
  size_t n = 0;
  pthread_mutex_lock(&w->mu);
  while (w->work_head && n < max) {
    out[n++] = w->work_head;
    w->work_head = w->work_head->next;
  }
  if (!w->work_head)
    w->work_tail = NULL;
  pthread_mutex_unlock(&w->mu);
  return n;
}

int main(void)
{
  wk w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.work_cv, NULL);
  pthread_cond_init(&w.slot_cv, NULL);
  w.wake_fd[0] = w.wake_fd[1] = -1;
  wk_gen g1 = {0}, g2 = {0};

  /* the first claim: one job */
  oq_item a = item("11111111-1111-4111-8111-111111111111");
  wk_jobs_push(&w, &g1, &a, 1);
  ASSERT_EQ(w.inflight, 1);
  /* the same session claims it again: still one job */
  oq_item again = item("11111111-1111-4111-8111-111111111111");
  wk_jobs_push(&w, &g1, &again, 1);
  free(again.queue); /* not taken: the caller's oq_items_free frees it */
  free(again.payload);
  if (w.inflight != 1)
    OQT_FAIL("a second claim of an item its session runs became a second "
             "job (%d in flight, want 1)",
             w.inflight);
  ASSERT_EQ(w.reclaimed, 1);
  /* a new session's claim of it is a claim of its own */
  oq_item other = item("11111111-1111-4111-8111-111111111111");
  wk_jobs_push(&w, &g2, &other, 1);
  ASSERT_EQ(w.inflight, 2);
  ASSERT_EQ(w.reclaimed, 1);

  /* many ids: the table grows, and every removal keeps the others found */
  enum { N = 500 };
  static oq_item many[N];
  char id[40];
  for (int i = 0; i < N; i++) {
    id_of(i, id, sizeof id);
    many[i] = item(id);
  }
  wk_jobs_push(&w, &g1, many, N);
  ASSERT_EQ(w.inflight, N + 2);
  static wk_job *jobs[N + 2];
  size_t got = take_all(&w, jobs, N + 2);
  ASSERT_EQ(got, (size_t)N + 2);
  /* free every other job of the many, then check each id */
  for (size_t k = 0; k < got; k++) {
    int n = -1;
    if (strncmp(jobs[k]->item.id, "00000000", 8) == 0)
      n = (int)strtol(jobs[k]->item.id + 24, NULL, 10);
    if (n >= 0 && n % 2 == 0) {
      wk_job_free(&w, jobs[k]);
      jobs[k] = NULL;
    }
  }
  for (int i = 0; i < N; i++) {
    id_of(i, id, sizeof id);
    if (wk_holds(&w, id) != (i % 2 == 1))
      OQT_FAIL("wk_holds(%s) = %d after freeing the even ones", id,
               (int)wk_holds(&w, id));
  }
  ASSERT(wk_holds(&w, "11111111-1111-4111-8111-111111111111"));
  /* free the rest: nothing is held */
  for (size_t k = 0; k < got; k++)
    if (jobs[k])
      wk_job_free(&w, jobs[k]);
  for (int i = 0; i < N; i++) {
    id_of(i, id, sizeof id);
    ASSERT(!wk_holds(&w, id));
  }
  ASSERT(!wk_holds(&w, "11111111-1111-4111-8111-111111111111"));
  ASSERT_EQ(w.held_ids_n, 0);
  /* a freed item claimed again is a new job */
  oq_item back = item("11111111-1111-4111-8111-111111111111");
  wk_jobs_push(&w, &g1, &back, 1);
  got = take_all(&w, jobs, 1);
  ASSERT_EQ(got, 1);
  wk_job_free(&w, jobs[0]);

  wk_jobs_fini(&w);
  pthread_cond_destroy(&w.slot_cv);
  pthread_cond_destroy(&w.work_cv);
  pthread_mutex_destroy(&w.mu);
  printf("PASS unit_worker_jobs_reclaim\n");
  return 0;
}
