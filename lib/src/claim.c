/*
 * claim.c: claiming ready items for a session: anywhere (item.h, oq_claim)
 * or within the session's parts (partition.h, oq_parts_claim). Claims
 * decide only where to look; the ack's claim check decides who may
 * acknowledge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_hooks.h"

typedef struct claim_acc {
  oq_item *items; /* grows up to cap */
  size_t n;
  size_t cap;
  int64_t budget_bytes; /* payload bytes to take at most; 0: no budget */
  int64_t taken_bytes;  /* payload bytes taken so far */
  bool nomem;
  /* the queues a PostgreSQL claim found keyed items in and left to
   * claim_keyed (dialect.c, CLAIM_OPEN_PG's rows with no id) */
  char **keyed;
  size_t nkeyed;
  size_t keyed_done; /* the first keyed_done of them are claimed */
  /* the keyed queues the claim statements named in this call, each ending
   * in NUL: remembered for the next call (claim_memory) */
  char seen[1024];
  size_t seen_len;
} claim_acc;

/* Room for another statement: items left, and bytes left under a budget. */
static bool acc_room(const claim_acc *a)
{
  return a->n < a->cap &&
         (a->budget_bytes <= 0 || a->taken_bytes < a->budget_bytes);
}

/* The budget parameter of a PostgreSQL claim: the bytes left (at least 1:
 * one item always comes), or no limit. */
static void budget_param(const claim_acc *a, char *buf, size_t len)
{
  int64_t left =
      a->budget_bytes > 0 ? a->budget_bytes - a->taken_bytes : INT64_MAX;
  snprintf(buf, len, "%lld", (long long)(left > 0 ? left : 1));
}

static char *dupstr(const char *s)
{
  return strdup(s ? s : "");
}

/* One claimed row into *it (zeroed here); false when out of memory. */
static bool item_from_row(oq_item *it, int ncols, const char *const *v)
{
  memset(it, 0, sizeof *it);
  snprintf(it->id, sizeof it->id, "%s", v[0] ? v[0] : "");
  it->queue = dupstr(v[1]);
  it->payload = dupstr(v[2]);
  /* the key itself (its text): a keyed item's ack passes it to the
   * statement that claims its key's next item (ack_many.c) */
  it->ordering_key = ncols > 9 && v[9] ? strdup(v[9]) : NULL;
  if (!it->queue || !it->payload || (ncols > 9 && v[9] && !it->ordering_key)) {
    free(it->queue);
    free(it->payload);
    free(it->ordering_key);
    it->queue = it->payload = it->ordering_key = NULL;
    return false;
  }
  it->attempt = oq__int(v[3]);
  it->max_attempts = oq__int(v[4]);
  it->priority = oq__int(v[5]);
  it->enqueued_at_us = v[6] ? strtoll(v[6], NULL, 10) : 0;
  it->claimed_at_us = v[7] ? strtoll(v[7], NULL, 10) : 0;
  it->slot = ncols > 8 ? oq__int(v[8]) : 0;
  it->keyed = it->ordering_key != NULL;
  return true;
}

oq_err oq__item_rows_add(void *ud, int ncols, const char *const *v)
{
  oq__item_rows *r = ud;
  if (ncols < 8)
    return OQ_OK;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    oq_item *grown = realloc(r->items, cap * sizeof *grown);
    if (!grown) {
      r->nomem = true;
      return OQ_OK; /* the rest of the rows are read and dropped */
    }
    r->items = grown;
    r->cap = cap;
  }
  if (!item_from_row(&r->items[r->n], ncols, v)) {
    r->nomem = true;
    return OQ_OK;
  }
  r->n++;
  return OQ_OK;
}

/* Note a keyed queue for claim_keyed, once. */
static void add_keyed(claim_acc *a, const char *queue)
{
  for (size_t i = 0; i < a->nkeyed; i++)
    if (strcmp(a->keyed[i], queue) == 0)
      return;
  char **grown = realloc(a->keyed, (a->nkeyed + 1) * sizeof *grown);
  if (!grown) {
    a->nomem = true;
    return;
  }
  a->keyed = grown;
  if (!(a->keyed[a->nkeyed] = strdup(queue)))
    a->nomem = true;
  else
    a->nkeyed++;
}

static void keyed_free(claim_acc *a)
{
  for (size_t i = 0; i < a->nkeyed; i++)
    free(a->keyed[i]);
  free(a->keyed);
  a->keyed = NULL;
  a->nkeyed = 0;
  a->keyed_done = 0;
}

static oq_err add_row(void *ud, int ncols, const char *const *v)
{
  claim_acc *a = ud;
  if (ncols >= 2 && !v[0] && v[1]) { /* a keyed queue, not an item */
    add_keyed(a, v[1]);
    size_t len = strlen(v[1]) + 1; /* one that does not fit is not kept */
    if (len <= sizeof a->seen - a->seen_len) {
      memcpy(a->seen + a->seen_len, v[1], len);
      a->seen_len += len;
    }
    return OQ_OK;
  }
  if (ncols < 8 || a->n >= a->cap)
    return OQ_OK;
  oq_item *it = &a->items[a->n];
  if (!item_from_row(it, ncols, v)) {
    a->nomem = true;
    return OQ_ERR_NOMEM;
  }
  a->taken_bytes += (int64_t)strlen(it->payload);
  a->n++;
  return OQ_OK;
}

/* The checks every claim starts with: arguments and the session state. */
static oq_err claim_precheck(oq_db *db, const oq_session *s,
                             const char *const *queues, size_t nqueues, int max)
{
  if (max <= 0 || nqueues == 0 || !queues)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "claim needs at least one queue and max > 0");
  return oq__session_usable(db, s);
}

/* A claim statement failing with 22012 means our session row is gone or
 * expired: the claim's session lock divides by its count (dialect.c,
 * SESSION_LIVE; schema v8). 23503 is the same news from a database still
 * at schema v6, whose foreign key refuses the claim. */
static oq_err session_gone(oq_db *db, const oq_session *s, oq_err e)
{
  if (e == OQ_OK)
    return e;
  oq_sqlstate st = OQ_SQLSTATE_DIVISION_BY_ZERO;
  if (!oq__sqlstate_is(oq_db_sqlstate(db), st)) {
    st = OQ_SQLSTATE_FOREIGN_KEY_VIOLATION;
    if (!oq__sqlstate_is(oq_db_sqlstate(db), st))
      return e;
  }
  /* the library marks its own session, so callers branch on the code
   * alone */
  oq__session_mark_lost(s);
  return oq__db_fail(db, OQ_ERR_SESSION_LOST, oq_sqlstate_code(st),
                     "session %s no longer exists or has expired (reaped); "
                     "open a new session",
                     oq_session_id(s));
}

/* One claim statement for the queues in qarr, appending to acc: anywhere,
 * or in the slot run r (partitioned; orphan_ms its age). With lock_args
 * (queue, first and last stripe) it is a keyed queue's claim, sent after
 * its key locks (keyed_stmt). */
static oq_err claim_in(oq_db *db, const oq_session *s, const char *qarr,
                       const oq__slot_range *r, int orphan_ms, claim_acc *acc,
                       const char *const *lock_args)
{
  char lim[16], lo[16], hi[16], age[24], budget[24];
  snprintf(lim, sizeof lim, "%zu", acc->cap - acc->n);
  budget_param(acc, budget, sizeof budget);
  oq_engine eng = oq_db_engine(db);
  bool crdb = eng == OQ_ENGINE_COCKROACH;
  if (lock_args)
    oq__db_claim_next_locked(db, oq__sql(eng, OQ__SQL_KEY_LOCK), 3, lock_args);
  else
    oq__db_claim_next(db);
  oq_err e;
  if (!r) {
    const char *params[4] = {oq_session_id(s), qarr, lim, budget};
    e = oq__db_query_prepared_retry(
        db, oq__sql(eng, lock_args ? OQ__SQL_CLAIM_KEYED : OQ__SQL_CLAIM),
        crdb ? 3 : 4, params, add_row, acc, NULL);
  } else {
    snprintf(lo, sizeof lo, "%d", r->lo);
    snprintf(hi, sizeof hi, "%d", r->hi);
    snprintf(age, sizeof age, "%d", orphan_ms);
    const char *params[7] = {oq_session_id(s), qarr, lim, lo, hi, age, budget};
    e = oq__db_query_prepared_retry(db,
                                    oq__sql(eng, lock_args
                                                     ? OQ__SQL_CLAIM_PARTS_KEYED
                                                     : OQ__SQL_CLAIM_PARTS),
                                    crdb ? 6 : 7, params, add_row, acc, NULL);
  }
  return session_gone(db, s, e);
}

static oq_err claim_stmt(oq_db *db, const oq_session *s, const char *qarr,
                         claim_acc *acc)
{
  return claim_in(db, s, qarr, NULL, 0, acc, NULL);
}

/*
 * On CockroachDB a claim over several queues is one statement per queue.
 * With queue = ANY(...) over several values the UPDATE's ordered LIMIT is
 * a top-k sort above the index scan, and UPDATE locks every row its scan
 * returns (CockroachDB docs, "UPDATE" and "SELECT FOR UPDATE": implicit
 * row-level locking of the initial row scan), so a claim would lock every
 * ready row of those queues. A one-queue claim walks onceq_items_ready
 * (queue, priority DESC, run_at) in order and stops after the LIMIT.
 * Priority then orders items within a queue (as in River, where each queue
 * is fetched on its own); the first queue rotates per call so a busy queue
 * cannot starve the others. PostgreSQL's LATERAL claim already walks the
 * index per queue in one statement.
 */
/* claim.c's memory on each connection (oq__db_slot). */
typedef struct claim_memory {
  unsigned turn;  /* per-queue claims: which queue goes first */
  bool per_queue; /* test hook: claim queue by queue on PG too */
  /* the queues with a concurrency limit (OQ__SQL_QUEUE_LIMITED), read at
   * most every LIMITED_REFRESH_MS */
  char limited[4096]; /* their names, each ending in NUL; kept here (the
                         slot is freed with free()) */
  size_t limited_len;
  bool limited_overflow; /* more than fit: treat every queue as limited */
  uint64_t limited_at_ms;
  bool limited_read;
  /* the keyed queues the last claim statements named (claim_acc.seen) */
  char keyed[1024];
  size_t keyed_len;
  unsigned keyed_turns;       /* keyed_turn: keyed queues first on odd calls */
  unsigned keyed_rot;         /* claim_keyed: which keyed queue goes first */
  void (*keyed_hook)(void *); /* test_hooks.h */
  void *keyed_hook_ud;
} claim_memory;

/* NULL when out of memory: the first queue goes first, nothing forced. */
static claim_memory *memory(oq_db *db)
{
  void **slot = oq__db_slot(db, OQ__DB_SLOT_CLAIM);
  if (!*slot)
    *slot = calloc(1, sizeof(claim_memory));
  return *slot;
}

unsigned oq__claim_turn(oq_db *db)
{
  claim_memory *m = memory(db);
  return m ? m->turn++ : 0;
}

bool oq__claim_per_queue(oq_db *db)
{
  claim_memory *m = memory(db);
  return (m && m->per_queue) || !oq_db_traits(db)->multi_queue_claim;
}

void oq__claim_keyed_hook(oq_db *db, void (*fn)(void *ud), void *ud)
{
  claim_memory *m = memory(db);
  if (m) {
    m->keyed_hook = fn;
    m->keyed_hook_ud = ud;
  }
}

void oq__claim_force_per_queue(oq_db *db, bool on)
{
  claim_memory *m = memory(db);
  if (m)
    m->per_queue = on;
}

static bool claim_per_queue(oq_db *db, size_t nqueues)
{
  return nqueues > 1 && oq__claim_per_queue(db);
}

/* *all: every queue had its statement (the claim did not fill first). */
static oq_err claim_each_queue(oq_db *db, const oq_session *s,
                               const char *const *queues, size_t nqueues,
                               claim_acc *acc, bool *all)
{
  size_t first = oq__claim_turn(db) % nqueues;
  oq_err e = OQ_OK;
  size_t i = 0;
  for (; i < nqueues && acc_room(acc) && e == OQ_OK; i++) {
    const char *one[1] = {queues[(first + i) % nqueues]};
    char *qarr = oq__text_array(one, 1);
    if (!qarr) {
      acc->nomem = true;
      break;
    }
    e = claim_stmt(db, s, qarr, acc);
    free(qarr);
  }
  *all = i == nqueues;
  return e;
}

/*
 * Queues with a concurrency limit (onceq/queues.h). The fast claim skips
 * them in the database (QUEUES_OPEN), so a new limit holds at once; which
 * ones to claim here is read at most every LIMITED_REFRESH_MS per
 * connection, so a queue newly limited is claimed again within that time,
 * and a queue without controls pays one small read per interval, not per
 * claim.
 */
#define LIMITED_REFRESH_MS 500

static void limited_free(claim_memory *m)
{
  m->limited_len = 0;
  m->limited_overflow = false;
}

static oq_err add_limited(void *ud, int ncols, const char *const *v)
{
  claim_memory *m = ud;
  if (ncols < 1 || !v[0])
    return OQ_OK;
  size_t len = strlen(v[0]) + 1;
  if (len > sizeof m->limited - m->limited_len) {
    m->limited_overflow = true;
    return OQ_OK;
  }
  memcpy(m->limited + m->limited_len, v[0], len);
  m->limited_len += len;
  return OQ_OK;
}

static oq_err limited_refresh(oq_db *db, claim_memory *m)
{
  uint64_t now = oq_monotonic_ms();
  if (m->limited_read && now - m->limited_at_ms < LIMITED_REFRESH_MS)
    return OQ_OK;
  limited_free(m);
  oq_err e =
      oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_LIMITED),
                         0, NULL, add_limited, m, NULL);
  if (e != OQ_OK) {
    limited_free(m);
    return e;
  }
  m->limited_read = true;
  m->limited_at_ms = now;
  return OQ_OK;
}

static bool limited_has(const claim_memory *m, const char *queue)
{
  if (m->limited_overflow)
    return true; /* the lock statement finds out */
  for (size_t i = 0; i < m->limited_len; i += strlen(m->limited + i) + 1)
    if (strcmp(m->limited + i, queue) == 0)
      return true;
  return false;
}

/* The lock statement's row: the concurrency limit, the whole tokens of
 * the rate limit (-1: none of either). */
typedef struct limits_row {
  long max;
  long tokens;
  bool found;
} limits_row;

static oq_err read_limits(void *ud, int ncols, const char *const *v)
{
  limits_row *r = ud;
  if (ncols < 2)
    return OQ_ERR_SQL;
  r->max = v[0] ? strtol(v[0], NULL, 10) : -1;
  r->tokens = v[1] ? strtol(v[1], NULL, 10) : -1;
  r->found = true;
  return OQ_OK;
}

static oq_err read_long(void *ud, int ncols, const char *const *v)
{
  long *out = ud;
  if (ncols > 0 && v[0])
    *out = strtol(v[0], NULL, 10);
  return OQ_OK;
}

/* At most this many orphan range statements per claim: orphans are a
 * backstop, not the common path. */
#define MAX_ORPHAN_RUNS 8

/* Forget the items an earlier, rolled-back run of a claim transaction
 * added after the first n0 (oq_db_transact runs it again on a restart). */
static void acc_rewind(claim_acc *acc, size_t n0, int64_t taken0)
{
  for (size_t i = n0; i < acc->n; i++) {
    free(acc->items[i].queue);
    free(acc->items[i].payload);
    free(acc->items[i].ordering_key);
    memset(&acc->items[i], 0, sizeof acc->items[i]);
  }
  acc->n = n0;
  acc->taken_bytes = taken0;
}

typedef struct limited_tx {
  const oq_session *s;
  const char *queue;
  claim_acc *acc;
  size_t n0;      /* acc->n before the transaction */
  int64_t taken0; /* acc->taken_bytes before it */
} limited_tx;

/* One limited queue's claim, as one transaction (oq_db_transact runs it
 * again on a restart): lock its control row, count its claimed items
 * (every session's, reaped or not yet), claim at most the rest. */
static oq_err limited_body(oq_db *db, void *ud)
{
  limited_tx *t = ud;
  claim_acc *acc = t->acc;
  acc_rewind(acc, t->n0, t->taken0);
  oq_engine eng = oq_db_engine(db);
  const char *q1[1] = {t->queue};
  limits_row lim_row = {-1, -1, false};
  long running = 0;
  oq_err e = oq_db_query(db, oq__sql(eng, OQ__SQL_QUEUE_LIMIT_LOCK), 1, q1,
                         read_limits, &lim_row);
  if (e != OQ_OK || !lim_row.found)
    return e; /* no limit any more (or paused): the next claim sees it */
  if (eng == OQ_ENGINE_POSTGRES) {
    /* the key locks as well (keyed_stmt): while a limit is set or lifted,
     * a claim of the queue may run on either path */
    char last[16];
    snprintf(last, sizeof last, "%d", OQ_PARTS_SLOTS / OQ_KEY_LOCK_SLOTS - 1);
    const char *lock[4] = {NULL, t->queue, "0", last};
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_KEY_LOCK), 4, lock, NULL, NULL);
    if (e != OQ_OK)
      return e;
  }
  size_t room = acc->cap - acc->n;
  if (lim_row.max >= 0) {
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_QUEUE_RUNNING), 1, q1, read_long,
                    &running);
    if (e != OQ_OK || running >= lim_row.max)
      return e;
    if ((size_t)(lim_row.max - running) < room)
      room = (size_t)(lim_row.max - running);
  }
  if (lim_row.tokens >= 0 && (size_t)lim_row.tokens < room)
    room = (size_t)lim_row.tokens; /* the token bucket's whole tokens */
  if (room == 0)
    return OQ_OK; /* the refill is committed; nothing to claim yet */
  char *qarr = oq__text_array(q1, 1);
  if (!qarr)
    return OQ_ERR_NOMEM;
  char lim[24], budget[24];
  snprintf(lim, sizeof lim, "%zu", room);
  budget_param(acc, budget, sizeof budget);
  const char *params[4] = {oq_session_id(t->s), qarr, lim, budget};
  e = oq_db_query(db, oq__sql(eng, OQ__SQL_CLAIM_LIMITED),
                  eng == OQ_ENGINE_COCKROACH ? 3 : 4, params, add_row, acc);
  free(qarr);
  for (size_t i = t->n0; i < acc->n; i++)
    acc->items[i].limited = true;
  if (e == OQ_OK && lim_row.tokens >= 0 && acc->n > t->n0) {
    char took[24];
    snprintf(took, sizeof took, "%zu", acc->n - t->n0);
    const char *p2[2] = {t->queue, took};
    e = oq_db_exec(db, oq__sql(eng, OQ__SQL_QUEUE_RATE_TAKE), 2, p2, NULL);
  }
  return e;
}

/* Claim from the limited queues among queues, appending to acc. */
static oq_err claim_limited(oq_db *db, const oq_session *s,
                            const char *const *queues, size_t nqueues,
                            claim_acc *acc)
{
  claim_memory *m = memory(db);
  if (!m || !acc_room(acc))
    return OQ_OK;
  oq_err e = limited_refresh(db, m);
  for (size_t i = 0; i < nqueues && e == OQ_OK && acc_room(acc); i++) {
    if (!limited_has(m, queues[i]))
      continue;
    limited_tx t = {s, queues[i], acc, acc->n, acc->taken_bytes};
    e = session_gone(db, s, oq_db_transact(db, limited_body, &t));
    if (e == OQ_ERR_NOMEM)
      acc->nomem = true;
  }
  return e;
}

/*
 * Queues with keyed items (ordering keys, docs/enqueue.md), on PostgreSQL:
 * each claim statement of such a queue is an implicit transaction that
 * starts with the queue's key lock (OQ__SQL_KEY_LOCK, pipelined ahead of
 * the claim: oq__db_claim_next_locked, one round trip) and commits at its
 * Sync. The lock is taken before the claim's snapshot, so under READ
 * COMMITTED two claims that may take heads of the queue's keys never run
 * at once, and each sees what the one before it committed: no key gets two
 * items claimed around a late commit of a lower enqueue_seq. It is the
 * transaction's only lock before the claim's own: its holder waits on
 * nothing that waits for it. Under SERIALIZABLE the snapshot is the
 * transaction's and predates the wait; the database aborts one of two
 * such claims instead (40001), and the statement runs again.
 */
typedef struct keyed_run {
  /* partitioned claims: the session's slot runs, then the orphans' */
  bool parts;
  const oq__slot_range *own, *orphans;
  size_t nown, first, norphan;
  int orphan_ms;
} keyed_run;

/* One keyed claim statement of queue under its key lock; r: a slot run
 * (partitioned), or NULL. */
static oq_err keyed_stmt(oq_db *db, const oq_session *s, const char *queue,
                         const oq__slot_range *r, int orphan_ms, claim_acc *acc)
{
  const char *q1[1] = {queue};
  char *qarr = oq__text_array(q1, 1);
  if (!qarr)
    return OQ_ERR_NOMEM;
  claim_memory *m = memory(db);
  if (m && m->keyed_hook)
    m->keyed_hook(m->keyed_hook_ud);
  char s0[16], s1[16]; /* the key lock stripes of the slots looked in */
  snprintf(s0, sizeof s0, "%d", r ? r->lo / OQ_KEY_LOCK_SLOTS : 0);
  snprintf(s1, sizeof s1, "%d",
           (r ? r->hi - 1 : OQ_PARTS_SLOTS - 1) / OQ_KEY_LOCK_SLOTS);
  const char *lock_args[3] = {queue, s0, s1};
  oq_err e = claim_in(db, s, qarr, r, orphan_ms, acc, lock_args);
  free(qarr);
  return e;
}

/* Claim the keyed queues the claim statements left (acc->keyed), each
 * under its key lock; run carries the partitioned claim's slot runs. */
static oq_err claim_keyed(oq_db *db, const oq_session *s, claim_acc *acc,
                          const keyed_run *run)
{
  oq_err e = OQ_OK;
  /* the first one turns, so a keyed queue that always fills the claim
   * does not starve the others */
  claim_memory *m = memory(db);
  size_t left = acc->nkeyed - acc->keyed_done;
  if (m && left > 1) {
    size_t r = m->keyed_rot++ % left;
    char **k = acc->keyed + acc->keyed_done;
    for (size_t i = 0; i < r; i++) { /* rotate left by one, r times */
      char *first = k[0];
      memmove(k, k + 1, (left - 1) * sizeof *k);
      k[left - 1] = first;
    }
  }
  for (; acc->keyed_done < acc->nkeyed && e == OQ_OK && acc_room(acc);
       acc->keyed_done++) {
    const char *queue = acc->keyed[acc->keyed_done];
    if (!run->parts) {
      e = keyed_stmt(db, s, queue, NULL, 0, acc);
      continue;
    }
    for (size_t i = 0; i < run->nown && acc_room(acc) && e == OQ_OK; i++)
      e = keyed_stmt(db, s, queue, &run->own[(run->first + i) % run->nown], 0,
                     acc);
    for (size_t i = 0;
         i < run->norphan && i < MAX_ORPHAN_RUNS && acc_room(acc) && e == OQ_OK;
         i++)
      e = keyed_stmt(db, s, queue, &run->orphans[i], run->orphan_ms, acc);
  }
  if (e == OQ_ERR_NOMEM)
    acc->nomem = true;
  return e;
}

/* Items claimed by an earlier statement of a multi-statement claim are ours
 * now: hand them over even when a later statement failed (its error shows
 * up again on the next call). Unless the session is gone: its reap freed
 * those items for others, so running them would only duplicate effects. */
static oq_err claim_finish(oq_db *db, const oq_session *s, claim_acc *acc,
                           oq_err e, oq_item **items, size_t *n)
{
  if (acc->nomem) {
    /* the statement committed: rows past the one that could not be
     * copied are claimed and not returned. Handing over only the copied
     * ones would hide that from the caller, who must sweep (item.h) */
    oq_items_free(acc->items, acc->n);
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL,
                       "out of memory while reading the claim's rows; "
                       "what it claimed stays claimed by session %s until a "
                       "reconciliation sweep releases it",
                       oq_session_id(s));
  }
  if (e != OQ_OK && (acc->n == 0 || e == OQ_ERR_SESSION_LOST)) {
    oq_items_free(acc->items, acc->n);
    return e;
  }
  if (e != OQ_OK) {
    OQ_LOG(OQ_LOG_WARN, oq_session_id(s), NULL,
           "claim stopped after %zu item(s): %s", acc->n, oq_db_errmsg(db));
    oq__db_clear(db);
  }
  if (acc->n == 0) {
    free(acc->items);
    acc->items = NULL;
  }
  *items = acc->items;
  *n = acc->n;
  return OQ_OK;
}

/*
 * Which goes first, the keyed queues or the others? The claim statements
 * take the queues without keys and name the keyed ones (claim_keyed claims
 * those after them), so a queue without keys that always fills the claim
 * would starve a keyed one. Every other call therefore starts with the
 * keyed queues the last claim statements named (claim_memory.keyed), among
 * those asked for: each side gets the first pick in turn, as the per-queue
 * claims rotate their first queue. True when acc->keyed got any.
 */
static bool keyed_turn(oq_db *db, const char *const *queues, size_t nqueues,
                       claim_acc *acc)
{
  claim_memory *m = memory(db);
  if (!m || m->keyed_len == 0)
    return false;
  for (size_t i = 0; i < m->keyed_len; i += strlen(m->keyed + i) + 1)
    for (size_t k = 0; k < nqueues; k++)
      if (strcmp(m->keyed + i, queues[k]) == 0)
        add_keyed(acc, queues[k]);
  if (acc->nkeyed > 0 && (++m->keyed_turns & 1) == 0)
    keyed_free(acc); /* the others' turn; the statements name them again */
  return acc->nkeyed > 0;
}

/* Remember the keyed queues this call's claim statements named: all of
 * them when a statement covered every queue asked for (exact), else added
 * to those remembered (a queue whose statement did not run this time may
 * still be keyed). */
static void keyed_remember(oq_db *db, const claim_acc *acc, bool exact)
{
  claim_memory *m = memory(db);
  if (!m)
    return;
  if (exact) {
    memcpy(m->keyed, acc->seen, acc->seen_len);
    m->keyed_len = acc->seen_len;
    return;
  }
  for (size_t i = 0; i < acc->seen_len; i += strlen(acc->seen + i) + 1) {
    const char *q = acc->seen + i;
    bool known = false;
    for (size_t k = 0; k < m->keyed_len && !known;
         k += strlen(m->keyed + k) + 1)
      known = strcmp(m->keyed + k, q) == 0;
    size_t len = strlen(q) + 1;
    if (!known && len <= sizeof m->keyed - m->keyed_len) {
      memcpy(m->keyed + m->keyed_len, q, len);
      m->keyed_len += len;
    }
  }
}

oq_err oq_claim(oq_db *db, const oq_session *s, const char *const *queues,
                size_t nqueues, int max, oq_item **items, size_t *n)
{
  return oq_claim_bytes(db, s, queues, nqueues, max, 0, items, n);
}

oq_err oq_claim_bytes(oq_db *db, const oq_session *s, const char *const *queues,
                      size_t nqueues, int max, int64_t max_bytes,
                      oq_item **items, size_t *n)
{
  *items = NULL;
  *n = 0;
  oq__db_clear(db);
  oq_err e = claim_precheck(db, s, queues, nqueues, max);
  if (e != OQ_OK)
    return e;
  claim_acc acc = {.items = calloc((size_t)max, sizeof(oq_item)),
                   .cap = (size_t)max,
                   .budget_bytes = max_bytes > 0 ? max_bytes : 0};
  if (!acc.items)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const keyed_run anywhere = {0};
  if (keyed_turn(db, queues, nqueues, &acc))
    e = claim_keyed(db, s, &acc, &anywhere);
  if (e == OQ_OK && !acc.nomem && acc_room(&acc)) {
    bool exact = true;
    if (claim_per_queue(db, nqueues)) {
      e = claim_each_queue(db, s, queues, nqueues, &acc, &exact);
    } else {
      char *qarr = oq__text_array(queues, nqueues);
      if (qarr)
        e = claim_stmt(db, s, qarr, &acc);
      else
        acc.nomem = true;
      free(qarr);
    }
    if (e == OQ_OK)
      keyed_remember(db, &acc, exact);
  }
  if (e == OQ_OK && !acc.nomem)
    e = claim_keyed(db, s, &acc, &anywhere);
  keyed_free(&acc);
  if (e == OQ_OK && !acc.nomem)
    e = claim_limited(db, s, queues, nqueues, &acc);
  return claim_finish(db, s, &acc, e, items, n);
}

/* Claim up to acc's room from slots [r->lo, r->hi), items ready for at
 * least orphan_ms, appending to acc. */
static oq_err claim_range(oq_db *db, const oq_session *s, const char *qarr,
                          const oq__slot_range *r, int orphan_ms,
                          claim_acc *acc)
{
  return claim_in(db, s, qarr, r, orphan_ms, acc, NULL);
}

oq_err oq_parts_claim(oq_db *db, const oq_session *s, oq_parts *p,
                      const char *const *queues, size_t nqueues, int max,
                      oq_item **items, size_t *n)
{
  return oq_parts_claim_bytes(db, s, p, queues, nqueues, max, 0, items, n);
}

oq_err oq_parts_claim_bytes(oq_db *db, const oq_session *s, oq_parts *p,
                            const char *const *queues, size_t nqueues, int max,
                            int64_t max_bytes, oq_item **items, size_t *n)
{
  *items = NULL;
  *n = 0;
  oq__db_clear(db);
  oq_err e = claim_precheck(db, s, queues, nqueues, max);
  if (e != OQ_OK)
    return e;
  if (strcmp(oq__parts_session(p), oq_session_id(s)) != 0) {
    e = oq_parts_rebalance(db, s, p); /* first use with this session */
    if (e != OQ_OK)
      return e;
  }
  size_t nown = 0, first = 0, norphan = 0;
  const oq__slot_range *orphans = NULL;
  int orphan_ms = 0;
  const oq__slot_range *own =
      oq__parts_runs(p, &nown, &first, &orphans, &norphan, &orphan_ms);
  if (nown == 0 && norphan == 0)
    return OQ_OK; /* an idle member: nothing of ours to look at */
  char *qarr = oq__text_array(queues, nqueues);
  claim_acc acc = {.items = calloc((size_t)max, sizeof(oq_item)),
                   .cap = (size_t)max,
                   .budget_bytes = max_bytes > 0 ? max_bytes : 0};
  if (!qarr || !acc.items) {
    free(qarr);
    free(acc.items);
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  const keyed_run parts = {.parts = true,
                           .own = own,
                           .nown = nown,
                           .first = first,
                           .orphans = orphans,
                           .norphan = norphan,
                           .orphan_ms = orphan_ms};
  if (keyed_turn(db, queues, nqueues, &acc))
    e = claim_keyed(db, s, &acc, &parts);
  bool looked = false;
  for (size_t i = 0; i < nown && acc_room(&acc) && e == OQ_OK;
       i++, looked = true)
    e = claim_range(db, s, qarr, &own[(first + i) % nown], 0, &acc);
  for (size_t i = 0;
       i < norphan && i < MAX_ORPHAN_RUNS && acc_room(&acc) && e == OQ_OK; i++)
    e = claim_range(db, s, qarr, &orphans[i], orphan_ms, &acc);
  free(qarr);
  if (e == OQ_OK && looked) /* each range's statement names every queue */
    keyed_remember(db, &acc, true);
  if (e == OQ_OK && !acc.nomem)
    e = claim_keyed(db, s, &acc, &parts);
  keyed_free(&acc);
  /* a limited queue is claimed in any part: its limit is fleet-wide */
  if (e == OQ_OK && !acc.nomem)
    e = claim_limited(db, s, queues, nqueues, &acc);
  return claim_finish(db, s, &acc, e, items, n);
}

void oq_items_free(oq_item *items, size_t n)
{
  if (!items)
    return;
  for (size_t i = 0; i < n; i++) {
    free(items[i].queue);
    free(items[i].payload);
    free(items[i].ordering_key);
  }
  free(items);
}
