/*
 * reaper.c: deletes expired sessions and releases their claims in the same
 * transaction (schema v8: no foreign key does it; dialect.c,
 * SESSION_LIVE), and dead-letters items abandoned on their last attempt.
 * See reaper.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "waiter.h"

/* One "delete sessions, then release their items" transaction (the reap,
 * oq_session_end). Its body may run more than once (restarts), so the ids
 * are collected again each time and logged only after the commit. */
typedef struct sessions_tx {
  const char *del_sql; /* DELETE FROM onceq_sessions ... RETURNING id::text */
  int nparams;
  const char *const *params;
  char (*ids)[OQ_UUID_LEN + 1]; /* the rows the DELETE returned */
  size_t n;
  size_t cap;
  long released; /* items released */
} sessions_tx;

static oq_err collect_id(void *ud, int ncols, const char *const *vals)
{
  sessions_tx *t = ud;
  if (ncols < 1 || !vals[0])
    return OQ_OK;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    void *grown = realloc(t->ids, cap * sizeof *t->ids);
    if (!grown)
      return OQ_ERR_NOMEM;
    t->ids = grown;
    t->cap = cap;
  }
  snprintf(t->ids[t->n], sizeof t->ids[t->n], "%s", vals[0]);
  t->n++;
  return OQ_OK;
}

/* The DELETE first: it waits for every claim that locked one of these rows
 * (FOR KEY SHARE) to commit. The release then runs as a statement of its
 * own, whose snapshot (READ COMMITTED) is taken after that wait and so sees
 * those claims' items; a claim that comes after the DELETE waits for our
 * commit and finds the row gone (dialect.c, SESSION_LIVE). */
static oq_err sessions_body(oq_db *db, void *ud)
{
  sessions_tx *t = ud;
  t->n = 0;
  t->released = 0;
  oq_err e = oq_db_query(db, t->del_sql, t->nparams, t->params, collect_id, t);
  if (e != OQ_OK || t->n == 0)
    return e;
  const char **ids = malloc(t->n * sizeof *ids);
  if (!ids)
    return OQ_ERR_NOMEM;
  for (size_t i = 0; i < t->n; i++)
    ids[i] = t->ids[i];
  char *arr = oq__text_array(ids, t->n);
  free(ids);
  if (!arr)
    return OQ_ERR_NOMEM;
  const char *p[1] = {arr};
  e = oq_db_exec(db, oq__sql(oq_db_engine(db), OQ__SQL_RELEASE_SESSIONS), 1, p,
                 &t->released);
  free(arr);
  return e;
}

oq_err oq__sessions_delete(oq_db *db, const char *del_sql, int nparams,
                           const char *const *params, int *deleted,
                           long *released, char (**ids)[OQ_UUID_LEN + 1])
{
  sessions_tx t = {del_sql, nparams, params, NULL, 0, 0, 0};
  oq_err e = oq_db_transact(db, sessions_body, &t);
  if (deleted)
    *deleted = e == OQ_OK ? (int)t.n : 0;
  if (released)
    *released = e == OQ_OK ? t.released : 0;
  if (ids && e == OQ_OK)
    *ids = t.ids;
  else
    free(t.ids);
  return e;
}

oq_err oq_reap(oq_db *db, int *sessions, int *dead)
{
  int ns = 0;
  long nd = 0, nrel = 0, norphan = 0;
  char(*ids)[OQ_UUID_LEN + 1] = NULL;
  oq_engine eng = oq_db_engine(db);
  oq_err e = oq__sessions_delete(db, oq__sql(eng, OQ__SQL_REAP_SESSIONS), 0,
                                 NULL, &ns, &nrel, &ids);
  for (int i = 0; e == OQ_OK && i < ns; i++)
    OQ_LOG(OQ_LOG_INFO, ids[i], NULL,
           "session reaped: heartbeat older than its expiry");
  free(ids);
  if (e == OQ_OK && nrel > 0)
    OQ_LOG(OQ_LOG_INFO, NULL, NULL, "%ld item(s) of reaped sessions released",
           nrel);
  if (e == OQ_OK)
    e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_RELEASE_ORPHANS), 0, NULL,
                           NULL, NULL, &norphan);
  if (e == OQ_OK && norphan > 0)
    OQ_LOG(OQ_LOG_WARN, NULL, NULL,
           "%ld item(s) claimed by sessions deleted without a release "
           "(by hand?) released",
           norphan);
  if (e == OQ_OK)
    e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_REAP_EXHAUSTED), 0, NULL,
                           NULL, NULL, &nd);
  if (e == OQ_OK && nd > 0)
    OQ_LOG(OQ_LOG_WARN, NULL, NULL,
           "%ld abandoned item(s) out of attempts moved to onceq_dead", nd);
  if (sessions)
    *sessions = ns;
  if (dead)
    *dead = (int)nd;
  return e;
}

struct oq_reaper {
  pthread_t thread;
  oq__waiter waiter;
  oq_db *db;       /* owned by the thread */
  int interval_ms; /* mean period; each wait is +/- 25% */
};

static void *run(void *arg)
{
  oq_reaper *r = arg;
  uint64_t rng = oq__seed();
  bool offline = false;
  for (;;) {
    int spread = r->interval_ms / 2;
    int wait =
        r->interval_ms - spread / 2 +
        (spread > 0 ? (int)(oq__xorshift64(&rng) % (uint64_t)spread) : 0);
    if (oq__waiter_wait_ms(&r->waiter, wait))
      break;
    if (offline && oq_db_reconnect(r->db) != OQ_OK)
      continue;
    offline = false;
    if (oq_reap(r->db, NULL, NULL) != OQ_OK && !oq_db_connected(r->db))
      offline = true;
  }
  return NULL;
}

oq_err oq_reaper_start(const oq_db_opts *dbo, int interval_ms, oq_reaper **out,
                       char *errbuf, size_t errlen)
{
  *out = NULL;
  if (interval_ms <= 0) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "reaper interval must be positive");
    return OQ_ERR_CONFIG;
  }
  oq_reaper *r = calloc(1, sizeof *r);
  if (!r) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "out of memory");
    return OQ_ERR_NOMEM;
  }
  r->interval_ms = interval_ms;
  oq_db_opts o = dbo ? *dbo : (oq_db_opts){0};
  if (!o.application_name)
    o.application_name = "onceq-reaper";
  oq_err e = oq_db_open(&o, &r->db, errbuf, errlen);
  if (e != OQ_OK) {
    free(r);
    return e;
  }
  if (oq__waiter_init(&r->waiter) != 0 ||
      pthread_create(&r->thread, NULL, run, r) != 0) {
    oq_db_close(r->db);
    free(r);
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "cannot start reaper thread");
    return OQ_ERR_NOMEM;
  }
  *out = r;
  return OQ_OK;
}

void oq_reaper_stop(oq_reaper *r)
{
  if (!r)
    return;
  oq__waiter_stop(&r->waiter);
  pthread_join(r->thread, NULL);
  oq__waiter_destroy(&r->waiter);
  oq_db_close(r->db);
  free(r);
}
