/* waiter.c: see waiter.h. */
#include <errno.h>
#include <time.h>

#include "onceq/backoff.h"
#include "waiter.h"

int oq__waiter_init(oq__waiter *w)
{
  pthread_condattr_t attr;
  w->stop = false;
  if (pthread_mutex_init(&w->mu, NULL) != 0)
    return -1;
  if (pthread_condattr_init(&attr) != 0) {
    pthread_mutex_destroy(&w->mu);
    return -1;
  }
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&w->cond, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0) {
    pthread_mutex_destroy(&w->mu);
    return -1;
  }
  return 0;
}

void oq__waiter_destroy(oq__waiter *w)
{
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->mu);
}

bool oq__waiter_wait_ms(oq__waiter *w, int ms)
{
  struct timespec until = oq_monotonic_deadline(ms);
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    if (pthread_cond_timedwait(&w->cond, &w->mu, &until) == ETIMEDOUT)
      break;
  }
  bool stop = w->stop;
  pthread_mutex_unlock(&w->mu);
  return stop;
}

void oq__waiter_stop(oq__waiter *w)
{
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->mu);
}
