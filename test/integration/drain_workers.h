/*
 * drain_workers.h: N worker threads that drain one queue through the public
 * API, shared by the stress tests (stress.c, serializable_retries.c).
 *
 * Each thread owns its own oq_db, its own oq_session and its own heartbeat
 * (which has its own connection). It claims up to `batch` items, acks each
 * one with the caller's callback, and stops once a claim returns nothing
 * AND onceq_items is empty. Nothing is reaped during a drain, so every
 * claim and every ack must return OQ_OK: the first one that does not stops
 * all threads and fails the test with the code, message and SQLSTATE.
 *
 * Thread safety: oqt_drain is called from the main thread; the callback
 * runs on the worker threads (each on its own db).
 */
#ifndef OQT_DRAIN_WORKERS_H
#define OQT_DRAIN_WORKERS_H

#include <stdint.h>

#include "oq_test.h"

typedef struct oqt_drain_opts {
  const char *dsn;   /* the test database */
  const char *queue; /* the one queue to drain */
  int nthreads;      /* worker threads, each with its own connection */
  int batch;         /* oq_claim max */
  int time_limit_s;  /* fail the test when the drain takes longer */
  oq_ack_fn ack_fn;  /* ack callback; ud is the thread's oq_session */
} oqt_drain_opts;

typedef struct oqt_drain_stats {
  uint64_t claimed;    /* items returned by oq_claim, all threads */
  uint64_t acked;      /* oq_ack calls that returned OQ_OK */
  uint64_t reconciled; /* acks whose verdict came from reconciliation */
  uint64_t restarts;   /* sum of oq_db_restarts over the worker dbs */
  uint64_t heartbeats; /* sum of oq_heartbeat_count */
  uint64_t fenced;     /* FENCED events seen by the heartbeat callbacks */
  double elapsed_s;    /* from the start barrier to the last join */
} oqt_drain_stats;

/* Run the drain to the end; fails the test (exit 1) on any error. */
void oqt_drain(const oqt_drain_opts *o, oqt_drain_stats *st);

#endif
