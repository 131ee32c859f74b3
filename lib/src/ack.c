/*
 * ack.c: acknowledging, failing and releasing claimed items (ack.h).
 *
 * The only decision about who may acknowledge is `claim = $session` inside
 * the ack transaction. An ambiguous commit is reconciled from the database
 * (docs/design.md §3): item gone, neither dead nor cancelled ->
 * acknowledged; still ours -> run the transaction again; otherwise (dead
 * or cancelled included) -> claim lost. A check that finds no row while
 * the item is still ours (read back after the rollback) means the
 * handler's own writes deleted or unclaimed it: a failed attempt
 * (OQ_ERR_CALLBACK), not a lost claim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct ack_ctx {
  const oq_session *s;
  const oq_item *item;
  oq_ack_fn fn;
  void *ud;
  const oq_ack_opts *opts;
} ack_ctx;

/* At most this many remembered (the oldest forgotten first): a forgotten
 * unknown outcome is only reported as lost instead of done, never
 * acknowledged twice (the claim check decides that). Small, because every
 * ack of a batch looks its items up here. */
#define AMBIGUOUS_MAX 256

/* ack.c's memory on each connection (oq__db_slot): the items whose ack
 * gave up with an unknown commit outcome (oq_ack and the batches), oldest
 * first; one allocation. */
typedef struct ack_memory {
  size_t n;
  char ids[AMBIGUOUS_MAX][OQ_UUID_LEN + 1];
} ack_memory;

void oq__ack_set_ambiguous(oq_db *db, const char *item_id)
{
  void **slot = oq__db_slot(db, OQ__DB_SLOT_ACK);
  if (!*slot)
    *slot = calloc(1, sizeof(ack_memory));
  ack_memory *m = *slot;
  if (!m)
    return;
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->ids[i], item_id) == 0)
      return;
  if (m->n >= AMBIGUOUS_MAX) {
    memmove(m->ids[0], m->ids[1], (m->n - 1) * sizeof m->ids[0]);
    m->n--;
  }
  snprintf(m->ids[m->n++], sizeof m->ids[0], "%s", item_id);
}

bool oq__ack_take_ambiguous(oq_db *db, const char *item_id)
{
  ack_memory *m = *oq__db_slot(db, OQ__DB_SLOT_ACK);
  if (!m)
    return false;
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->ids[i], item_id) == 0) {
      memmove(m->ids[i], m->ids[i + 1], (m->n - i - 1) * sizeof m->ids[0]);
      m->n--;
      return true;
    }
  return false;
}

static oq_err claim_lost(oq_db *db, const char *item, const char *session)
{
  return oq__db_fail(db, OQ_ERR_CLAIM_LOST, NULL,
                     "item %s is no longer claimed by session %s (reaped, "
                     "cancelled or acknowledged elsewhere); its effects "
                     "were rolled back",
                     item, session);
}

oq_err oq__touched_own_row(oq_db *db, const char *item)
{
  return oq__db_fail(
      db, OQ_ERR_CALLBACK, NULL,
      "item %s: the handler touched its own onceq_items row (deleted it or "
      "changed its claim), so the claim-checked ack found no row to delete; "
      "its effects were rolled back and the attempt failed. A handler must "
      "not write the queue's own rows: keep its state in a table of its "
      "own, and fail the attempt to run the item again",
      item);
}

/* The ack transaction's body: the handler's writes, then the claim check. */
static oq_err ack_tx(oq_db *db, void *arg)
{
  ack_ctx *c = arg;
  if (c->fn) {
    oq_err e = c->fn(db, c->item, c->ud);
    if (e != OQ_OK) {
      if (!oq_db_errmsg(db)[0])
        oq__db_fail(db, e, NULL, "ack handler for item %s failed: %s",
                    c->item->id, oq_strerror(e));
      return e;
    }
  }
  long n = 0;
  oq_err e;
  const char *sid = oq_session_id(c->s);
  /* the claim check, plus history and the kept result (schema v3) */
  char *res = oq__result_bounded(c->opts ? c->opts->result : NULL);
  const char *params[5] = {
      c->item->id, sid, res, c->opts && c->opts->history ? "true" : "false",
      c->opts && c->opts->result_truncated ? "true" : "false"};
  /* the transaction's last statement: planned once, with the claim's
   * settings (db_tx.h), so not for a table as it was at this connection's
   * sixth ack, perhaps of one row (it_lib_cold_plan) */
  oq__db_plan_next(db);
  e = oq__db_query_prepared(db, oq__sql(oq_db_engine(db), OQ__SQL_ACK), 5,
                            params, NULL, NULL, &n);
  free(res);
  if (e != OQ_OK)
    return e;
  if (n != 1)
    return claim_lost(db, c->item->id, sid);
  return OQ_OK;
}

typedef struct claim_of {
  bool found;
  char claim[OQ_UUID_LEN + 1]; /* "" when unclaimed */
} claim_of;

static oq_err read_claim(void *ud, int ncols, const char *const *vals)
{
  claim_of *c = ud;
  c->found = true;
  snprintf(c->claim, sizeof c->claim, "%s",
           ncols > 0 && vals[0] ? vals[0] : "");
  return OQ_OK;
}

/*
 * The claim check found no row. After the rollback, a fresh statement sees
 * the row as it was before the transaction: still claimed by us means
 * nobody else took it, so the transaction's own writes (the handler's)
 * deleted or unclaimed it. That is the handler's failure (an attempt that
 * counts), not a lost claim: dropping the job would let the sweep release
 * it with its attempt uncounted, and the item would run forever (issue 20).
 * *ours is false when the read fails (the caller keeps its verdict).
 */
static void still_ours(oq_db *db, const char *item, const char *sid, bool *ours)
{
  claim_of co = {0};
  const char *params[1] = {item};
  *ours = false;
  if (oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_ITEM_CLAIM_OF), 1,
                  params, read_claim, &co) == OQ_OK)
    *ours = co.found && strcmp(co.claim, sid) == 0;
  else
    OQ_LOG(OQ_LOG_WARN, sid, item,
           "claim check found no row; cannot read the item's claim back "
           "(%s)",
           oq_db_errmsg(db));
}

/* The claim's identity parameter: its claimed_at in microseconds, or NULL
 * (match any claim of the session) for an item built by hand. */
static const char *claim_us(const oq_item *item, char *buf, size_t len)
{
  if (item->claimed_at_us == 0)
    return NULL;
  snprintf(buf, len, "%lld", (long long)item->claimed_at_us);
  return buf;
}

static bool out_of_time(const oq_retry_policy *p, uint64_t start)
{
  uint64_t now = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
  return p->max_total_ms > 0 && now - start >= (uint64_t)p->max_total_ms;
}

oq_err oq_ack(oq_db *db, const oq_session *s, const oq_item *item, oq_ack_fn fn,
              void *ud, const oq_ack_opts *opts, bool *reconciled)
{
  ack_ctx c = {s, item, fn, ud, opts};
  const char *sid = oq_session_id(s);
  const oq_retry_policy *p = oq__db_policy(db);
  uint64_t start = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
  /* called again after OQ_ERR_AMBIGUOUS for this item: reconcile before
   * anything runs again (ack.h) */
  bool ambiguous = oq__ack_take_ambiguous(db, item->id);
  oq_err e = OQ_OK;
  if (reconciled)
    *reconciled = false;
  for (int round = 1;; round++) {
    if (!oq_db_connected(db)) {
      e = oq__db_reconnect_patiently(db);
      if (e != OQ_OK)
        goto give_up;
    }
    if (ambiguous) {
      claim_of co = {0};
      const char *params[1] = {item->id};
      e = oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_ITEM_CLAIM_OF), 1,
                      params, read_claim, &co);
      if (e == OQ_ERR_CONN || e == OQ_ERR_RETRY)
        goto again;
      if (e != OQ_OK)
        return e;
      if (reconciled)
        *reconciled = true;
      if (!co.found) {
        OQ_LOG(OQ_LOG_INFO, sid, item->id,
               "ambiguous commit reconciled: item is gone, acknowledged");
        oq__db_clear(db);
        return OQ_OK;
      }
      if (strcmp(co.claim, sid) != 0) {
        OQ_LOG(OQ_LOG_WARN, sid, item->id,
               "ambiguous commit reconciled: claim lost");
        return claim_lost(db, item->id, sid);
      }
      OQ_LOG(OQ_LOG_INFO, sid, item->id,
             "ambiguous commit reconciled: still claimed, acking again");
    }
    e = oq_db_transact(db, ack_tx, &c);
    if (e == OQ_OK)
      return OQ_OK;
    if (e == OQ_ERR_AMBIGUOUS) {
      OQ_LOG(OQ_LOG_WARN, sid, item->id, "%s", oq_db_errmsg(db));
      ambiguous = true;
      goto again;
    }
    if (e == OQ_ERR_CLAIM_LOST) {
      char lost[OQ_ERRBUF_SIZE];
      snprintf(lost, sizeof lost, "%s", oq_db_errmsg(db));
      bool ours = false;
      still_ours(db, item->id, sid, &ours);
      if (ours)
        return oq__touched_own_row(db, item->id);
      /* After an ambiguous round the earlier commit may have landed while
       * we re-ran: a 0-row DELETE then means "acknowledged", so
       * reconcile. */
      if (ambiguous)
        goto again;
      return oq__db_fail(db, OQ_ERR_CLAIM_LOST, NULL, "%s", lost);
    }
    if (e != OQ_ERR_CONN)
      return e;
    /* Lost before COMMIT was sent: nothing committed; run it again. */
  again:
    if (out_of_time(p, start) || oq__db_given_up(db))
      goto give_up;
    if (round > 1)
      oq__policy_sleep(p, oq_backoff_delay_ms(p, round, oq__db_rng(db)));
  }
give_up:
  if (ambiguous) {
    oq__ack_set_ambiguous(db, item->id);
    return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL,
                       "ack of item %s: commit outcome still unknown (%s); "
                       "call oq_ack again once the database is reachable",
                       item->id, oq_db_errmsg(db));
  }
  return e;
}

/* Text array literal of ids; UUIDs need no quoting. */
static char *id_array(const char *const *ids, size_t n)
{
  return oq__text_array(ids, n);
}

/* An id and where it stands in the caller's array. */
typedef struct id_pos {
  const char *id;
  size_t i;
} id_pos;

typedef struct batch_acc {
  const char *const *ids;
  size_t n;
  bool *flags;   /* acked[] or "still ours"[] */
  bool *seen;    /* present in the table (reconciliation only) */
  id_pos *order; /* ids sorted: one lookup per returned row is a binary
                  * search, not a scan (a batch can hold 1000s) */
} batch_acc;

static int by_id(const void *x, const void *y)
{
  return strcmp(((const id_pos *)x)->id, ((const id_pos *)y)->id);
}

/* Fill a->order; false on out-of-memory. */
static bool batch_acc_index(batch_acc *a)
{
  a->order = malloc(a->n * sizeof *a->order);
  if (!a->order)
    return false;
  for (size_t i = 0; i < a->n; i++)
    a->order[i] = (id_pos){a->ids[i], i};
  qsort(a->order, a->n, sizeof *a->order, by_id);
  return true;
}

static long find_id(const batch_acc *a, const char *id)
{
  id_pos key = {id, 0};
  const id_pos *hit = bsearch(&key, a->order, a->n, sizeof *a->order, by_id);
  return hit ? (long)hit->i : -1;
}

static oq_err mark_acked(void *ud, int ncols, const char *const *vals)
{
  batch_acc *a = ud;
  long i = ncols > 0 && vals[0] ? find_id(a, vals[0]) : -1;
  if (i >= 0)
    a->flags[i] = true;
  return OQ_OK;
}

static oq_err mark_present(void *ud, int ncols, const char *const *vals)
{
  batch_acc *a = ud;
  long i = ncols > 1 && vals[0] ? find_id(a, vals[0]) : -1;
  if (i >= 0) {
    a->seen[i] = true;
    a->flags[i] = vals[1] && vals[1][0] == 't';
  }
  return OQ_OK;
}

static oq_err batch_delete(oq_db *db, const oq_session *s,
                           const char *const *ids, size_t n, bool *acked,
                           const oq_ack_opts *opts)
{
  char *arr = id_array(ids, n);
  if (!arr)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  bool history = opts && opts->history;
  /* per-item results (opts->results), else opts->result for every item */
  char *res = oq__results_array(opts ? opts->results : NULL,
                                opts ? opts->result : NULL, n);
  char *cut =
      oq__flags_array(opts && opts->results ? opts->results_truncated : NULL,
                      opts && !opts->results && opts->result_truncated, n);
  const char *params[5] = {arr, oq_session_id(s), res,
                           history ? "true" : "false", cut};
  batch_acc a = {ids, n, acked, NULL, NULL};
  if (!res || !cut || !batch_acc_index(&a)) {
    free(res);
    free(cut);
    free(arr);
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  /* planned once, with the claim's settings, as ack_tx's check; inside a
   * caller's transaction (nothing forbids it) unnamed, as a claim there */
  oq__db_claim_next(db);
  oq_err e = oq__db_query_prepared_retry(
      db, oq__sql(oq_db_engine(db), OQ__SQL_ACK_BATCH), 5, params, mark_acked,
      &a, NULL);
  free(a.order);
  free(res);
  free(cut);
  free(arr);
  return e;
}

/*
 * After a batch DELETE whose outcome is unknown: ids gone are acknowledged,
 * ids still ours are deleted again, the rest were lost.
 */
static oq_err batch_reconcile(oq_db *db, const oq_session *s,
                              const char *const *ids, size_t n, bool *acked,
                              const oq_ack_opts *opts)
{
  bool *ours = calloc(n, sizeof *ours);
  bool *seen = calloc(n, sizeof *seen);
  const char **again = calloc(n, sizeof *again);
  bool *again_acked = calloc(n, sizeof *again_acked);
  size_t *again_idx = calloc(n, sizeof *again_idx);
  const char **again_res = NULL; /* opts->results of again[] */
  bool *again_cut = NULL;
  oq_err e = OQ_OK;
  char *arr = NULL;
  if (!ours || !seen || !again || !again_acked || !again_idx) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  arr = id_array(ids, n);
  if (!arr) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  const char *params[2] = {arr, oq_session_id(s)};
  batch_acc a = {ids, n, ours, seen, NULL};
  if (!batch_acc_index(&a)) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  e = oq__db_query_retry(db,
                         oq__sql(oq_db_engine(db), OQ__SQL_ITEMS_CLAIMED_BY_US),
                         2, params, mark_present, &a, NULL);
  free(a.order);
  if (e != OQ_OK)
    goto out;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    acked[i] = !seen[i];
    if (seen[i] && ours[i]) {
      again[m] = ids[i];
      again_idx[m++] = i;
    }
  }
  if (m > 0) {
    /* per-item results follow their items into the shorter list */
    oq_ack_opts sub = opts ? *opts : (oq_ack_opts){0};
    if (opts && opts->results) {
      again_res = calloc(m, sizeof *again_res);
      again_cut = calloc(m, sizeof *again_cut);
      if (!again_res || !again_cut) {
        e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
        goto out;
      }
      for (size_t j = 0; j < m; j++) {
        again_res[j] = opts->results[again_idx[j]];
        again_cut[j] =
            opts->results_truncated && opts->results_truncated[again_idx[j]];
      }
      sub.results = again_res;
      sub.results_truncated = again_cut;
    }
    e = batch_delete(db, s, again, m, again_acked, opts ? &sub : NULL);
    if (e != OQ_OK)
      goto out;
    for (size_t j = 0; j < m; j++)
      acked[again_idx[j]] = again_acked[j];
  }
out:
  free(arr);
  free(again_res);
  free(again_cut);
  free(ours);
  free(seen);
  free(again);
  free(again_acked);
  free(again_idx);
  return e;
}

oq_err oq_ack_batch(oq_db *db, const oq_session *s, const char *const *ids,
                    size_t n, bool *acked, size_t *nacked,
                    const oq_ack_opts *opts)
{
  if (nacked)
    *nacked = 0;
  if (n == 0)
    return OQ_OK;
  memset(acked, 0, n * sizeof *acked);
  oq_err e = batch_delete(db, s, ids, n, acked, opts);
  const oq_retry_policy *p = oq__db_policy(db);
  uint64_t start = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
  for (int round = 1; e == OQ_ERR_CONN || e == OQ_ERR_AMBIGUOUS; round++) {
    OQ_LOG(OQ_LOG_WARN, oq_session_id(s), NULL,
           "batch ack outcome unknown, reconciling: %s", oq_db_errmsg(db));
    if (out_of_time(p, start) || oq__db_given_up(db))
      return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL,
                         "batch ack outcome still unknown (%s); call "
                         "oq_ack_batch again once the database is reachable",
                         oq_db_errmsg(db));
    if (round > 1)
      oq__policy_sleep(p, oq_backoff_delay_ms(p, round, oq__db_rng(db)));
    if (!oq_db_connected(db) && oq__db_reconnect_patiently(db) != OQ_OK)
      continue;
    e = batch_reconcile(db, s, ids, n, acked, opts);
  }
  if (e != OQ_OK)
    return e;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += acked[i];
  if (nacked)
    *nacked = k;
  return OQ_OK;
}

/* oq_fail with err already clean text */
static oq_err fail_with(oq_db *db, const oq_session *s, const oq_item *item,
                        const char *err, int delay_ms, oq_fail_outcome *outcome)
{
  char delay[24];
  if (delay_ms < 0) {
    oq_retry_policy ip = oq_retry_policy_item();
    delay_ms = oq_backoff_delay_ms(&ip, item->attempt, oq__db_rng(db));
  }
  snprintf(delay, sizeof delay, "%d", delay_ms);
  const char *sid = oq_session_id(s);
  char us[24];
  const char *ident = claim_us(item, us, sizeof us);
  const char *retry[5] = {item->id, sid, delay, err, ident};
  long n = 0;
  oq_engine eng = oq_db_engine(db);
  oq_err e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_FAIL_RETRY), 5, retry,
                                NULL, NULL, &n);
  if (e != OQ_OK)
    return e;
  if (n == 1) {
    if (outcome)
      *outcome = OQ_FAIL_RETRY;
    OQ_LOG(OQ_LOG_INFO, sid, item->id,
           "attempt %d/%d failed, retry in %d ms: %.300s", item->attempt,
           item->max_attempts, delay_ms, err);
    return OQ_OK;
  }
  const char *dead[4] = {item->id, sid, err, ident};
  e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_FAIL_DEAD), 4, dead, NULL,
                         NULL, &n);
  if (e != OQ_OK)
    return e;
  if (n != 1)
    return claim_lost(db, item->id, sid);
  if (outcome)
    *outcome = OQ_FAIL_DEAD;
  OQ_LOG(OQ_LOG_WARN, sid, item->id,
         "attempt %d/%d failed, attempts exhausted, dead-lettered: %.300s",
         item->attempt, item->max_attempts, err);
  return OQ_OK;
}

oq_err oq_fail(oq_db *db, const oq_session *s, const oq_item *item,
               const char *error, int delay_ms, oq_fail_outcome *outcome)
{
  /* last_error is a text column: a caller's bytes that are not UTF-8
   * would fail the statement and leave the item claimed (text.h) */
  char *err = oq__result_bounded(error ? error : "failed");
  if (!err)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  oq_err e = fail_with(db, s, item, err, delay_ms, outcome);
  free(err);
  return e;
}

oq_err oq_release(oq_db *db, const oq_session *s, const oq_item *items,
                  size_t n, size_t *nreleased)
{
  if (nreleased)
    *nreleased = 0;
  if (n == 0)
    return OQ_OK;
  const char **ids = calloc(n, sizeof *ids);
  const char **pairs = calloc(n, sizeof *pairs);
  char *buf = malloc(n * (OQ_UUID_LEN + 24));
  char *ida = NULL, *pairsa = NULL;
  oq_err e = OQ_OK;
  if (!ids || !pairs || !buf) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    char *p = buf + i * (OQ_UUID_LEN + 24);
    if (items[i].claimed_at_us)
      snprintf(p, OQ_UUID_LEN + 24, "%s@%lld", items[i].id,
               (long long)items[i].claimed_at_us);
    else
      snprintf(p, OQ_UUID_LEN + 24, "%s@*", items[i].id);
    ids[i] = items[i].id;
    pairs[i] = p;
  }
  ida = id_array(ids, n);
  pairsa = oq__text_array(pairs, n);
  if (!ida || !pairsa) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  const char *params[3] = {ida, oq_session_id(s), pairsa};
  long k = 0;
  e = oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_RELEASE), 3,
                         params, NULL, NULL, &k);
  if (e == OQ_OK && nreleased)
    *nreleased = (size_t)(k > 0 ? k : 0);
out:
  free(ida);
  free(pairsa);
  free(buf);
  free(pairs);
  free(ids);
  return e;
}

typedef struct claims_acc {
  oq_item *items;
  size_t n, cap;
} claims_acc;

static oq_err add_claim(void *ud, int ncols, const char *const *vals)
{
  claims_acc *a = ud;
  if (ncols < 2 || !vals[0])
    return OQ_OK;
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 16;
    oq_item *more = realloc(a->items, cap * sizeof *more);
    if (!more)
      return OQ_ERR_NOMEM;
    a->items = more;
    a->cap = cap;
  }
  oq_item *it = &a->items[a->n++];
  memset(it, 0, sizeof *it);
  snprintf(it->id, sizeof it->id, "%s", vals[0]);
  it->claimed_at_us = vals[1] ? strtoll(vals[1], NULL, 10) : 0;
  it->keyed = ncols > 2 && vals[2] && vals[2][0] == 't';
  return OQ_OK;
}

oq_err oq_session_claims_read(oq_db *db, const oq_session *s, oq_item **items,
                              size_t *n)
{
  *items = NULL;
  *n = 0;
  claims_acc a = {0};
  const char *params[1] = {oq_session_id(s)};
  oq_err e = oq__db_query_retry(
      db, oq__sql(oq_db_engine(db), OQ__SQL_CLAIMS_OF_SESSION), 1, params,
      add_claim, &a, NULL);
  if (e == OQ_ERR_NOMEM)
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  if (e != OQ_OK) {
    free(a.items);
    return e;
  }
  *items = a.items;
  *n = a.n;
  return OQ_OK;
}

/* ---- results (schema v3): bounding and the text[] of results ---------- */

/* Cut at a UTF-8 character boundary, past what the statements keep
 * (OQ_RESULT_MAX_CHARS characters of at most 4 bytes), so the server still
 * sees that it was longer and sets truncated. */
static size_t result_cut(const char *r)
{
  size_t len = strlen(r);
  size_t max = (size_t)OQ_RESULT_MAX_CHARS * 4 + 4;
  if (len <= max)
    return len;
  while (max > 0 && ((unsigned char)r[max] & 0xC0) == 0x80)
    max--;
  return max;
}

char *oq__result_bounded(const char *result)
{
  if (!result)
    return NULL;
  size_t len = result_cut(result);
  char *out = malloc(len + 1);
  if (out) /* clean text (text.h): what a text column accepts */
    oq_text_clean(out, len + 1, result, len);
  return out;
}

char *oq__flags_array(const bool *flags, bool all, size_t n)
{
  const char **v = malloc((n ? n : 1) * sizeof *v);
  if (!v)
    return NULL;
  for (size_t i = 0; i < n; i++)
    v[i] = (flags ? flags[i] : all) ? "t" : "f";
  char *out = oq__text_array(v, n); /* {"t","f"} reads as bool[] too */
  free(v);
  return out;
}

char *oq__results_array(const char *const *results, const char *all, size_t n)
{
  /* each result as clean, bounded text first (oq__result_bounded) */
  char **clean = calloc(n ? n : 1, sizeof *clean);
  if (!clean)
    return NULL;
  char *out = NULL;
  size_t len = 3;
  for (size_t i = 0; i < n; i++) {
    const char *r = results ? results[i] : all;
    if (!r) {
      len += 5;
      continue;
    }
    clean[i] = oq__result_bounded(r);
    if (!clean[i])
      goto done;
    len += 2 * strlen(clean[i]) + 3;
  }
  out = malloc(len);
  if (!out)
    goto done;
  size_t p = 0;
  out[p++] = '{';
  for (size_t i = 0; i < n; i++) {
    const char *r = clean[i];
    if (i)
      out[p++] = ',';
    if (!r) {
      memcpy(out + p, "NULL", 4);
      p += 4;
      continue;
    }
    out[p++] = '"';
    for (; *r; r++) {
      if (*r == '"' || *r == '\\')
        out[p++] = '\\';
      out[p++] = *r;
    }
    out[p++] = '"';
  }
  out[p++] = '}';
  out[p] = '\0';
done:
  for (size_t i = 0; i < n; i++)
    free(clean[i]);
  free(clean);
  return out;
}
