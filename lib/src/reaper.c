/*
 * reaper.c: deletes expired sessions (releasing their claims through the
 * FK's ON DELETE SET NULL) and dead-letters items abandoned on their last
 * attempt. See reaper.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "waiter.h"

static oq_err count_row(void *ud, int ncols, const char *const *vals)
{
  int *n = ud;
  (*n)++;
  if (ncols > 0 && vals[0])
    OQ_LOG(OQ_LOG_INFO, vals[0], NULL,
           "session reaped: heartbeat older than its expiry");
  return OQ_OK;
}

oq_err oq_reap(oq_db *db, int *sessions, int *dead)
{
  int ns = 0;
  long nd = 0;
  oq_err e =
      oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_REAP_SESSIONS),
                         0, NULL, count_row, &ns, NULL);
  if (e == OQ_OK)
    e = oq__db_query_retry(db,
                           oq__sql(oq_db_engine(db), OQ__SQL_REAP_EXHAUSTED), 0,
                           NULL, NULL, NULL, &nd);
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
