/*
 * session.c: a worker's row in onceq_sessions and its liveness state
 * machine (session.h; docs in README "Session lifecycle"):
 *
 *   LIVE   --last landed beat older than expiry - margin--> FENCED
 *   FENCED --a beat lands (sent before the expiry)------> LIVE
 *   LIVE/FENCED --last landed beat older than expiry, or
 *                the heartbeat finds no live row---------> LOST (terminal)
 *
 * The clock part is evaluated on every read, so the state never depends on
 * a thread that might be blocked. Only LOST is stored (it is final); LIVE
 * versus FENCED is derived from last_ok_ms each time.
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
  int margin_ms;               /* fence this long before the expiry */
  _Atomic bool lost;           /* final: the row is gone or expired */
  _Atomic uint64_t last_ok_ms; /* monotonic send time of last good beat */
};

static void apply_defaults(const oq_session_opts *in, int *interval,
                           int *expiry, int *margin)
{
  *interval =
      in && in->heartbeat_interval_ms ? in->heartbeat_interval_ms : 1000;
  *expiry = in && in->expiry_ms ? in->expiry_ms : 5000;
  *margin =
      in && in->fence_margin_ms ? in->fence_margin_ms : OQ_FENCE_MARGIN_MS;
}

oq_err oq_session_validate(const oq_session_opts *opts, char *errbuf,
                           size_t errlen)
{
  int interval, expiry, margin;
  apply_defaults(opts, &interval, &expiry, &margin);
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
  } else if (margin < 0 || (long long)expiry - margin < 2LL * interval) {
    snprintf(buf, sizeof buf,
             "fence margin %d ms leaves less than two heartbeat intervals "
             "(%d ms) before the fence of a %d ms session expiry; raise "
             "the session expiry or lower the fence margin or the "
             "heartbeat interval",
             margin, 2 * interval, expiry);
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
  apply_defaults(opts, &s->interval_ms, &s->expiry_ms, &s->margin_ms);
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
  atomic_store(&s->lost, false);
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
  /* the row and, in the same transaction, its claims (reaper.c) */
  oq_err e =
      oq__sessions_delete(db, oq__sql(oq_db_engine(db), OQ__SQL_SESSION_END), 1,
                          params, NULL, NULL, NULL);
  if (e == OQ_OK) {
    oq__session_mark_lost(s);
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

int oq_session_fence_margin_ms(const oq_session *s)
{
  return s->margin_ms;
}

uint64_t oq_session_last_ok_ms(const oq_session *s)
{
  return atomic_load(&((oq_session *)s)->last_ok_ms);
}

uint64_t oq_session_fence_at_ms(const oq_session *s)
{
  int d = s->expiry_ms - s->margin_ms;
  return oq_session_last_ok_ms(s) + (uint64_t)(d > 0 ? d : 0);
}

uint64_t oq_session_expires_at_ms(const oq_session *s)
{
  return oq_session_last_ok_ms(s) + (uint64_t)s->expiry_ms;
}

oq_session_state oq__session_state_at(const oq_session *s, uint64_t now_ms)
{
  oq_session *m = (oq_session *)s;
  if (atomic_load(&m->lost))
    return OQ_SESSION_LOST;
  if (now_ms >= oq_session_expires_at_ms(s)) {
    /* The database may reap the row now, and the heartbeat would refuse
     * to revive it: treat it as gone (claims are released by the reap). */
    atomic_store(&m->lost, true);
    return OQ_SESSION_LOST;
  }
  return now_ms >= oq_session_fence_at_ms(s) ? OQ_SESSION_FENCED
                                             : OQ_SESSION_LIVE;
}

oq_session_state oq_session_state_get(const oq_session *s)
{
  return oq__session_state_at(s, oq_monotonic_ms());
}

void oq__session_mark_lost(const oq_session *s)
{
  atomic_store(&((oq_session *)s)->lost, true);
}

void oq__session_mark_ok(oq_session *s, uint64_t sent_ms)
{
  /* a beat sent after the expiry must not revive the session: its UPDATE
   * only matches a row that had not expired, but our clock decides first */
  if (oq__session_state_at(s, sent_ms) == OQ_SESSION_LOST)
    return;
  uint64_t prev = atomic_load(&s->last_ok_ms);
  while (sent_ms > prev &&
         !atomic_compare_exchange_weak(&s->last_ok_ms, &prev, sent_ms)) {
  }
}

oq_err oq__session_usable(oq_db *db, const oq_session *s)
{
  switch (oq_session_state_get(s)) {
  case OQ_SESSION_LOST:
    return oq__db_fail(db, OQ_ERR_SESSION_LOST, NULL,
                       "session %s is lost; open a new session",
                       oq_session_id(s));
  case OQ_SESSION_FENCED:
    return oq__db_fail(db, OQ_ERR_FENCED, NULL,
                       "session %s is fenced (heartbeat overdue); not "
                       "claiming until a heartbeat lands",
                       oq_session_id(s));
  case OQ_SESSION_LIVE:
    break;
  }
  return OQ_OK;
}
