/*
 * waiter.h: a stop flag a background thread sleeps on, so stop() wakes it
 * at once instead of after its interval. Used by the heartbeat and reaper
 * threads.
 */
#ifndef ONCEQ_WAITER_H
#define ONCEQ_WAITER_H

#include <pthread.h>
#include <stdbool.h>

typedef struct oq__waiter {
  pthread_mutex_t mu;
  pthread_cond_t cond; /* CLOCK_MONOTONIC */
  bool stop;           /* guarded by mu */
} oq__waiter;

int oq__waiter_init(oq__waiter *w);
void oq__waiter_destroy(oq__waiter *w);
/* Sleep up to ms; true when stop was requested (now or before). */
bool oq__waiter_wait_ms(oq__waiter *w, int ms);
void oq__waiter_stop(oq__waiter *w);

#endif
