/*
 * session.c: a worker's row in onceq_sessions and its liveness state
 * machine (session.h):
 *
 *   LIVE --heartbeat overdue on our clock--> FENCED --heartbeat lands--> LIVE
 *   LIVE/FENCED --heartbeat finds no row--> LOST (terminal)
 *
 * The state and last-ok time are atomics: the heartbeat thread writes them,
 * any thread reads them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct oq_session {
  char id[OQ_UUID_LEN + 1];
  int interval_ms;             /* heartbeat period */
  int expiry_ms;               /* stored on the row */
  _Atomic int state;           /* oq_session_state */
  _Atomic uint64_t last_ok_ms; /* monotonic send time of last good beat */
};

static void apply_defaults(const oq_session_opts *in, int *interval,
                           int *expiry)
{
  *interval =
      in && in->heartbeat_interval_ms ? in->heartbeat_interval_ms : 1000;
  *expiry = in && in->expiry_ms ? in->expiry_ms : 5000;
}

oq_err oq_session_validate(const oq_session_opts *opts, char *errbuf,
                           size_t errlen)
{
  int interval, expiry;
  apply_defaults(opts, &interval, &expiry);
  const char *msg = NULL;
  char buf[OQ_ERRBUF_SIZE];
  if (interval <= 0 || expiry <= 0) {
    snprintf(buf, sizeof buf,
             "heartbeat interval (%d ms) and session expiry (%d ms) must be "
             "positive; fix --heartbeat-interval / --session-expiry",
             interval, expiry);
    msg = buf;
  } else if ((long long)expiry < 3LL * interval + 1000) {
    snprintf(buf, sizeof buf,
             "session expiry %d ms is too short for heartbeat interval %d "
             "ms: expiry must be >= 3 x interval + 1000 ms (%lld ms); raise "
             "--session-expiry or lower --heartbeat-interval",
             expiry, interval, 3LL * interval + 1000);
    msg = buf;
  }
  if (!msg)
    return OQ_OK;
  if (errbuf && errlen)
    snprintf(errbuf, errlen, "%s", msg);
  return OQ_ERR_CONFIG;
}

static oq_err read_id(void *ud, int ncols, const char *const *vals)
{
  char *id = ud;
  if (ncols < 1 || !vals[0])
    return OQ_ERR_SQL;
  snprintf(id, OQ_UUID_LEN + 1, "%s", vals[0]);
  return OQ_OK;
}

oq_err oq_session_open(oq_db *db, const oq_session_opts *opts, oq_session **out)
{
  *out = NULL;
  char err[OQ_ERRBUF_SIZE];
  if (oq_session_validate(opts, err, sizeof err) != OQ_OK)
    return oq__db_fail(db, OQ_ERR_CONFIG, NULL, "%s", err);
  oq_err e = oq_migrate_check(db);
  if (e != OQ_OK)
    return e;
  oq_session *s = calloc(1, sizeof *s);
  if (!s)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  apply_defaults(opts, &s->interval_ms, &s->expiry_ms);
  char expiry[24], pid[24], host[256] = "";
  snprintf(expiry, sizeof expiry, "%d", s->expiry_ms);
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  gethostname(host, sizeof host - 1);
  const char *params[5] = {expiry, host, pid,
                           opts && opts->version ? opts->version : oq_version(),
                           opts && opts->queues ? opts->queues : ""};
  uint64_t sent = oq_monotonic_ms();
  e = oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_SESSION_OPEN), 5,
                         params, read_id, s->id, NULL);
  if (e != OQ_OK || !s->id[0]) {
    free(s);
    return e != OQ_OK ? e
                      : oq__db_fail(db, OQ_ERR_SQL, NULL,
                                    "session insert returned no id");
  }
  atomic_store(&s->state, OQ_SESSION_LIVE);
  atomic_store(&s->last_ok_ms, sent);
  OQ_LOG(OQ_LOG_INFO, s->id, NULL,
         "session registered (heartbeat %d ms, expiry %d ms)", s->interval_ms,
         s->expiry_ms);
  *out = s;
  return OQ_OK;
}

oq_err oq_session_end(oq_db *db, oq_session *s)
{
  const char *params[1] = {s->id};
  oq_err e =
      oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_SESSION_END), 1,
                         params, NULL, NULL, NULL);
  if (e == OQ_OK) {
    oq_session_mark(s, OQ_SESSION_LOST);
    OQ_LOG(OQ_LOG_INFO, s->id, NULL, "session ended; claims released");
  }
  return e;
}

void oq_session_free(oq_session *s)
{
  free(s);
}

const char *oq_session_id(const oq_session *s)
{
  return s->id;
}

int oq_session_expiry_ms(const oq_session *s)
{
  return s->expiry_ms;
}

int oq_session_interval_ms(const oq_session *s)
{
  return s->interval_ms;
}

oq_session_state oq_session_state_get(const oq_session *s)
{
  return (oq_session_state)atomic_load(&((oq_session *)s)->state);
}

uint64_t oq_session_last_ok_ms(const oq_session *s)
{
  return atomic_load(&((oq_session *)s)->last_ok_ms);
}

void oq_session_mark(oq_session *s, oq_session_state st)
{
  int cur = atomic_load(&s->state);
  while (cur != OQ_SESSION_LOST &&
         !atomic_compare_exchange_weak(&s->state, &cur, (int)st)) {
  }
}

void oq_session_mark_ok(oq_session *s, uint64_t sent_ms)
{
  uint64_t prev = atomic_load(&s->last_ok_ms);
  while (sent_ms > prev &&
         !atomic_compare_exchange_weak(&s->last_ok_ms, &prev, sent_ms)) {
  }
  int cur = OQ_SESSION_FENCED;
  atomic_compare_exchange_strong(&s->state, &cur, OQ_SESSION_LIVE);
}

oq_session_state oq_session_check_fence(oq_session *s, uint64_t now_ms)
{
  uint64_t last = atomic_load(&s->last_ok_ms);
  int limit = s->expiry_ms - OQ_FENCE_MARGIN_MS;
  if (now_ms > last && now_ms - last > (uint64_t)(limit > 0 ? limit : 0)) {
    int cur = OQ_SESSION_LIVE;
    atomic_compare_exchange_strong(&s->state, &cur, OQ_SESSION_FENCED);
  }
  return oq_session_state_get(s);
}

oq_err oq__session_usable(oq_db *db, const oq_session *s)
{
  switch (oq_session_state_get(s)) {
  case OQ_SESSION_LOST:
    return oq__db_fail(db, OQ_ERR_SESSION_LOST, NULL,
                       "session %s is lost; open a new session",
                       oq_session_id(s));
  case OQ_SESSION_FENCED:
    return oq__db_fail(db, OQ_ERR_SESSION_LOST, NULL,
                       "session %s is fenced (heartbeat overdue); not "
                       "claiming until a heartbeat lands",
                       oq_session_id(s));
  case OQ_SESSION_LIVE:
    break;
  }
  return OQ_OK;
}
