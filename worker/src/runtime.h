/*
 * runtime.h: what the worker's threads share (worker.h for the terms): the
 * runtime struct, jobs and session generations, and the small helpers that
 * move jobs between the claim loop, the executors and the acker.
 *
 * The invariant these modules keep together (README "Session lifecycle",
 * docs/design.md §4a): every row with claim = S of a live session S is held in
 * memory by a job of S (queued, running or being acknowledged), or is being
 * released. A job is "held" from the moment the claim loop pushes it until
 * its outcome (ack, failed attempt, release) reached the database or the
 * attempt to settle it gave up; a job dropped without a settled outcome
 * asks for a reconciliation sweep (reconcile.h), which releases every claim
 * of the session that no job holds.
 *
 * Thread safety: fields marked (mu) are guarded by wk.mu; atomics may be
 * read anywhere; the rest is set up before the threads start.
 */
#ifndef ONCEQ_WORKER_RUNTIME_H
#define ONCEQ_WORKER_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "claim_size.h"
#include "config.h"
#include "metrics.h"
#include "onceq/onceq.h"

/* One session registration and its heartbeat. Freed by the claim loop once
 * it is lost and no job refers to it. */
typedef struct wk_gen {
  oq_session *session;
  oq_heartbeat *hb;
} wk_gen;

typedef struct wk_job {
  oq_item item;             /* owns queue, payload and ordering_key */
  wk_gen *g;                /* the session it was claimed under */
  struct wk_job *next;      /* in the work or ack list (mu) */
  struct wk_job *held_prev; /* in the held list (mu) */
  struct wk_job *held_next; /* in the held list (mu) */
  bool unsettled;           /* its outcome could not be written: freeing
                               it asks for a sweep (owner thread only) */
  char *result;             /* the handler's result for the acker (exec
                               stdout tail, HTTP body); NULL: none. Owned,
                               freed by wk_job_free */
  bool result_cut;          /* result is not all of the output */
  size_t payload_bytes;     /* strlen(item.payload): counted in held_bytes */
} wk_job;

typedef struct wk {
  const wk_config *cfg;
  wk_metrics *m;
  oq_db_opts dbo;     /* deadline_ms: the fence delay */
  unsigned host_hint; /* dbo.host_hint: the host of a multi-host --db that
                        answered last, shared by every connection */
  pthread_mutex_t mu;
  pthread_cond_t work_cv;        /* jobs queued, or executors told to exit */
  pthread_cond_t slot_cv;        /* a slot freed, or a session event */
  pthread_cond_t ack_cv;         /* acks queued, or acker told to exit */
  wk_job *work_head, *work_tail; /* (mu) */
  wk_job *ack_head, *ack_tail;   /* (mu) */
  wk_job *held;                  /* every job not yet freed (mu) */
  wk_job **held_ids;             /* the held jobs by item id: an open-
                                    addressing table, NULL: empty slot;
                                    one job per id, the newest (mu) */
  size_t held_ids_cap;           /* its slots, 0 or a power of 2 (mu) */
  size_t held_ids_n;             /* its jobs (mu) */
  bool held_ids_lossy;           /* a held job is missing from it (mu) */
  uint64_t reclaimed;            /* claims of an item a job of the same
                                    session already held (mu) */
  int inflight;                  /* jobs queued or running (mu) */
  int64_t held_bytes;            /* payload bytes of the held jobs (mu) */
  int gating;                    /* held jobs whose settle may make more
                                    claimable: keyed, or of a limited
                                    queue (mu) */
  int limited_held;              /* held jobs of a limited queue (mu) */
  int acks_pending;              /* jobs in the ack list or being acked (mu) */
  bool exit_executors;           /* (mu) */
  wk_claim_size sizing;          /* (mu) claims sized by the work */
  bool exit_acker;               /* (mu) */
  _Atomic bool hard_stop;        /* cancel running handlers now */
  _Atomic bool draining;         /* start no queued job */
  _Atomic bool sweep_due;        /* a job was dropped unsettled: sweep soon */
  int wake_fd[2];                /* a pipe, non-blocking: a settle ends the
                                    claim loop's wait on the LISTEN socket
                                    (wk_settle_wake); -1: none */
  _Atomic bool settle_armed;     /* the claim loop waits for a settle: the
                                    next one writes a byte to wake_fd[1] */
  int next_acks;                 /* acks asking for next items, between
                                    their start and the push of what they
                                    claimed (mu): rows of ours not held yet */
  uint64_t next_acks_started;    /* how many such acks ever started (mu) */
  /* --partitioned: the slots (onceq_items.part) of the parts the last
   * rebalance left claimable, one bit each, for the acks that claim next
   * items (handler_sql.c): they look where the claims look. Written by the
   * claim loop, read by executors; a stale bit only lets an ack take the
   * next item of a part just handed off, which its new owner's claims then
   * skip (the claim check still decides every ack). */
  _Atomic uint64_t claim_slots[16];
  wk_gen *current; /* claim loop only */
  oq_retry_policy item_retry;
} wk;

/* Monotonic milliseconds. */
uint64_t wk_now_ms(void);

/* Take ownership of n claimed items as jobs of g: hold them and queue them
 * for the executors. The items' strings move into the jobs; free the array
 * with oq_items_free as usual. An item that cannot get a job (out of
 * memory) is left to the next sweep. */
void wk_jobs_push(wk *w, wk_gen *g, oq_item *items, size_t n);
/* Free what the worker's job lists allocated (the held-id table) once no
 * job is left. */
void wk_jobs_fini(wk *w);
/* Free a job and stop holding it. Call once its outcome is settled, or
 * with j->unsettled set: then a sweep is requested once it is no longer
 * held, so the sweep releases its claim. */
void wk_job_free(wk *w, wk_job *j);
/* An executor finished with a job (acked, settled or handed to the acker). */
void wk_job_done(wk *w);
/* One of the worker's jobs settled (wk_busy went down): wake the claim
 * loop if it waits for that (settle_armed). Any thread; without mu. */
void wk_settle_wake(wk *w);
/* The claim loop, before a wait that a settle should end: arm the wake-up
 * and empty the pipe of earlier ones. */
void wk_settle_arm(wk *w);
/* Hand a succeeded job to the acker, which frees it. */
void wk_ack_queue(wk *w, wk_job *j);
/* Jobs queued, running or waiting for their ack. */
int wk_busy(wk *w);
/* Held jobs that are keyed or of a limited queue (wk->gating). */
int wk_gating(wk *w);
/* Whether some held job has this item id (mu taken inside). */
bool wk_holds(wk *w, const char *item_id);
/* An ack that claims next items (oq_ack_opts.next) starts, and ends once
 * what it claimed is pushed as jobs: between the two its rows may be
 * claimed by the session and not held, so a sweep must not release them
 * (wk_next_quiet). */
void wk_next_begin(wk *w);
void wk_next_end(wk *w);
/* The count of such acks started so far, or UINT64_MAX while one runs:
 * a sweep that read the same value before listing the claims and after
 * checking them saw no row of such an ack unheld (mu taken inside). */
uint64_t wk_next_quiet(wk *w);
/* Ask the claim loop for a reconciliation sweep (any thread). */
void wk_sweep_request(wk *w, const char *why);
/* Wait up to ms for a free slot or a session event (claim loop). */
void wk_wait_slot(wk *w, int ms);
/* The claim loop's wait after a short claim: returns at once when fewer
 * than `busy_then` items are in flight or being acknowledged (wk_busy),
 * else waits up to ms for a free slot or a session event, like
 * wk_wait_slot. The check and the wait are one step under wk.mu, so a job
 * that settles between the claim and the wait is not missed. Returns true
 * when fewer than busy_then were busy on return. busy_then <= 0: a plain
 * wait. */
bool wk_wait_settled(wk *w, int busy_then, int ms);
/* Wait up to ms, until no job is busy (wk_busy), a sweep is due, or the
 * session is no longer LIVE; a settle alone does not end it (claim loop,
 * --drain, after an empty claim while the acks take the keys' next items
 * and no job of a limited queue is held). */
void wk_wait_idle(wk *w, const oq_session *s, int ms);
/* Held jobs of a limited queue. */
int wk_limited_held(wk *w);

/* Sleep before retry number `round` of a failed database call, per the
 * library's one retry policy (transaction defaults, 2 s cap), with this
 * thread's rng (seeded by oq_backoff_seed). */
void wk_retry_pause(int round, uint64_t *rng);

/* Transient errors: the same call may succeed later. */
bool wk_transient(oq_err e);

#endif
