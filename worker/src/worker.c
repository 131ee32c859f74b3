/*
 * worker.c: the worker runtime (worker.h): set-up and tear-down of the
 * threads, and the claim loop, which runs on the calling thread.
 *
 * The claim loop is a state machine stepped once per turn; no turn waits
 * longer than about 250 ms (or one statement's deadline, which is shorter
 * than the fence), so signals and session changes are seen promptly. Every
 * turn, in every state, also reads what the LISTEN connection holds
 * (drain_listener), so a busy worker never holds PostgreSQL's NOTIFY queue.
 *
 *   state      what it does                    leaves for
 *   RUNNING    sweeps when one is due, claims  DB_DOWN   a claim/sweep failed
 *              into free slots, waits for          on the connection (an
 *              NOTIFY / poll / a free slot          ambiguous claim: sweep;
 *                                                  a claim out of memory
 *                                                  sweeps and stays)
 *                                              FENCED    session fenced
 *                                              REJOINING session lost
 *                                              DONE      --drain, nothing left
 *   DB_DOWN    reconnects with backoff         RUNNING   reconnected (sweep)
 *                                              REJOINING session lost
 *   FENCED     starts nothing (executors stop  RUNNING   a beat landed (sweep)
 *              children and release jobs)      REJOINING session lost
 *   REJOINING  waits for the lost session's    RUNNING   a new session is
 *              jobs to stop, stops its             registered
 *              heartbeat, deletes its row
 *              (releasing its claims), frees it
 *   DRAINING   no claims; in-flight work ends  DONE      nothing in flight
 *              or is stopped at the timeout
 *   DONE       leave the loop
 *
 * Any state but DONE goes to DRAINING on the first signal; a second signal
 * stops children now (hard stop).
 *
 * The only decision about who may acknowledge is made by the database:
 * oq_ack / oq_ack_batch check claim = session. This file decides what to
 * claim, when, and when to look for claims nobody holds (reconcile.h).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acker.h"
#include "executor.h"
#include "flags.h"
#include "handler.h"
#include "lazylib.h"
#include "onceq/onceq.h"
#include "reconcile.h"
#include "runtime.h"
#include "say.h"
#include "worker.h"

typedef enum loop_state {
  RUNNING,   /* claiming */
  DB_DOWN,   /* the claim connection is gone: reconnecting */
  FENCED,    /* heartbeat overdue: starting nothing */
  REJOINING, /* session lost: registering a new one */
  DRAINING,  /* first signal seen: finishing in-flight work */
  DONE       /* leave the loop */
} loop_state;

static const char *sid_of(const wk *w)
{
  return w->current ? oq_session_id(w->current->session) : NULL;
}

/* --------------------------------------------------------------------- */
/* Sessions */

static void on_session_event(void *ud, oq_session *s, oq_session_state st)
{
  wk *w = ud;
  static const char *const names[] = {"live", "fenced", "lost"};
  OQ_LOG(st == OQ_SESSION_LIVE ? OQ_LOG_INFO : OQ_LOG_WARN, oq_session_id(s),
         NULL, "session is %s%s", names[st],
         st == OQ_SESSION_FENCED ? ": heartbeat overdue, stopping children"
         : st == OQ_SESSION_LOST ? ": expired or reaped; stopping children "
                                   "and registering a new session"
                                 : "");
  pthread_mutex_lock(&w->mu);
  pthread_cond_broadcast(&w->slot_cv); /* wake the claim loop */
  pthread_mutex_unlock(&w->mu);
}

/* Register a session and start its heartbeat; it becomes w->current. */
static oq_err join(wk *w, oq_db *db)
{
  char err[OQ_ERRBUF_SIZE];
  char queues[1024] = "";
  size_t pos = 0;
  for (size_t i = 0; i < w->cfg->nqueues; i++)
    pos += (size_t)snprintf(queues + pos,
                            pos < sizeof queues ? sizeof queues - pos : 0,
                            "%s%s", i ? "," : "", w->cfg->queues[i]);
  oq_session_opts so = {.heartbeat_interval_ms =
                            (int)w->cfg->heartbeat_interval_ms,
                        .expiry_ms = (int)w->cfg->session_expiry_ms,
                        .queues = queues,
                        .fence_margin_ms = wk_fence_margin_ms(w->cfg)};
  wk_gen *g = calloc(1, sizeof *g);
  if (!g)
    return OQ_ERR_NOMEM;
  oq_err e = oq_session_open(db, &so, &g->session);
  if (e != OQ_OK) {
    free(g);
    return e;
  }
  oq_db_opts o = w->dbo;
  o.application_name = "onceq-worker-heartbeat";
  e = oq_heartbeat_start(&o, g->session, on_session_event, w, &g->hb, err,
                         sizeof err);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_ERROR, oq_session_id(g->session), NULL, "heartbeat: %s", err);
    oq_err e2 = oq_session_end(db, g->session);
    (void)e2;
    oq_session_free(g->session);
    free(g);
    return e;
  }
  wk_metrics_add(w->m, WK_C_SESSIONS, 1);
  w->current = g;
  return OQ_OK;
}

/* Stop g's heartbeat, delete its row unless it is gone already (the
 * cascade releases what it still claims) and free it. No job may refer
 * to g any more. */
static void retire(wk *w, oq_db *db, wk_gen *g, bool lost)
{
  oq_heartbeat_stop(g->hb);
  if (!oq_db_connected(db)) {
    oq_err re = oq_db_reconnect(db);
    (void)re;
  }
  /* a lost row may still be there (expired on our clock, not reaped yet):
   * deleting it releases its claims now instead of at the next reap */
  if (oq_session_end(db, g->session) != OQ_OK)
    OQ_LOG(lost ? OQ_LOG_INFO : OQ_LOG_WARN, oq_session_id(g->session), NULL,
           "could not delete the session (it will be reaped): %s",
           oq_db_errmsg(db));
  OQ_LOG(OQ_LOG_INFO, oq_session_id(g->session), NULL, "session closed");
  oq_session_free(g->session);
  free(g);
  (void)w;
}

/* --------------------------------------------------------------------- */
/* Waiting and claiming */

/* Wait for work to show up: a NOTIFY on PostgreSQL, else the poll timer.
 * `ours` is what we held when the short claim returned: the items in
 * flight when it began plus what it got; 0 when none of them was keyed or
 * of a limited queue (wk->gating): a plain item's settle makes nothing
 * claimable, so re-claiming on it would only add empty claims. */
static void wait_for_items(wk *w, oq_db *listen_db, int ms, int ours,
                           cm_signal_count *signals)
{
  uint64_t until = wk_now_ms() + (uint64_t)ms;
  /* A short claim while our own items are in flight says little about the
   * next one: with ordering keys they hold the heads of their keys, and
   * under a concurrency limit they count against it. So the first of them
   * to settle ends the wait, as a NOTIFY would (an ack sends none), and so
   * does one that settled before the wait began: during the claim (its
   * snapshot older than the ack) or just after it (a fast handler may
   * finish what the claim got before we get here). The settle itself wakes
   * us (wk_settle_wake: a byte on wake_fd, polled with the LISTEN socket;
   * without a listener the slot_cv broadcast, wk_wait_settled), so the next
   * claim starts as the head's ack commits: a key of 20 items is 20 such rounds
   * in a row, and a check every 20 ms made each of them last 20 ms at least.
   * Armed before the test of wk_busy, so a settle between the two still leaves
   * its byte. With nothing of ours in flight only a NOTIFY or the poll
   * interval does. */
  int busy_then = ours;
  while (*signals == 0) {
    if (busy_then > 0)
      wk_settle_arm(w);
    uint64_t now = wk_now_ms();
    if (now >= until || (busy_then > 0 && wk_busy(w) < busy_then))
      break;
    /* without the pipe (out of descriptors) a settle cannot end a wait
     * on the socket: check every 20 ms, as before it */
    int most = busy_then > 0 && w->wake_fd[0] < 0 ? 20 : 250;
    int chunk = (int)(until - now) > most ? most : (int)(until - now);
    if (listen_db && oq_db_connected(listen_db)) {
      int notified = 0;
      int fd = busy_then > 0 ? w->wake_fd[0] : -1;
      if (oq_db_wait_notify_or(listen_db, chunk, fd, &notified) != OQ_OK)
        break; /* reconnect in the loop */
      if (notified)
        break;
    } else {
      wk_wait_settled(w, busy_then, chunk);
    }
    if (atomic_load(&w->sweep_due) ||
        (w->current &&
         oq_session_state_get(w->current->session) != OQ_SESSION_LIVE))
      break;
  }
  atomic_store(&w->settle_armed, false); /* settles write nothing now */
}

/*
 * --drain, after the n-th empty claim in a row while the acks claim the
 * keys' next items: how long to wait for our items to settle before
 * claiming again. Such a claim finds only what no ack of ours brings (a
 * key no session holds, a retry come due, another worker's key freed), and
 * on a keyed queue it is the dearest statement of the drain: it walks
 * every key's head (KEY_HEADS) to find none free, 20 ms for 1,000 keys.
 * At a fixed 50 ms a keyed keys_bench drain made 18 of them, 0.38 s of
 * its 1.6 s of database time. So the wait doubles per empty claim, 50 ms
 * to at most 400 ms; a claim that gets items starts again at 50, and
 * nothing in flight ends any wait (the drain's last claim, at once).
 */
static int drain_empty_wait_ms(int n)
{
  int shift = n < 1 ? 0 : n - 1 > 3 ? 3 : n - 1;
  return 50 << shift;
}

/*
 * A --sql worker's claims commit without waiting for the WAL flush
 * (PostgreSQL synchronous_commit = off, this connection only). A claim lost
 * in a server crash only leaves its items unclaimed again; the ack's claim
 * check then rejects the old session, so no acknowledgement depends on a
 * claim's durability, and the handler's writes, which commit with the ack,
 * roll back with it. Acks and failures keep synchronous commits on their
 * own connections, and their flush covers every earlier claim anyway.
 * --exec and --http act outside the database: there a lost claim would let
 * another worker start the item while this one still runs it (one item,
 * or one ordering key, twice at once), so their claims wait for the flush
 * (it_worker_exec_claim_crash).
 */
static void relax_claim_commits(const wk *w, oq_db *db)
{
  if (!w->cfg->handler || !w->cfg->handler->handle)
    return;
  /* through a pooler a session SET would reach other clients' server
   * connections: the claims carry it themselves instead */
  if (oq_db_pooled(db))
    oq_db_set_async_commits(db, true);
  if (!oq_db_traits(db)->session_settings)
    return;
  oq_err e = oq_db_exec(db, "SET synchronous_commit = off", 0, NULL, NULL);
  (void)e; /* best effort: claims are only slower without it */
}

/*
 * Read what the LISTEN connection holds, without blocking: called on every
 * turn of the claim loop, whatever its state. PostgreSQL keeps one NOTIFY
 * queue for the whole server and frees it only behind its slowest
 * listener; a listener whose client stops reading blocks on its socket
 * once the socket buffers fill, and under a backlog of hours the queue
 * then fills up and every enqueue in the database fails ("too many
 * notifications in the NOTIFY queue"). Reading on every turn (at most
 * about 250 ms apart, or one statement's deadline) keeps this backend's
 * position in the queue current. The
 * notifications read here are only thrown away: a turn that read them
 * claims after reading, and the claim sees every commit they announced.
 * (Stopping to LISTEN while busy would cost two statements per busy
 * spell and a wake-up that a claim then has to replace; this costs one
 * non-blocking read.) Bounded, so a flood cannot hold the loop.
 */
#define WK_LISTEN_READS_MAX 1000 /* reads per turn, at most */

static void drain_listener(oq_db *listen_db)
{
  if (!listen_db || !oq_db_connected(listen_db))
    return;
  for (int i = 0; i < WK_LISTEN_READS_MAX; i++) {
    int notified = 0;
    if (oq_db_wait_notify(listen_db, 0, &notified) != OQ_OK || !notified)
      return; /* empty for now; a lost connection reopens when idle */
  }
}

/* The connection that LISTENs: --listen-db (or ONCEQ_LISTEN_DATABASE_URL)
 * when given, a direct one for a --db that goes through a transaction
 * pooler; else --db's. NULL: none (the loop polls). */
static oq_db *open_listener(wk *w)
{
  char err[OQ_ERRBUF_SIZE];
  oq_db *l = NULL;
  oq_db_opts o = w->dbo;
  const char *direct = cm_listen_db(w->cfg->listen_db);
  if (direct) {
    o.conninfo = direct;
    o.host_hint = NULL; /* another host list */
  }
  o.application_name = "onceq-worker-listen";
  if (oq_db_open(&o, &l, err, sizeof err) != OQ_OK) {
    if (direct)
      OQ_LOG(OQ_LOG_WARN, sid_of(w), NULL, "--listen-db: %s; polling", err);
    return NULL;
  }
  if (oq_db_listen(l, "onceq") != OQ_OK) {
    if (direct)
      OQ_LOG(OQ_LOG_WARN, sid_of(w), NULL, "--listen-db: %s; polling",
             oq_db_errmsg(l));
    oq_db_close(l);
    return NULL;
  }
  return l;
}

/* Poll only: --db cannot LISTEN (CockroachDB, a pooler) and no
 * --listen-db gives a connection that can. */
static bool polls_only(const wk *w, const oq_db *db)
{
  return !oq_db_traits(db)->listen_notify && !cm_listen_db(w->cfg->listen_db);
}

/* --------------------------------------------------------------------- */
/* --partitioned (docs/design.md §5): the claim loop's only partition logic. A
 * round runs on the poll cadence, claims look only in this session's parts (and
 * at orphans), and the library gives a part up only once this session's
 * items of it have finished or been released. While draining, the loop
 * neither claims nor runs rounds, so the parts stay owned until the session
 * row is deleted after the drain (the cascade frees them). */

typedef struct part_claims {
  oq_parts *parts;        /* NULL: claim anywhere (oq_claim) */
  uint64_t next_round_ms; /* monotonic time of the next round */
} part_claims;

static oq_err part_claims_init(const wk_config *cfg, part_claims *pc)
{
  /* --orphan-after 0s means at once: the library reads 0 as "default" */
  oq_parts_opts po = {.orphan_after_ms = cfg->orphan_after_ms > 0
                                             ? (int)cfg->orphan_after_ms
                                             : 1};
  pc->next_round_ms = 0;
  return cfg->partitioned ? oq_parts_new(&po, &pc->parts) : OQ_OK;
}

/* After a rebalance: which slots the acks' next items may come from
 * (wk.claim_slots). */
static void publish_claim_slots(wk *w, const oq_parts *p)
{
  oq_parts_status st;
  oq_parts_status_get(p, &st);
  uint64_t bits[16] = {0};
  for (int slot = 0; st.partitions > 0 && slot < OQ_PARTS_SLOTS; slot++)
    if (oq_parts_claimable(p, oq_parts_of_slot(slot, st.partitions)))
      bits[slot / 64] |= 1ULL << (slot % 64);
  for (int i = 0; i < 16; i++)
    atomic_store(&w->claim_slots[i], bits[i]);
}

static oq_err claim_some(wk *w, part_claims *pc, oq_db *db, int poll_ms,
                         int want, int64_t max_bytes, oq_item **items,
                         size_t *got)
{
  const wk_config *cfg = w->cfg;
  oq_session *s = w->current->session;
  if (!pc->parts)
    return oq_claim_bytes(db, s, cfg->queues, cfg->nqueues, want, max_bytes,
                          items, got);
  if (wk_now_ms() >= pc->next_round_ms) {
    oq_err e = oq_parts_rebalance(db, s, pc->parts);
    if (e != OQ_OK)
      return e;
    publish_claim_slots(w, pc->parts);
    pc->next_round_ms = wk_now_ms() + (uint64_t)poll_ms;
  }
  return oq_parts_claim_bytes(db, s, pc->parts, cfg->queues, cfg->nqueues, want,
                              max_bytes, items, got);
}

/* The claim loop's state besides the state name. */
typedef struct loop {
  loop_state st;
  oq_db *db;
  oq_db *listen_db;
  part_claims pc;
  bool polling; /* no LISTEN/NOTIFY: poll only */
  int poll_ms;
  int down_rounds;        /* failed reconnects in a row: backoff step */
  uint64_t rng;           /* poll jitter and backoff */
  uint64_t next_sweep_ms; /* periodic sweep: once per session expiry */
  const char *sweep_why;  /* a transition asked for a sweep; NULL: none */
  uint64_t drain_deadline_ms;
  int rc;
  int hold_logged;  /* the hold last logged (claim_size.h) */
  int empty_claims; /* --drain: empty claims in a row while acks take the
                     * keys' next items (the wait after one doubles) */
} loop;

/* Signals: the first drains, the second stops children now. */
static void take_signals(wk *w, loop *l, cm_signal_count *signals)
{
  int sigs = (int)*signals;
  if (sigs >= 2 && !atomic_load(&w->hard_stop)) {
    OQ_LOG(OQ_LOG_WARN, sid_of(w), NULL,
           "second signal: stopping children now and releasing claims");
    atomic_store(&w->hard_stop, true);
    l->rc = 1;
  }
  if (sigs >= 1 && l->st != DRAINING && l->st != DONE) {
    OQ_LOG(OQ_LOG_INFO, sid_of(w), NULL,
           "signal: draining (no new claims; up to %lld ms for %d "
           "in-flight item(s))",
           (long long)w->cfg->shutdown_timeout_ms, wk_busy(w));
    l->st = DRAINING;
    atomic_store(&w->draining, true);
    l->drain_deadline_ms = wk_now_ms() + (uint64_t)w->cfg->shutdown_timeout_ms;
  }
}

/* Where a session state sends a claiming loop. */
static loop_state by_session(const wk *w, loop_state otherwise)
{
  switch (oq_session_state_get(w->current->session)) {
  case OQ_SESSION_LOST:
    return REJOINING;
  case OQ_SESSION_FENCED:
    return FENCED;
  case OQ_SESSION_LIVE:
    break;
  }
  return otherwise;
}

static loop_state go_down(wk *w, loop *l, const char *what)
{
  OQ_LOG(OQ_LOG_WARN, sid_of(w), NULL,
         "database unavailable (%s), retrying: %s", what, oq_db_errmsg(l->db));
  l->down_rounds = 0;
  return DB_DOWN;
}

/* Run a sweep when one is due. Returns the next state. */
static loop_state maybe_sweep(wk *w, loop *l)
{
  const char *why = l->sweep_why;
  if (atomic_exchange(&w->sweep_due, false))
    why = why ? why : "a job was dropped unsettled";
  if (!why && wk_now_ms() >= l->next_sweep_ms)
    why = "periodic";
  if (!why)
    return RUNNING;
  oq_err e = wk_reconcile(w, l->db, w->current, why, NULL);
  if (e != OQ_OK) {
    atomic_store(&w->sweep_due, true); /* try again */
    return wk_transient(e) ? go_down(w, l, "sweep") : RUNNING;
  }
  l->sweep_why = NULL;
  l->next_sweep_ms = wk_now_ms() + (uint64_t)w->cfg->session_expiry_ms;
  return RUNNING;
}

/* At most this many items per claim statement, whatever --batch says. */
#define WK_CLAIM_ROUND_MAX 1000

/* How many items the next claim round asks for while `inflight` are held:
 * claims sized by the work (claim_size.h, docs/worker.md "How much a
 * worker claims"); 0: not yet. */
static int claim_want(wk *w, loop *l, int inflight)
{
  pthread_mutex_lock(&w->mu);
  int want = wk_claim_size_want(&w->sizing, inflight);
  int hold = wk_claim_size_hold(&w->sizing);
  double item_us = w->sizing.item_us;
  pthread_mutex_unlock(&w->mu);
  /* on a change of a quarter or more: the measurement moves a little with
   * every report */
  int step =
      hold > l->hold_logged ? hold - l->hold_logged : l->hold_logged - hold;
  if (step * 4 > l->hold_logged) {
    OQ_LOG(OQ_LOG_DEBUG, sid_of(w), NULL,
           "claim stream: holding up to %d item(s) (%.0f us per item "
           "observed)",
           hold, item_us);
    l->hold_logged = hold;
  }
  return want < WK_CLAIM_ROUND_MAX ? want : WK_CLAIM_ROUND_MAX;
}

static loop_state on_running(wk *w, loop *l, cm_signal_count *signals)
{
  const wk_config *cfg = w->cfg;
  loop_state next = by_session(w, RUNNING);
  if (next != RUNNING)
    return next;
  next = maybe_sweep(w, l);
  if (next != RUNNING)
    return next;
  pthread_mutex_lock(&w->mu);
  int inflight = w->inflight;
  int64_t held_bytes = w->held_bytes;
  pthread_mutex_unlock(&w->mu);
  /* payload bytes as well as items (issue 20): with --max-held-mib held,
   * wait for a job to be freed; below it, the claim takes at most what is
   * left (the item that crosses it is its last, so a worker holding
   * nothing always gets one item, however large) */
  int64_t max_bytes = (int64_t)cfg->max_held_mib << 20;
  if (held_bytes >= max_bytes && held_bytes > 0) {
    wk_wait_slot(w, 100);
    return RUNNING;
  }
  int want = claim_want(w, l, inflight);
  if (want <= 0) {
    wk_wait_slot(w, 100);
    return RUNNING;
  }
  /* in flight before the claim: with ordering keys a claim finds nothing
   * while our own items block their keys, and they may all finish before
   * the claim returns; only a claim that began with nothing of ours in
   * flight shows that nothing ready is left (--drain below) */
  int busy_before = wk_busy(w);
  int gating_before = wk_gating(w);
  oq_item *items = NULL;
  size_t got = 0;
  oq_err e = claim_some(w, &l->pc, l->db, l->poll_ms, want,
                        max_bytes - held_bytes, &items, &got);
  if (wk_transient(e)) {
    /* the claim may have committed with its reply lost */
    l->sweep_why = "ambiguous claim";
    return go_down(w, l, "claim");
  }
  if (e == OQ_ERR_SESSION_LOST || e == OQ_ERR_FENCED)
    return by_session(w, RUNNING); /* the library marked the session */
  if (e == OQ_ERR_NOMEM) {
    /* the claim committed and its rows were not all copied: they are
     * ours and held by no job, so sweep at once (docs/design.md §4a)
     * rather than leave them until the periodic sweep */
    OQ_LOG(OQ_LOG_ERROR, sid_of(w), NULL, "claim failed: %s",
           oq_db_errmsg(l->db));
    l->sweep_why = "claim ran out of memory";
    wk_wait_slot(w, 100);
    return RUNNING;
  }
  if (e != OQ_OK) {
    /* the tables are gone (undefined_table) or too old: a --drain run
     * cannot finish, so it says so once and exits 2 instead of warning
     * every second */
    bool no_schema = e == OQ_ERR_SCHEMA ||
                     oq_db_sqlstate_is(l->db, OQ_SQLSTATE_UNDEFINED_TABLE);
    if (cfg->drain && no_schema) {
      OQ_LOG(OQ_LOG_ERROR, sid_of(w), NULL,
             "claim failed: %s; the onceq schema is missing: run `onceq "
             "migrate`",
             oq_db_errmsg(l->db));
      l->rc = 2;
      return DONE;
    }
    OQ_LOG(OQ_LOG_ERROR, sid_of(w), NULL, "claim failed: %s",
           oq_db_errmsg(l->db));
    wk_wait_slot(w, 1000);
    return RUNNING;
  }
  /* capped: a worker that is not draining counts too, for as long as it
   * runs, and the wait stops growing at the fourth */
  l->empty_claims = got > 0 ? 0 : l->empty_claims < 4 ? l->empty_claims + 1 : 4;
  int64_t got_bytes = 0;
  int gating = gating_before;
  for (size_t i = 0; i < got; i++) {
    got_bytes += (int64_t)strlen(items[i].payload);
    gating += items[i].keyed || items[i].limited;
  }
  if (got > 0) {
    wk_metrics_add(w->m, WK_C_CLAIMED, got);
    wk_jobs_push(w, w->current, items, got);
  }
  oq_items_free(items, got);
  /* cut short by the count or by the byte budget: there may be more ready
   * (the next turn waits for room) */
  if (got > 0 && ((int)got == want || got_bytes >= max_bytes - held_bytes))
    return RUNNING;
  /* a sweep still due may release a claim of ours that blocks a key (an
   * ack's next item whose commit was unknown): not empty yet */
  if (cfg->drain && got == 0 && busy_before == 0 && wk_busy(w) == 0 &&
      !atomic_load(&w->sweep_due)) {
    /* how long the drain took, from the program's start (the peer
     * benchmark's clock for the worker, like graphile-worker's own) */
    OQ_LOG(OQ_LOG_INFO, sid_of(w), NULL,
           "--drain: nothing ready is left; exiting (%" PRIu64
           " acked, %.3f s since start)",
           wk_metrics_get(w->m, WK_C_ACKED), cm_seconds_since_start());
    /* a drain that acknowledged nothing of what it ran did not do its
     * job: exit 1, so a script notices (the failures are in the log) */
    if (wk_metrics_get(w->m, WK_C_FAILED) > 0 &&
        wk_metrics_get(w->m, WK_C_ACKED) == 0) {
      OQ_LOG(OQ_LOG_ERROR, sid_of(w), NULL,
             "--drain: every attempt failed (%" PRIu64 " failed, 0 acked)",
             wk_metrics_get(w->m, WK_C_FAILED));
      l->rc = 1;
    }
    return DONE;
  }
  if (l->listen_db && !oq_db_connected(l->listen_db)) {
    oq_db_close(l->listen_db);
    l->listen_db = open_listener(w);
  }
  /* jitter the poll so a fleet does not poll in lock-step */
  l->rng = l->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  int jitter =
      l->poll_ms >= 4 ? (int)((l->rng >> 33) % (uint64_t)(l->poll_ms / 4)) : 0;
  /* After an empty claim while the --sql acks claim the keys' next items
   * (docs/design.md 5a, "The ack's next item"), a settle makes nothing
   * claimable that the ack did not take already, unless an attempt failed
   * (a dead letter frees its key) or a limited job settled: re-claiming
   * on every settle made about 40 mostly empty keyed claims per keys_bench
   * drain, half of its database time. So wait drain_empty_wait_ms, or
   * for nothing to be in flight (the drain's end test) */
  bool acks_take_next = cfg->sql && !cfg->sql_per_item && cfg->batch > 1 &&
                        oq_db_engine(l->db) == OQ_ENGINE_POSTGRES;
  bool acks_free_keys = acks_take_next && wk_limited_held(w) == 0;
  if (cfg->drain && got == 0 && acks_free_keys)
    wk_wait_idle(w, w->current->session, drain_empty_wait_ms(l->empty_claims));
  else if (cfg->drain) /* drain mode: wait for in-flight work only; a job
                        * that settled during the claim ends the wait at
                        * once (its wake-up went by: the whole 50 ms after
                        * the last ack) */
    wk_wait_settled(w, busy_before + (int)got, 50);
  else
    wait_for_items(w, l->listen_db, l->poll_ms - jitter,
                   gating > 0 ? busy_before + (int)got : 0, signals);
  return RUNNING;
}

static loop_state on_db_down(wk *w, loop *l)
{
  if (oq_session_state_get(w->current->session) == OQ_SESSION_LOST)
    return REJOINING;
  if (oq_db_reconnect(l->db) != OQ_OK) {
    l->down_rounds++;
    oq_retry_policy p = {.base_ms = 50, .cap_ms = 2000, .jitter = 0.5};
    int ms = oq_backoff_delay_ms(&p, l->down_rounds, &l->rng);
    for (int waited = 0; waited < ms && !atomic_load(&w->draining);
         waited += 250)
      wk_wait_slot(w, ms - waited < 250 ? ms - waited : 250);
    return DB_DOWN;
  }
  OQ_LOG(OQ_LOG_INFO, sid_of(w), NULL, "database reachable again");
  relax_claim_commits(w, l->db);
  oq_db_close(l->listen_db);
  l->polling = polls_only(w, l->db);
  l->listen_db = l->polling ? NULL : open_listener(w);
  if (!l->sweep_why)
    l->sweep_why = "reconnect";
  return RUNNING;
}

static loop_state on_fenced(wk *w, loop *l)
{
  switch (oq_session_state_get(w->current->session)) {
  case OQ_SESSION_LOST:
    return REJOINING;
  case OQ_SESSION_LIVE:
    l->sweep_why = "fenced -> live";
    return RUNNING;
  case OQ_SESSION_FENCED:
    break;
  }
  wk_wait_slot(w, 100);
  return FENCED;
}

static loop_state on_rejoining(wk *w, loop *l)
{
  /* the lost session's jobs stop: their cancel checks see LOST */
  if (wk_busy(w) > 0) {
    wk_wait_slot(w, 100);
    return REJOINING;
  }
  /* wait for the database first: deleting the old row then releases its
   * claims at once instead of at the next reap */
  if (!oq_db_connected(l->db) && oq_db_reconnect(l->db) != OQ_OK) {
    wk_wait_slot(w, 500);
    return REJOINING;
  }
  if (w->current) {
    /* the session was lost, most often because its heartbeat got no
     * answer: this connection may be to a server that no longer answers
     * (a failed-over primary whose host went silent) though it looks up.
     * Connect again first, so that the delete reaches the server that
     * answers now (the next host of a multi-host URL) instead of waiting
     * out the deadline on the old one. */
    oq_err re = oq_db_reconnect(l->db);
    (void)re; /* retire reconnects once more, and reports */
    wk_gen *old = w->current;
    w->current = NULL;
    retire(w, l->db, old, true);
  }
  oq_err e = join(w, l->db);
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, NULL, NULL, "cannot register again: %s",
           oq_db_errmsg(l->db));
    if (!oq_db_connected(l->db)) {
      oq_err re = oq_db_reconnect(l->db);
      (void)re;
    }
    wk_wait_slot(w, 500);
    return REJOINING;
  }
  OQ_LOG(OQ_LOG_INFO, sid_of(w), NULL, "registered a new session");
  relax_claim_commits(w, l->db);
  l->next_sweep_ms = wk_now_ms() + (uint64_t)w->cfg->session_expiry_ms;
  l->sweep_why = NULL; /* a new session holds nothing yet */
  return RUNNING;
}

static loop_state on_draining(wk *w, loop *l)
{
  if (wk_busy(w) == 0)
    return DONE;
  if (wk_now_ms() >= l->drain_deadline_ms && !atomic_load(&w->hard_stop)) {
    OQ_LOG(OQ_LOG_WARN, sid_of(w), NULL,
           "shutdown timeout: stopping %d in-flight item(s)", wk_busy(w));
    atomic_store(&w->hard_stop, true);
  }
  wk_wait_slot(w, 100);
  return DRAINING;
}

static int run_loop(wk *w, oq_db *db, cm_signal_count *signals)
{
  const wk_config *cfg = w->cfg;
  loop l = {.st = RUNNING, .db = db, .rng = oq_backoff_seed()};
  /* what the engine can do (onceq/traits.h), not its name: the
   * CockroachDB traits pass runs these paths on PostgreSQL */
  l.polling = polls_only(w, db);
  l.poll_ms = cfg->poll_interval_ms > 0 ? (int)cfg->poll_interval_ms
              : l.polling               ? oq_db_traits(db)->poll_ms
                          : oq_engine_traits_of(oq_db_engine(db))->poll_ms;
  l.next_sweep_ms = wk_now_ms() + (uint64_t)cfg->session_expiry_ms;
  if (part_claims_init(cfg, &l.pc) != OQ_OK)
    return 1;
  relax_claim_commits(w, db);
  l.listen_db = l.polling ? NULL : open_listener(w);
  while (l.st != DONE) {
    drain_listener(l.listen_db);
    take_signals(w, &l, signals);
    wk_metrics_set_healthy(
        w->m, l.st != DB_DOWN && w->current &&
                  oq_session_state_get(w->current->session) == OQ_SESSION_LIVE);
    switch (l.st) {
    case RUNNING:
      l.st = on_running(w, &l, signals);
      break;
    case DB_DOWN:
      l.st = on_db_down(w, &l);
      break;
    case FENCED:
      l.st = on_fenced(w, &l);
      break;
    case REJOINING:
      l.st = on_rejoining(w, &l);
      break;
    case DRAINING:
      l.st = on_draining(w, &l);
      break;
    case DONE:
      break;
    }
  }
  oq_db_close(l.listen_db);
  oq_parts_free(l.pc.parts);
  return l.rc;
}

/* --------------------------------------------------------------------- */

/* Condition variables on the monotonic clock (a wall-clock step must not
 * stretch or cut a wait). */
static void cond_init(pthread_cond_t *cv)
{
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

/* The settle wake-up's pipe (wk_settle_wake): non-blocking on both ends
 * (a settle never blocks on it, the claim loop empties it without
 * waiting) and closed on exec (handlers' children must not inherit it).
 * Without it (out of descriptors) fd[] is -1 and a wait on the LISTEN
 * socket ends by its 250 ms slices instead. */
static void wake_pipe_open(int fd[2])
{
  fd[0] = fd[1] = -1;
  int p[2];
  if (pipe(p) != 0)
    return;
  for (int i = 0; i < 2; i++) {
    int fl = fcntl(p[i], F_GETFL);
    if (fl < 0 || fcntl(p[i], F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(p[i], F_SETFD, FD_CLOEXEC) != 0) {
      close(p[0]);
      close(p[1]);
      return;
    }
  }
  fd[0] = p[0];
  fd[1] = p[1];
}

/* oq_db_set_give_up's function for the claim loop's connection: the
 * current session is lost, so a sweep or claim that waits on a server that
 * does not answer (a silent failed-over primary) is moot; the loop goes on
 * to register a new session instead of waiting out the deadline. Read on
 * the claim loop's thread only, like w->current. */
static bool current_lost(void *ud)
{
  const wk *w = ud;
  return w->current &&
         oq_session_state_get(w->current->session) == OQ_SESSION_LOST;
}

int wk_worker_run(const wk_config *cfg, wk_metrics *m, cm_signal_count *signals)
{
  wk w;
  memset(&w, 0, sizeof w);
  w.cfg = cfg;
  w.m = m;
  w.dbo.conninfo = cfg->db;
  w.dbo.application_name = "onceq-worker";
  /* after a failover, the first thread that finds the new primary spares
   * the others the connect_timeout on the old one (docs/deployment.md,
   * "What bounds the time to resume") */
  w.dbo.host_hint = &w.host_hint;
  /* no statement outlives the fence (docs/design.md §4a): a blocked call would
   * otherwise keep a thread past the moment the session may be reaped */
  w.dbo.deadline_ms = (int)(cfg->session_expiry_ms - wk_fence_margin_ms(cfg));
  /* at least 2 s: a shorter deadline (a 1.6 s expiry) would cut healthy
   * connections of a loaded server and reconnect them in a loop; the fence
   * itself is decided by the clock, not by the deadline */
  if (w.dbo.deadline_ms < 2000)
    w.dbo.deadline_ms = 2000;
  /* every thread connects within the fence's bound (half the deadline, 2
   * to 5 s, as the library derives it), the executors too, whose longer
   * statement deadline would otherwise give a connect 5 s: libpq spends it
   * on each host of a multi-host list, so after a failover every reconnect
   * pays it once on the silent old primary before reaching the new one */
  w.dbo.connect_timeout_s = w.dbo.deadline_ms / 2000 < 2 ? 2
                            : w.dbo.deadline_ms / 2000 > 5
                                ? 5
                                : w.dbo.deadline_ms / 2000;
  w.item_retry = oq_retry_policy_item();
  w.item_retry.base_ms = (int)cfg->retry_base_ms;
  wk_claim_size_init(&w.sizing, cfg->concurrency, cfg->batch);
  pthread_mutex_init(&w.mu, NULL);
  cond_init(&w.work_cv);
  cond_init(&w.slot_cv);
  cond_init(&w.ack_cv);
  wake_pipe_open(w.wake_fd);
  int rc = 0;
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_reaper *reaper = NULL;
  wk_executor *threads = NULL;
  pthread_t acker;
  bool acker_started = false;
  int started = 0;

  oq_err e = oq_db_open(&w.dbo, &db, err, sizeof err);
  if (e != OQ_OK) {
    cm_say("onceq-worker", NULL, NULL, "%s", err);
    rc = cm_exit_for(e); /* the one exit-code rule (docs/worker.md) */
    goto out;
  }
  oq_db_set_give_up(db, current_lost, &w);
  e = join(&w, db);
  if (e != OQ_OK) {
    cm_say("onceq-worker", NULL, NULL, "%s", oq_db_errmsg(db));
    rc = cm_exit_for(e);
    goto out;
  }
  OQ_LOG(OQ_LOG_INFO, sid_of(&w), NULL,
         "onceq-worker %s started: %d executor(s), handler %s, queue(s) "
         "%s%s, database %s",
         oq_version(), cfg->concurrency, cfg->handler->flag + 2, cfg->queues[0],
         cfg->nqueues > 1 ? ",..." : "", oq_db_masked_conninfo(db));
  if (cfg->handler->children && wk_fence_grace_ms(cfg) < cfg->kill_grace_ms)
    OQ_LOG(OQ_LOG_INFO, sid_of(&w), NULL,
           "--kill-grace %lld ms: children of a fenced session get %d ms "
           "between SIGTERM and SIGKILL (the fence margin, %d ms, is at "
           "most --session-expiry - 3 x --heartbeat-interval); "
           "--session-expiry %lld ms or more gives them all of it",
           (long long)cfg->kill_grace_ms, wk_fence_grace_ms(cfg),
           wk_fence_margin_ms(cfg),
           (long long)(cfg->kill_grace_ms + WK_FENCE_SLACK_MS +
                       3 * cfg->heartbeat_interval_ms));
  if (oq_db_pooled(db))
    cm_log_pooler("onceq-worker", sid_of(&w), cm_listen_db(cfg->listen_db),
                  cfg->poll_interval_ms > 0 ? (long)cfg->poll_interval_ms
                                            : oq_db_traits(db)->poll_ms);
  /* its own name in pg_stat_activity, like the other threads' connections */
  oq_db_opts rdbo = w.dbo;
  rdbo.application_name = "onceq-worker-reaper";
  e = oq_reaper_start(&rdbo, (int)cfg->session_expiry_ms, &reaper, err,
                      sizeof err);
  if (e != OQ_OK)
    OQ_LOG(OQ_LOG_WARN, NULL, NULL, "reaper not started: %s", err);
  threads = calloc((size_t)cfg->concurrency, sizeof *threads);
  if (!threads) {
    rc = 1;
    goto stop;
  }
  for (int i = 0; i < cfg->concurrency; i++) {
    threads[i].w = &w;
    threads[i].index = i;
    if (pthread_create(&threads[i].thread, NULL, wk_executor_main,
                       &threads[i]) != 0) {
      OQ_LOG(OQ_LOG_ERROR, NULL, NULL, "cannot start executor %d", i);
      rc = 1;
      goto stop;
    }
    started++;
  }
  /* a task handler's successes are acknowledged by the acker; a statement
   * handler acknowledges in its own transaction */
  if (cfg->handler->run) {
    if (pthread_create(&acker, NULL, wk_acker_main, &w) != 0) {
      rc = 1;
      goto stop;
    }
    acker_started = true;
  }
  rc = run_loop(&w, db, signals);

stop:
  pthread_mutex_lock(&w.mu);
  w.exit_executors = true;
  atomic_store(&w.draining, true);
  pthread_cond_broadcast(&w.work_cv);
  pthread_mutex_unlock(&w.mu);
  for (int i = 0; i < started; i++)
    pthread_join(threads[i].thread, NULL);
  if (acker_started) {
    pthread_mutex_lock(&w.mu);
    w.exit_acker = true;
    pthread_cond_broadcast(&w.ack_cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(acker, NULL);
  }
  free(threads);
  oq_reaper_stop(reaper);
  /* deleting the row releases whatever is still claimed */
  if (w.current) {
    wk_gen *cur = w.current;
    w.current = NULL;
    bool lost = oq_session_state_get(cur->session) == OQ_SESSION_LOST;
    retire(&w, db, cur, lost);
  }
  /* One summary line, so a --drain run or a log shipper can tell what this
   * process did without scraping /metrics before it went away. */
  OQ_LOG(OQ_LOG_INFO, NULL, NULL,
         "exiting: %" PRIu64 " claimed, %" PRIu64 " acked, %" PRIu64
         " failed attempts, %" PRIu64 " dead-lettered, %" PRIu64
         " claims lost, %" PRIu64 " transaction restarts, %" PRIu64
         " reconciled",
         wk_metrics_get(m, WK_C_CLAIMED), wk_metrics_get(m, WK_C_ACKED),
         wk_metrics_get(m, WK_C_FAILED), wk_metrics_get(m, WK_C_DEAD),
         wk_metrics_get(m, WK_C_LOST), wk_metrics_get(m, WK_C_RESTARTS),
         wk_metrics_get(m, WK_C_RECONCILED));
out:
  oq_db_close(db);
  for (int i = 0; i < 2; i++)
    if (w.wake_fd[i] >= 0)
      close(w.wake_fd[i]);
  pthread_cond_destroy(&w.ack_cv);
  pthread_cond_destroy(&w.slot_cv);
  pthread_cond_destroy(&w.work_cv);
  wk_jobs_fini(&w);
  pthread_mutex_destroy(&w.mu);
  return rc;
}
