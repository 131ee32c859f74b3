/*
 * heartbeat.c: the heartbeat thread (heartbeat.h). Its loop is a small
 * state machine stepped once per wake-up (at most every 100 ms, so fencing
 * is noticed promptly and stop() is quick):
 *
 *   BEATING   - connected; beats every interval
 *   OFFLINE   - no connection (lost, or the first not made yet); connects
 *               on each beat time (the first attempt at once)
 *   DONE      - the session is lost; the thread only waits for stop()
 *
 * The thread does not decide fencing: the session's state is computed from
 * the clock whenever anyone reads it (session.c), so a beat stuck on a dead
 * network cannot hold a fence off. The thread only reports the state
 * changes it observes through the callback.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_hooks.h"
#include "waiter.h"

typedef enum hb_state {
  HB_BEATING, /* connection up */
  HB_OFFLINE, /* connection down: retry at the next beat */
  HB_DONE     /* session lost: nothing more to do */
} hb_state;

struct oq_heartbeat {
  pthread_t thread;
  oq__waiter waiter;
  oq_db *db; /* owned by the thread while it runs; NULL until it connects */
  oq_db_opts dbo; /* to connect with: the strings below are copies */
  char *conninfo;
  char *application_name;
  oq_retry_policy retry;
  bool connect_warned; /* thread only */
  oq_session *session;
  oq_session_event_fn cb;
  void *ud;
  oq_session_state seen;  /* the last state reported (thread only) */
  _Atomic bool paused;    /* fault injection: send nothing */
  _Atomic uint64_t beats; /* heartbeats that landed */
};

/* Report a state change since the last report (thread only). */
static void notify(oq_heartbeat *hb)
{
  oq_session_state now = oq_session_state_get(hb->session);
  if (now != hb->seen) {
    hb->seen = now;
    if (hb->cb)
      hb->cb(hb->ud, hb->session, now);
  }
}

/*
 * A heartbeat is one UPDATE by primary key: it needs no serializable
 * snapshot, and under SERIALIZABLE it can be picked as the victim of other
 * transactions' conflicts (claims read the session row for the FK), which
 * would delay beats into fencing. So on PostgreSQL the heartbeat connection
 * runs READ COMMITTED whatever the database default is. (CockroachDB keeps
 * its default; its single-statement retries are server-side.)
 */
static void read_committed(oq_db *db)
{
  if (!oq_db_traits(db)->session_settings)
    return;
  oq_err e = oq_db_exec(db,
                        "SET SESSION CHARACTERISTICS AS TRANSACTION "
                        "ISOLATION LEVEL READ COMMITTED",
                        0, NULL, NULL);
  (void)e; /* best effort: the default works too, just slower */
}

/*
 * The heartbeat's own connection, made on its thread: the caller's start
 * does not wait for it (one connection, 15 to 30 ms on a busy server,
 * fewer before the first claim). A failure is a lost connection like any
 * other: retried at each beat time, and the session fences itself by its
 * clock if no beat lands (session.h).
 */
static bool connect_first(oq_heartbeat *hb)
{
  char err[OQ_ERRBUF_SIZE];
  if (oq_db_open(&hb->dbo, &hb->db, err, sizeof err) == OQ_OK)
    return true;
  hb->db = NULL;
  if (!hb->connect_warned) /* once, like a lost connection */
    OQ_LOG(OQ_LOG_WARN, oq_session_id(hb->session), NULL,
           "heartbeat connection failed: %s (retrying at each beat)", err);
  hb->connect_warned = true;
  return false;
}

/* One beat. Returns the next loop state. */
static hb_state beat(oq_heartbeat *hb, hb_state st)
{
  const char *sid = oq_session_id(hb->session);
  if (st == HB_OFFLINE) {
    if (!hb->db ? !connect_first(hb) : oq_db_reconnect(hb->db) != OQ_OK)
      return HB_OFFLINE;
    read_committed(hb->db);
    OQ_LOG(OQ_LOG_INFO, sid, NULL, "heartbeat %s",
           hb->beats ? "reconnected" : "connected");
  }
  const char *params[1] = {sid};
  long n = -1;
  uint64_t sent = oq_monotonic_ms();
  oq_err e = oq__db_query_retry(
      hb->db, oq__sql(oq_db_engine(hb->db), OQ__SQL_HEARTBEAT), 1, params, NULL,
      NULL, &n);
  if (e != OQ_OK) {
    if (!oq_db_connected(hb->db)) {
      if (st == HB_BEATING)
        OQ_LOG(OQ_LOG_WARN, sid, NULL, "heartbeat connection lost: %s",
               oq_db_errmsg(hb->db));
      return HB_OFFLINE;
    }
    OQ_LOG(OQ_LOG_WARN, sid, NULL, "heartbeat failed: %s",
           oq_db_errmsg(hb->db));
    return HB_BEATING;
  }
  if (n == 0) {
    oq__session_mark_lost(hb->session);
    OQ_LOG(OQ_LOG_WARN, sid, NULL,
           "session lost: its row is gone or expired (the heartbeat never "
           "revives an expired session); its claims are released by the "
           "reap");
    notify(hb);
    return HB_DONE;
  }
  atomic_fetch_add(&hb->beats, 1);
  oq__session_mark_ok(hb->session, sent);
  notify(hb);
  return oq_session_state_get(hb->session) == OQ_SESSION_LOST ? HB_DONE
                                                              : HB_BEATING;
}

static void *run(void *arg)
{
  oq_heartbeat *hb = arg;
  hb_state st = HB_OFFLINE;
  if (connect_first(hb)) {
    read_committed(hb->db);
    st = HB_BEATING;
  }
  int interval = oq_session_interval_ms(hb->session);
  uint64_t next = oq_monotonic_ms() + (uint64_t)interval;
  for (;;) {
    uint64_t now = oq_monotonic_ms();
    notify(hb);
    if (st != HB_DONE && oq_session_state_get(hb->session) == OQ_SESSION_LOST)
      st = HB_DONE; /* expired on our clock: nothing can revive it */
    if (st != HB_DONE && now >= next) {
      next = now + (uint64_t)interval;
      if (!atomic_load(&hb->paused))
        st = beat(hb, st);
    }
    int wait = (int)(next > now ? next - now : 0);
    if (wait > 100)
      wait = 100;
    if (oq__waiter_wait_ms(&hb->waiter, wait > 0 ? wait : 1))
      break;
  }
  return NULL;
}

oq_err oq_heartbeat_start(const oq_db_opts *dbo, oq_session *s,
                          oq_session_event_fn cb, void *ud, oq_heartbeat **out,
                          char *errbuf, size_t errlen)
{
  *out = NULL;
  oq_heartbeat *hb = calloc(1, sizeof *hb);
  if (!hb) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "out of memory");
    return OQ_ERR_NOMEM;
  }
  hb->dbo = dbo ? *dbo : (oq_db_opts){0};
  hb->conninfo = hb->dbo.conninfo ? strdup(hb->dbo.conninfo) : NULL;
  hb->application_name = strdup(
      hb->dbo.application_name ? hb->dbo.application_name : "onceq-heartbeat");
  if ((hb->dbo.conninfo && !hb->conninfo) || !hb->application_name) {
    free(hb->conninfo);
    free(hb->application_name);
    free(hb);
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "out of memory");
    return OQ_ERR_NOMEM;
  }
  hb->dbo.conninfo = hb->conninfo;
  hb->dbo.application_name = hb->application_name;
  if (hb->dbo.retry) {
    hb->retry = *hb->dbo.retry;
    hb->dbo.retry = &hb->retry;
  }
  hb->session = s;
  hb->seen = oq_session_state_get(s);
  hb->cb = cb;
  hb->ud = ud;
  if (oq__waiter_init(&hb->waiter) != 0) {
    free(hb->conninfo);
    free(hb->application_name);
    free(hb);
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "cannot create heartbeat condition variable");
    return OQ_ERR_NOMEM;
  }
  if (pthread_create(&hb->thread, NULL, run, hb) != 0) {
    oq__waiter_destroy(&hb->waiter);
    free(hb->conninfo);
    free(hb->application_name);
    free(hb);
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "cannot start heartbeat thread");
    return OQ_ERR_NOMEM;
  }
  *out = hb;
  return OQ_OK;
}

void oq_heartbeat_stop(oq_heartbeat *hb)
{
  if (!hb)
    return;
  oq__waiter_stop(&hb->waiter);
  pthread_join(hb->thread, NULL);
  oq__waiter_destroy(&hb->waiter);
  oq_db_close(hb->db);
  free(hb->conninfo);
  free(hb->application_name);
  free(hb);
}

void oq__heartbeat_pause(oq_heartbeat *hb, bool paused)
{
  atomic_store(&hb->paused, paused);
}

uint64_t oq_heartbeat_count(const oq_heartbeat *hb)
{
  return atomic_load(&((oq_heartbeat *)hb)->beats);
}
