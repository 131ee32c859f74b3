/*
 * qstats.c: takes a qv_snapshot (qstats.h). Every count is an index range
 * read under a LIMIT, so a snapshot costs a bounded number of index entries
 * however big the tables are:
 *
 *  - the queue names come from loose index scans: min(queue) > previous,
 *    one probe per queue, on the ready index (onceq_items_ready, leading
 *    column queue, WHERE claim IS NULL) and on onceq_dead_queue; queues
 *    that only have claimed items come from the claim index;
 *  - blocked keys: one statement for every queue over
 *    onceq_items_key_failed (schema v7: the keyed items that failed and
 *    wait), each with one probe of onceq_items_key_order for an earlier
 *    item of its key; it reads the failed items, not the table;
 *  - ready / scheduled / lag walk the distinct priorities of a queue in the
 *    ready index (queue, priority DESC, run_at): for one (queue, priority)
 *    the ready items are a prefix of run_at and the scheduled ones the
 *    rest, so both counts are pure ranges, and min(run_at) is the first
 *    entry. Counting `run_at <= now()` over the whole queue instead would
 *    filter, not range, and read every scheduled entry to find none.
 */
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "figures.h"
#include "fmt.h"
#include "key_head.h"
#include "qstats.h"

#define CAP1 "100001"
_Static_assert(QV_COUNT_CAP + 1 == 100001, "CAP1 must be QV_COUNT_CAP + 1");

static const char SQL_NOW[] = "SELECT extract(epoch FROM now())::float8,"
                              " (EXISTS (SELECT 1 FROM onceq_done))::int";

static const char SQL_READY_QUEUE_FIRST[] =
    "SELECT min(queue) FROM onceq_items WHERE claim IS NULL";
static const char SQL_READY_QUEUE_NEXT[] =
    "SELECT min(queue) FROM onceq_items WHERE claim IS NULL AND queue > $1";
static const char SQL_DEAD_QUEUE_FIRST[] = "SELECT min(queue) FROM onceq_dead";
static const char SQL_DEAD_QUEUE_NEXT[] =
    "SELECT min(queue) FROM onceq_dead WHERE queue > $1";

/* Queues with controls (onceq_queues, onceq/queues.h): few rows, read
 * whole: paused (1/0), the concurrency limit (-1: none). Such a queue is
 * listed even with no items. */
static const char SQL_PAUSED[] =
    "SELECT queue, CASE WHEN paused THEN 1 ELSE 0 END, coalesce(max_running,"
    " -1), coalesce(rate_limit, -1), coalesce((extract(epoch FROM"
    " rate_interval) * 1000)::int8, -1) FROM onceq_queues"
    " WHERE paused OR max_running IS NOT NULL OR rate_limit IS NOT NULL"
    " ORDER BY queue LIMIT 1000";

/* Claimed items per queue, from the claim index (normally few rows), and
 * how many of them were created in the last 60 s. */
static const char SQL_RUNNING[] =
    "SELECT queue, count(*),"
    " sum(CASE WHEN created_at > now() - interval '60 seconds' THEN 1"
    " ELSE 0 END)::int8 FROM (SELECT queue, created_at FROM onceq_items"
    " WHERE claim IS NOT NULL LIMIT " CAP1 ") r GROUP BY queue";
/* onceq_done_done_at and onceq_dead_died_at ranges: settled in the last
 * 60 s, and of those the ones created in the window too. */
static const char SQL_DONE_60S[] =
    "SELECT queue, count(*),"
    " sum(CASE WHEN created_at > now() - interval '60 seconds' THEN 1"
    " ELSE 0 END)::int8 FROM (SELECT queue, created_at FROM onceq_done"
    " WHERE done_at > now() - interval '60 seconds' LIMIT " CAP1
    ") d GROUP BY queue";
static const char SQL_DIED_60S[] =
    "SELECT queue, count(*),"
    " sum(CASE WHEN created_at > now() - interval '60 seconds' THEN 1"
    " ELSE 0 END)::int8 FROM (SELECT queue, created_at FROM onceq_dead"
    " WHERE died_at > now() - interval '60 seconds' LIMIT " CAP1
    ") d GROUP BY queue";

/* Blocked keys per queue: the failed heads (key_head.h), the keys `onceq
 * keys --blocked` lists; 514,000 -> 2,014,000 buffer reads at 20,000 ->
 * 80,000 rows as an anti-join, about 180 this way. */
#define BLOCKED_FROM(head)                                                     \
  "SELECT queue, count(*) FROM (SELECT f.queue FROM onceq_items f"             \
  " WHERE " QV_FAILED_KEYED " AND " head " LIMIT " CAP1 ") b GROUP BY queue"
static const char SQL_BLOCKED_PG[] = BLOCKED_FROM(QV_FAILED_HEAD_PG);
static const char SQL_BLOCKED_CRDB[] = BLOCKED_FROM(QV_FAILED_HEAD_CRDB);

const char *qv_blocked_sql(oq_engine engine)
{
  return engine == OQ_ENGINE_COCKROACH ? SQL_BLOCKED_CRDB : SQL_BLOCKED_PG;
}

static const char SQL_TOP_PRIORITY[] =
    "SELECT max(priority) FROM onceq_items WHERE claim IS NULL AND queue = $1";
/* One (queue, priority): ready count, scheduled count, the oldest entry's
 * age, the next lower priority, and the ready ones that became runnable
 * in the last 60 s. $3/$4/$5: how many more to count. */
static const char SQL_PRIORITY[] =
    "SELECT"
    " (SELECT count(*) FROM (SELECT 1 FROM onceq_items WHERE claim IS NULL"
    "  AND queue = $1 AND priority = $2::int AND run_at <= now()"
    "  LIMIT $3::int) a),"
    " (SELECT count(*) FROM (SELECT 1 FROM onceq_items WHERE claim IS NULL"
    "  AND queue = $1 AND priority = $2::int AND run_at > now()"
    "  LIMIT $4::int) b),"
    " (SELECT extract(epoch FROM now() - min(run_at))::float8"
    "  FROM onceq_items WHERE claim IS NULL AND queue = $1"
    "  AND priority = $2::int),"
    " (SELECT max(priority) FROM onceq_items WHERE claim IS NULL"
    "  AND queue = $1 AND priority < $2::int),"
    " (SELECT count(*) FROM (SELECT 1 FROM onceq_items WHERE claim IS NULL"
    "  AND queue = $1 AND priority = $2::int AND run_at <= now()"
    "  AND run_at > now() - interval '60 seconds' LIMIT $5::int) c)";
static const char SQL_DEAD_COUNT[] =
    "SELECT count(*) FROM (SELECT 1 FROM onceq_dead WHERE queue = $1"
    " LIMIT " CAP1 ") d";

/* Claims per session use the claim index (claim = s.id implies the
 * partial index's claim IS NOT NULL). */
static const char SQL_SESSIONS[] =
    "SELECT s.id::text, s.hostname, s.pid, s.version, s.queues,"
    " extract(epoch FROM now() - s.heartbeated_at)::float8,"
    " extract(epoch FROM s.expiry)::float8,"
    " extract(epoch FROM now() - s.created_at)::float8,"
    " (SELECT count(*) FROM (SELECT 1 FROM onceq_items i WHERE i.claim = s.id"
    "  LIMIT " CAP1 ") c),"
    " (EXISTS (SELECT 1 FROM onceq_leases l WHERE l.session_id = s.id))::int"
    " FROM onceq_sessions s ORDER BY s.created_at, s.id LIMIT 200";

/* PostgreSQL's own cumulative per-table counters. */
static const char SQL_COUNTERS[] = "SELECT"
                                   " (SELECT n_tup_ins FROM pg_stat_user_tables"
                                   "  WHERE relid = 'onceq_items'::regclass),"
                                   " (SELECT n_tup_del FROM pg_stat_user_tables"
                                   "  WHERE relid = 'onceq_items'::regclass),"
                                   " (SELECT n_tup_ins FROM pg_stat_user_tables"
                                   "  WHERE relid = 'onceq_dead'::regclass)";

/* ---- the queue name set ------------------------------------------------ */

typedef struct names {
  char **v;
  int n, cap;
} names;

static int names_add(names *ns, const char *s)
{
  for (int i = 0; i < ns->n; i++)
    if (strcmp(ns->v[i], s) == 0)
      return 0;
  if (ns->n == ns->cap) {
    int ncap = ns->cap ? ns->cap * 2 : 16;
    char **nv = realloc(ns->v, (size_t)ncap * sizeof *nv);
    if (!nv)
      return -1;
    ns->v = nv;
    ns->cap = ncap;
  }
  ns->v[ns->n] = strdup(s);
  if (!ns->v[ns->n])
    return -1;
  ns->n++;
  return 0;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loose index scan: min(queue), then min(queue) > last, ... Stops after
 * limit names (the caller only shows QV_MAX_QUEUES). */
static oq_err scan_queues(oq_db *db, const char *first, const char *next,
                          names *ns, int limit)
{
  qv_rows r = {0};
  oq_err e = qv_query(db, first, 0, NULL, &r);
  for (int i = 0; e == OQ_OK && i < limit; i++) {
    const char *q = qv_rows_get(&r, 0, 0);
    if (!q)
      break;
    char *last = strdup(q);
    if (!last || names_add(ns, last) != 0) {
      free(last);
      e = OQ_ERR_NOMEM;
      break;
    }
    const char *p[1] = {last};
    qv_rows_free(&r);
    e = qv_query(db, next, 1, p, &r);
    free(last);
  }
  qv_rows_free(&r);
  return e;
}

/* Run a "queue, count" query and add its queues to ns. */
static oq_err grouped(oq_db *db, const char *sql, names *ns, qv_rows *out)
{
  oq_err e = qv_query(db, sql, 0, NULL, out);
  for (int i = 0; e == OQ_OK && i < out->nrows; i++) {
    const char *q = qv_rows_get(out, i, 0);
    if (q && names_add(ns, q) != 0)
      e = OQ_ERR_NOMEM;
  }
  return e;
}

/* Column col of queue's row in a "queue, count, ..." result. */
static long grouped_count(const qv_rows *r, const char *queue, int col,
                          long dflt)
{
  for (int i = 0; i < r->nrows; i++) {
    const char *q = qv_rows_get(r, i, 0);
    if (q && strcmp(q, queue) == 0)
      return cm_atol(qv_rows_get(r, i, col), dflt);
  }
  return dflt;
}

/* ---- per queue --------------------------------------------------------- */

static oq_err queue_detail(oq_db *db, qv_qstat *qs)
{
  qv_rows r = {0};
  const char *p1[1] = {qs->queue};
  qs->lag_s = -1;
  oq_err e = qv_query(db, SQL_TOP_PRIORITY, 1, p1, &r);
  char prio[24] = "";
  if (e == OQ_OK && qv_rows_get(&r, 0, 0))
    snprintf(prio, sizeof prio, "%s", qv_rows_get(&r, 0, 0));
  qv_rows_free(&r);
  for (int i = 0; e == OQ_OK && prio[0]; i++) {
    if (i == QV_MAX_PRIORITIES) {
      qs->approx = true;
      break;
    }
    char left_ready[24], left_sched[24], left_new[24];
    long lr = qs->ready > QV_COUNT_CAP ? 0 : QV_COUNT_CAP + 1 - qs->ready;
    long ls =
        qs->scheduled > QV_COUNT_CAP ? 0 : QV_COUNT_CAP + 1 - qs->scheduled;
    long ln = qs->new_live_60s > QV_COUNT_CAP
                  ? 0
                  : QV_COUNT_CAP + 1 - qs->new_live_60s;
    snprintf(left_ready, sizeof left_ready, "%ld", lr);
    snprintf(left_sched, sizeof left_sched, "%ld", ls);
    snprintf(left_new, sizeof left_new, "%ld", ln);
    const char *p[5] = {qs->queue, prio, left_ready, left_sched, left_new};
    e = qv_query(db, SQL_PRIORITY, 5, p, &r);
    if (e != OQ_OK)
      break;
    qs->ready += cm_atol(qv_rows_get(&r, 0, 0), 0);
    qs->scheduled += cm_atol(qv_rows_get(&r, 0, 1), 0);
    double age = cm_atof(qv_rows_get(&r, 0, 2), -1);
    if (age >= 0 && age > qs->lag_s)
      qs->lag_s = age;
    qs->new_live_60s += cm_atol(qv_rows_get(&r, 0, 4), 0);
    const char *lower = qv_rows_get(&r, 0, 3);
    if (lower)
      snprintf(prio, sizeof prio, "%s", lower);
    else
      prio[0] = '\0';
    qv_rows_free(&r);
  }
  if (e == OQ_OK) {
    e = qv_query(db, SQL_DEAD_COUNT, 1, p1, &r);
    if (e == OQ_OK)
      qs->dead = cm_atol(qv_rows_get(&r, 0, 0), 0);
    qv_rows_free(&r);
  }
  return e;
}

/* ---- sessions ---------------------------------------------------------- */

static char *dup_or_empty(const char *s)
{
  return strdup(s ? s : "");
}

static oq_err sessions(oq_db *db, qv_snapshot *out)
{
  qv_rows r = {0};
  oq_err e = qv_query(db, SQL_SESSIONS, 0, NULL, &r);
  if (e != OQ_OK || r.nrows == 0) {
    qv_rows_free(&r);
    return e;
  }
  out->s = calloc((size_t)r.nrows, sizeof *out->s);
  if (!out->s) {
    qv_rows_free(&r);
    return OQ_ERR_NOMEM;
  }
  for (int i = 0; i < r.nrows; i++) {
    qv_sstat *s = &out->s[out->ns++];
    s->id = dup_or_empty(qv_rows_get(&r, i, 0));
    s->hostname = dup_or_empty(qv_rows_get(&r, i, 1));
    s->pid = cm_atol(qv_rows_get(&r, i, 2), 0);
    s->version = dup_or_empty(qv_rows_get(&r, i, 3));
    s->queues = dup_or_empty(qv_rows_get(&r, i, 4));
    s->heartbeat_age_s = cm_atof(qv_rows_get(&r, i, 5), 0);
    s->expiry_s = cm_atof(qv_rows_get(&r, i, 6), 0);
    s->age_s = cm_atof(qv_rows_get(&r, i, 7), 0);
    s->claims = cm_atol(qv_rows_get(&r, i, 8), 0);
    s->leader = cm_atol(qv_rows_get(&r, i, 9), 0) != 0;
    s->coordinator = strncmp(s->version, QV_COORDINATOR_VERSION_PREFIX,
                             strlen(QV_COORDINATOR_VERSION_PREFIX)) == 0 ||
                     s->leader;
    if (!s->id || !s->hostname || !s->version || !s->queues)
      e = OQ_ERR_NOMEM;
  }
  qv_rows_free(&r);
  return e;
}

/* ---- the snapshot ------------------------------------------------------ */

oq_err qv_snapshot_take(oq_db *db, bool with_sessions, qv_snapshot *out)
{
  memset(out, 0, sizeof *out);
  names ns = {0};
  qv_rows running = {0}, done = {0}, died = {0}, paused = {0}, r = {0},
          blocked = {0};
  out->mono_ms = oq_monotonic_ms();
  oq_err e = qv_query(db, SQL_NOW, 0, NULL, &r);
  if (e == OQ_OK) {
    out->now_s = cm_atof(qv_rows_get(&r, 0, 0), 0);
    out->history = cm_atol(qv_rows_get(&r, 0, 1), 0) != 0;
  }
  qv_rows_free(&r);
  if (e == OQ_OK)
    e = scan_queues(db, SQL_READY_QUEUE_FIRST, SQL_READY_QUEUE_NEXT, &ns,
                    10 * QV_MAX_QUEUES);
  if (e == OQ_OK)
    e = scan_queues(db, SQL_DEAD_QUEUE_FIRST, SQL_DEAD_QUEUE_NEXT, &ns,
                    10 * QV_MAX_QUEUES);
  if (e == OQ_OK)
    e = grouped(db, SQL_PAUSED, &ns, &paused);
  if (e == OQ_OK)
    e = grouped(db, SQL_RUNNING, &ns, &running);
  if (e == OQ_OK)
    e = grouped(db, SQL_DIED_60S, &ns, &died);
  if (e == OQ_OK && out->history)
    e = grouped(db, SQL_DONE_60S, &ns, &done);
  if (e == OQ_OK) /* its queues have unclaimed items: already named */
    e = grouped(db, qv_blocked_sql(oq_db_engine(db)), &ns, &blocked);
  if (e != OQ_OK)
    goto out;

  /* no queues: ns.v is NULL, which qsort may not be given (UBSan) */
  if (ns.n > 1)
    qsort(ns.v, (size_t)ns.n, sizeof *ns.v, cmp_str);
  int show = ns.n < QV_MAX_QUEUES ? ns.n : QV_MAX_QUEUES;
  out->more_queues = ns.n - show;
  if (show > 0) {
    out->q = calloc((size_t)show, sizeof *out->q);
    if (!out->q) {
      e = OQ_ERR_NOMEM;
      goto out;
    }
  }
  long running_total = 0;
  for (int i = 0; i < running.nrows; i++)
    running_total += cm_atol(qv_rows_get(&running, i, 1), 0);
  for (int i = 0; i < show && e == OQ_OK; i++) {
    qv_qstat *qs = &out->q[out->nq++];
    qs->queue = ns.v[i];
    ns.v[i] = NULL; /* moved */
    qs->running = grouped_count(&running, qs->queue, 1, 0);
    qs->new_live_60s = grouped_count(&running, qs->queue, 2, 0);
    if (running_total > QV_COUNT_CAP)
      qs->approx = true; /* the claim scan stopped at the cap */
    qs->done_60s = out->history ? grouped_count(&done, qs->queue, 1, 0) : -1;
    qs->new_done_60s =
        out->history ? grouped_count(&done, qs->queue, 2, 0) : -1;
    qs->paused = grouped_count(&paused, qs->queue, 1, 0) != 0;
    qs->max_running = grouped_count(&paused, qs->queue, 2, -1);
    qs->rate_limit = grouped_count(&paused, qs->queue, 3, -1);
    qs->rate_interval_ms = grouped_count(&paused, qs->queue, 4, -1);
    qs->blocked = grouped_count(&blocked, qs->queue, 1, 0);
    qs->died_60s = grouped_count(&died, qs->queue, 1, 0);
    qs->new_died_60s = grouped_count(&died, qs->queue, 2, 0);
    e = queue_detail(db, qs);
  }
  if (e == OQ_OK && with_sessions)
    e = sessions(db, out);
  if (e == OQ_OK && oq_db_traits(db)->stat_views) {
    /* best effort: a role without access to the statistics views just
     * gets no table-wide rates */
    if (qv_query(db, SQL_COUNTERS, 0, NULL, &r) == OQ_OK &&
        qv_rows_get(&r, 0, 0)) {
      out->counters = true;
      out->items_ins = cm_atol(qv_rows_get(&r, 0, 0), 0);
      out->items_del = cm_atol(qv_rows_get(&r, 0, 1), 0);
      out->dead_ins = cm_atol(qv_rows_get(&r, 0, 2), 0);
    }
    qv_rows_free(&r);
  }
out:
  for (int i = 0; i < ns.n; i++)
    free(ns.v[i]);
  free(ns.v);
  qv_rows_free(&running);
  qv_rows_free(&done);
  qv_rows_free(&died);
  qv_rows_free(&paused);
  qv_rows_free(&blocked);
  if (e != OQ_OK)
    qv_snapshot_free(out);
  return e;
}

void qv_snapshot_free(qv_snapshot *s)
{
  if (!s)
    return;
  for (int i = 0; i < s->nq; i++)
    free(s->q[i].queue);
  free(s->q);
  for (int i = 0; i < s->ns; i++) {
    free(s->s[i].id);
    free(s->s[i].hostname);
    free(s->s[i].version);
    free(s->s[i].queues);
  }
  free(s->s);
  memset(s, 0, sizeof *s);
}

const qv_qstat *qv_snapshot_queue(const qv_snapshot *s, const char *q)
{
  for (int i = 0; s && i < s->nq; i++)
    if (strcmp(s->q[i].queue, q) == 0)
      return &s->q[i];
  return NULL;
}
