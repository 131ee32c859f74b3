/*
 * qstats.h: one snapshot of the queues (`onceq stats`, and the
 * coordinator's Prometheus gauges): per-queue counts and lag, the live
 * sessions with their claims, and the cumulative counters that rates are
 * computed from between two snapshots.
 *
 * Terms:
 *  - ready: unclaimed, run_at <= now(); scheduled: unclaimed, run_at in
 *    the future; running: claimed; dead: in onceq_dead.
 *  - lag: the age of the oldest ready item (now() - its run_at).
 *  - blocked keys: ordering keys whose head (the item with the lowest
 *    enqueue_seq) has failed and is not running, so the key's other items
 *    wait (strict order): what `onceq keys --blocked` lists (keys_view.h).
 *  - arrivals (last 60 s): items created in the window, wherever they are
 *    now: acked (onceq_done, needs history), dead, or live. A live ready
 *    item is counted by its run_at, a range of the ready index (run_at is
 *    created_at for an item enqueued to run now; for a delayed or retried
 *    item it is when it became runnable, which is what loads the
 *    workers); a running one by created_at (few rows, via the claim index).
 *  - capped count: counts stop at QV_COUNT_CAP (figures.h); a value above it
 *    means "more than". Every count reads an index range and at most
 *    QV_COUNT_CAP + 1 entries, so a snapshot stays cheap on a table of
 *    millions.
 *  - history: onceq_done has rows (workers run with --history).
 *  - table counters (PostgreSQL only): pg_stat_user_tables' cumulative
 *    n_tup_ins / n_tup_del of onceq_items and onceq_dead. Free to read and
 *    written by no onceq code, but table-wide (not per queue) and flushed
 *    by each backend about once a second.
 *
 * Times come from the database's clock (now()), never the local one.
 *
 * Thread safety: uses the caller's db; snapshots are plain memory.
 */
#ifndef ONCEQ_QUERY_QSTATS_H
#define ONCEQ_QUERY_QSTATS_H

#include <stdbool.h>
#include <stdint.h>

#include "onceq/onceq.h"

/* At most this many queues get per-queue detail (sorted by name). */
#define QV_MAX_QUEUES 100
/* At most this many distinct priorities are walked per queue. */
#define QV_MAX_PRIORITIES 64

typedef struct qv_qstat {
  char *queue;      /* owned */
  long ready;       /* capped count */
  long scheduled;   /* capped count */
  long running;     /* capped count (from the claim index) */
  long dead;        /* capped count */
  long blocked;     /* capped count of blocked keys */
  bool paused;      /* claims skip it (`onceq pause`, onceq/queues.h) */
  long max_running; /* fleet-wide concurrency limit; -1: none */
  long rate_limit;  /* starts per rate_interval_ms; -1: none */
  long rate_interval_ms;
  bool approx;   /* more than QV_MAX_PRIORITIES priorities: ready and
                    scheduled are lower bounds */
  double lag_s;  /* oldest ready item's age, seconds; -1: none ready */
  long done_60s; /* history: acked in the last 60 s; -1 without */
  long died_60s; /* dead-lettered in the last 60 s (capped) */
  /* arrivals in the last 60 s, by where those items are now: */
  long new_live_60s; /* live: ready ones whose run_at is in the window
                        (run_at is created_at unless delayed or retried:
                        work that became runnable) + running ones
                        created in the window */
  long new_done_60s; /* history: acked in the window, created in it */
  long new_died_60s; /* dead-lettered in the window, created in it */
} qv_qstat;

typedef struct qv_sstat {
  char *id;       /* session UUID, owned */
  char *hostname; /* owned */
  char *version;  /* owned */
  char *queues;   /* owned; "" for the coordinator */
  long pid;
  bool coordinator; /* a coordinator's session (version onceq-coordinator/) */
  bool leader;      /* holds the coordinator lease */
  double heartbeat_age_s;
  double expiry_s;
  double age_s;
  long claims; /* capped count */
} qv_sstat;

typedef struct qv_snapshot {
  double now_s;     /* the database's now(), Unix seconds */
  uint64_t mono_ms; /* local monotonic clock when taken */
  qv_qstat *q;      /* nq queues, sorted by name */
  int nq;
  int more_queues; /* queues found beyond QV_MAX_QUEUES */
  qv_sstat *s;     /* ns sessions, oldest first */
  int ns;
  bool history;      /* onceq_done has rows */
  bool counters;     /* items_ins/items_del/dead_ins are valid */
  int64_t items_ins; /* pg_stat n_tup_ins(onceq_items) */
  int64_t items_del; /* pg_stat n_tup_del(onceq_items) */
  int64_t dead_ins;  /* pg_stat n_tup_ins(onceq_dead) */
} qv_snapshot;

#define QV_COORDINATOR_VERSION_PREFIX "onceq-coordinator/"

/*
 * Take a snapshot. with_sessions: also list sessions (stats; the metrics
 * gauges skip them). On failure *out is zeroed, nothing to free, and the
 * error is on db.
 */
OQ_MUST_CHECK oq_err qv_snapshot_take(oq_db *db, bool with_sessions,
                                      qv_snapshot *out);
/* Free a snapshot's memory. NULL is fine. */
void qv_snapshot_free(qv_snapshot *s);
/* The blocked-key count's statement (queue, count per queue), shown for
 * its plan test (it_cli_blocked_plan). */
const char *qv_blocked_sql(oq_engine engine);
/* The queue named q in s, or NULL. */
const qv_qstat *qv_snapshot_queue(const qv_snapshot *s, const char *q);

#endif
