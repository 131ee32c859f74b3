/*
 * ack_many.c: several items acknowledged in one transaction (ack.h,
 * "Batches").
 *
 * A round is one transaction over the items still pending ("active"):
 * BEGIN, each active item's effects, the claim check, COMMIT. The check
 * (OQ__SQL_ACK_MANY) deletes the active ids still claimed by the
 * session and divides by zero unless it deleted all of them, so a batch
 * with a lost claim never commits anybody's effects. After a round that
 * failed, the verdicts say what to leave out of the next one:
 *  - an item's effects failed (not a restart, not a lost connection): that
 *    item is OQ_ACK_FAILED, the others run again;
 *  - the check failed (22012): the ids no longer ours are OQ_ACK_LOST; if
 *    every claim is still ours, an item's own effects deleted or unclaimed
 *    its row: the rest run one item per round, where that item is
 *    OQ_ACK_FAILED (a failed attempt, not a loss) and the others commit;
 *  - a restart (40001/40P01) or a connection lost before COMMIT: run the
 *    same round again after a backoff;
 *  - the COMMIT's outcome is unknown: reconcile per item (gone: done, it
 *    was acknowledged exactly once; still ours: pending; else lost).
 * Rounds stop when nothing is pending or the db's retry policy runs out.
 *
 * Next items (oq_ack_opts.next, oq_ack_many_sql on PostgreSQL): after the
 * check, a round claims each of its keys' next item (OQ__SQL_ACK_NEXT) in
 * the same transaction. The keys are the items' own (oq_item.ordering_key,
 * returned by the claim); only items built without theirs have them read
 * before the check (OQ__SQL_ACK_KEYS). All in the same
 * transaction; the items it returned are kept only once that round's
 * COMMIT succeeded. A round that rolled back claimed nothing; one whose
 * commit is unknown may have: next_unknown tells the caller to reconcile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct many {
  oq_db *db;
  const oq_session *s;
  const oq_item *items;
  size_t n;
  const oq_ack_opts *opts;
  oq_ack_result *res;
  oq_ack_fn fn; /* oq_ack_many */
  void *ud;
  const char *sql; /* oq_ack_many_sql */
  size_t *active;  /* indexes of this round's items */
  size_t m;
  char *ids;       /* text array of the active ids */
  char *results;   /* text array of their results (onceq_results, history) */
  char *cuts;      /* bool array: the caller cut that result (truncated) */
  long failed;     /* position: 0..m-1 an item, m the check, m+1 BEGIN/COMMIT */
  bool want_next;  /* opts->next asked, and the engine has the statement */
  char **kq, **kk; /* this round's keyed items: queue and key (owned) */
  size_t nk, capk;
  char *kq_arr, *kk_arr;    /* as text arrays, for OQ__SQL_ACK_NEXT */
  oq__item_rows round_next; /* what this round's OQ__SQL_ACK_NEXT claimed */
  oq__item_rows next;       /* what committed rounds claimed */
  bool next_unknown;        /* a round's next items may be claimed unheld */
  char slots_arr[6 * 1024]; /* opts->next_slots as an int4[] text (1,024
                              slots fit; more are left out), "":
                                any slot (NULL to the statement) */
} many;

/* One round over b->active; sets b->failed on a failure. */
typedef oq_err (*round_fn)(many *b);

/* The check also writes the history row (when asked) and the result row
 * of items that keep one (onceq_items.keep_result), in the same statement:
 * a result exists only when its ack committed. */
static const char *check_sql(const many *b)
{
  return oq__sql(oq_db_engine(b->db), OQ__SQL_ACK_MANY);
}

#define CHECK_NPARAMS 6

/* The check's parameters: ids, session, count, results, history, cuts. */
static void check_params(const many *b, const char *count, const char **p)
{
  p[0] = b->ids;
  p[1] = oq_session_id(b->s);
  p[2] = count;
  p[3] = b->results;
  p[4] = b->opts && b->opts->history ? "true" : "false";
  p[5] = b->cuts;
}

/* The round's id array and count; false when out of memory. */
static bool prepare_ids(many *b, char *count, size_t countlen)
{
  const char **ids = malloc((b->m ? b->m : 1) * sizeof *ids);
  if (!ids)
    return false;
  for (size_t k = 0; k < b->m; k++)
    ids[k] = b->items[b->active[k]].id;
  free(b->ids);
  b->ids = oq__text_array(ids, b->m);
  free(ids);
  snprintf(count, countlen, "%zu", b->m);
  return b->ids != NULL;
}

/* The round's result array: the caller's result for an item, else what its
 * effects returned (rows[k], may be NULL); false when out of memory. */
static bool prepare_results(many *b, char *const *rows)
{
  const char **res = malloc((b->m ? b->m : 1) * sizeof *res);
  if (!res)
    return false;
  bool *cut = calloc(b->m ? b->m : 1, sizeof *cut);
  if (!cut) {
    free(res);
    return false;
  }
  const oq_ack_opts *o = b->opts;
  for (size_t k = 0; k < b->m; k++) {
    size_t i = b->active[k];
    const char *given = o && o->results ? o->results[i] : o ? o->result : NULL;
    /* a flag goes with the caller's own result, not with a fallback row */
    cut[k] =
        given && (o->results ? o->results_truncated && o->results_truncated[i]
                             : o->result_truncated);
    /* else its statement's first row (the server bounds it) */
    res[k] = given ? given : rows ? rows[k] : NULL;
  }
  free(b->results);
  free(b->cuts);
  b->results = oq__results_array(res, NULL, b->m);
  b->cuts = oq__flags_array(cut, false, b->m);
  free(res);
  free(cut);
  return b->results != NULL && b->cuts != NULL;
}

/* ---- the callback round: oq_db_transact runs it, restarts included --- */

typedef struct cb_round {
  many *b;
  const char *count;
} cb_round;

static oq_err cb_body(oq_db *db, void *arg)
{
  cb_round *r = arg;
  many *b = r->b;
  b->failed = -1;
  for (size_t k = 0; k < b->m; k++) {
    const oq_item *it = &b->items[b->active[k]];
    oq_err e = b->fn(db, it, b->ud);
    if (e != OQ_OK) {
      if (!oq_db_errmsg(db)[0])
        oq__db_fail(db, e, NULL, "ack handler for item %s failed: %s", it->id,
                    oq_strerror(e));
      b->failed = (long)k;
      return e;
    }
  }
  /* read after the callbacks: one may have filled in its item's result */
  if (!prepare_results(b, NULL))
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const char *params[CHECK_NPARAMS];
  check_params(b, r->count, params);
  oq_err e = oq_db_query(db, check_sql(b), CHECK_NPARAMS, params, NULL, NULL);
  if (e != OQ_OK)
    b->failed = (long)b->m;
  return e;
}

static oq_err cb_round_run(many *b)
{
  char count[24];
  if (!prepare_ids(b, count, sizeof count))
    return oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
  cb_round r = {b, count};
  b->failed = -1;
  oq_err e = oq_db_transact(b->db, cb_body, &r);
  if (e != OQ_OK && b->failed < 0)
    b->failed = (long)b->m + 1; /* BEGIN or COMMIT */
  return e;
}

/* ---- next items ------------------------------------------------------- */

static void keys_clear(many *b)
{
  for (size_t i = 0; i < b->nk; i++) {
    free(b->kq[i]);
    free(b->kk[i]);
  }
  b->nk = 0;
  free(b->kq_arr);
  free(b->kk_arr);
  b->kq_arr = b->kk_arr = NULL;
}

/* A row of OQ__SQL_ACK_KEYS: (queue, ordering_key). */
static oq_err key_row(void *ud, int ncols, const char *const *v)
{
  many *b = ud;
  if (ncols < 2 || !v[0] || !v[1])
    return OQ_OK;
  if (b->nk == b->capk) {
    size_t cap = b->capk ? 2 * b->capk : 16;
    char **q = realloc(b->kq, cap * sizeof *q);
    if (!q)
      return OQ_ERR_NOMEM;
    b->kq = q;
    char **k = realloc(b->kk, cap * sizeof *k);
    if (!k)
      return OQ_ERR_NOMEM;
    b->kk = k;
    b->capk = cap;
  }
  char *q = strdup(v[0]);
  char *k = strdup(v[1]);
  if (!q || !k) {
    free(q);
    free(k);
    return OQ_ERR_NOMEM;
  }
  b->kq[b->nk] = q;
  b->kk[b->nk] = k;
  b->nk++;
  return OQ_OK;
}

/* The round's keys as its items carry them (oq_item.ordering_key, as the
 * claim returned it), so the round sends no OQ__SQL_ACK_KEYS: *all is
 * false when a keyed item came without its key (an item its caller built),
 * and then the database says. A key taken from an item the session no
 * longer holds costs nothing: the check fails, and the round with it. */
static oq_err keys_from_items(many *b, bool *all)
{
  *all = true;
  for (size_t k = 0; k < b->m; k++) {
    const oq_item *it = &b->items[b->active[k]];
    if (!it->keyed)
      continue;
    if (!it->ordering_key || !it->queue) {
      *all = false;
      keys_clear(b);
      return OQ_OK;
    }
    const char *v[2] = {it->queue, it->ordering_key};
    oq_err e = key_row(b, 2, v);
    if (e != OQ_OK)
      return e;
  }
  return OQ_OK;
}

/* OQ__SQL_ACK_NEXT's before hook: the keys read earlier in the round are
 * its parameters ($1 the session is set already). */
static oq_err next_params(void *ud, oq__pstmt *self)
{
  many *b = ud;
  free(b->kq_arr);
  free(b->kk_arr);
  b->kq_arr = oq__text_array((const char *const *)b->kq, b->nk);
  b->kk_arr = oq__text_array((const char *const *)b->kk, b->nk);
  if (!b->kq_arr || !b->kk_arr)
    return OQ_ERR_NOMEM;
  const char **p = (const char **)self->params;
  p[1] = b->kq_arr;
  p[2] = b->kk_arr;
  return OQ_OK;
}

static void rows_drop(oq__item_rows *r)
{
  oq_items_free(r->items, r->n);
  *r = (oq__item_rows){0};
}

/* The round ended with e: keep its next items if it committed. */
static void next_settle(many *b, oq_err e)
{
  oq__item_rows *r = &b->round_next;
  if (e == OQ_ERR_AMBIGUOUS || (e == OQ_OK && r->nomem))
    b->next_unknown = true; /* rows of ours may be claimed, not held */
  if (e != OQ_OK || r->n == 0) {
    rows_drop(r);
    return;
  }
  if (b->next.n == 0) {
    oq_items_free(b->next.items, 0);
    b->next = *r;
    *r = (oq__item_rows){0};
    return;
  }
  oq_item *grown =
      realloc(b->next.items, (b->next.n + r->n) * sizeof *b->next.items);
  if (!grown) {
    b->next_unknown = true; /* claimed, committed, not held */
    rows_drop(r);
    return;
  }
  memcpy(grown + b->next.n, r->items, r->n * sizeof *grown);
  b->next.items = grown;
  b->next.n += r->n;
  b->next.cap = b->next.n;
  free(r->items);
  *r = (oq__item_rows){0};
}

/* ---- the pipelined round: one round trip ------------------------------ */

/* What the check's before hook needs: the effects' first rows are in. */
typedef struct rows_in {
  many *b;
  char **rows;     /* the active items' first rows as JSON, or NULL */
  const char **cp; /* the check's parameters */
} rows_in;

/* The effects returned rows: they are the results (onceq_results, history),
 * so the check waits for them (one more round trip, same transaction). */
static oq_err results_from_rows(void *ud, oq__pstmt *check)
{
  rows_in *r = ud;
  OQ__UNUSED(check);
  if (!prepare_results(r->b, r->rows))
    return OQ_ERR_NOMEM;
  r->cp[3] = r->b->results;
  r->cp[5] = r->b->cuts;
  return OQ_OK;
}

static oq_err sql_round_run(many *b)
{
  static const unsigned int types[4] = {OQ_OID_JSONB, OQ_OID_UUID, OQ_OID_TEXT,
                                        OQ_OID_INT4};
  char count[24];
  /* until an item's statement runs, a failure is the round's (as BEGIN's),
   * not the first item's: running out of memory here fails no attempt */
  b->failed = (long)b->m + 1;
  if (!prepare_ids(b, count, sizeof count))
    return oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
  /* only a round with a keyed item (oq_item.keyed, as the claim returned
   * it) pays its statements: an unkeyed batch is the plain ack */
  bool nx = false;
  for (size_t k = 0; b->want_next && k < b->m && !nx; k++)
    nx = b->items[b->active[k]].keyed;
  keys_clear(b);
  bool keys_known = false;
  if (nx && keys_from_items(b, &keys_known) != OQ_OK)
    return oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
  /* the check and the next items are planned once, with the claim's
   * settings (db_tx.h, oq__db_plan_next): set after the items' statements,
   * which are the caller's, and held to the COMMIT */
  bool pg = oq_db_engine(b->db) == OQ_ENGINE_POSTGRES;
  size_t ns =
      b->m + 3 + (pg ? 1 : 0) + (nx ? 1 : 0) + (nx && !keys_known ? 1 : 0);
  oq__pstmt *st = calloc(ns, sizeof *st);
  const char **params = calloc(b->m * 4 + CHECK_NPARAMS + 6, sizeof *params);
  char(*att)[16] = calloc(b->m ? b->m : 1, sizeof *att);
  char **rows = calloc(b->m ? b->m : 1, sizeof *rows);
  oq_err e = OQ_OK;
  if (!st || !params || !att || !rows) {
    e = oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  /* parsed and planned once per connection, not per item */
  char item_stmt[32], check_stmt[32], next_stmt[32];
  static const unsigned int check_types[CHECK_NPARAMS] = {0, OQ_OID_UUID, 0,
                                                          0, 0,           0};
  int ncols = 0;
  e = oq__db_prepare_once(b->db, b->sql, 4, types, item_stmt, sizeof item_stmt,
                          &ncols);
  /* a handler statement that does not prepare (a missing table) fails
   * each item's attempt alike, as it would one item at a time; anything
   * transient (a restart, a lost connection, a timeout) does not */
  if (e != OQ_OK && e != OQ_ERR_CONN && e != OQ_ERR_TIMEOUT &&
      e != OQ_ERR_RETRY && !oq__sqlstate_is_restart(oq_db_sqlstate(b->db)))
    b->failed = 0;
  if (e == OQ_OK)
    e = oq__db_prepare_once(b->db, check_sql(b), CHECK_NPARAMS, check_types,
                            check_stmt, sizeof check_stmt, NULL);
  /* planned once too: a plan of its many joins took about 0.7 ms a round */
  if (e == OQ_OK && nx)
    e = oq__db_prepare_once(b->db,
                            oq__sql(oq_db_engine(b->db), OQ__SQL_ACK_NEXT), 4,
                            NULL, next_stmt, sizeof next_stmt, NULL);
  if (e != OQ_OK)
    goto out; /* b->failed: the first item's, or BEGIN/COMMIT */
  st[0] = (oq__pstmt){.sql = "BEGIN"};
  for (size_t k = 0; k < b->m; k++) {
    const oq_item *it = &b->items[b->active[k]];
    const char **p = params + k * 4;
    snprintf(att[k], sizeof att[k], "%d", it->attempt);
    p[0] = it->payload;
    p[1] = it->id;
    p[2] = it->queue;
    p[3] = att[k];
    st[k + 1] = (oq__pstmt){.sql = b->sql,
                            .prepared = item_stmt,
                            .types = types,
                            .nparams = 4,
                            .params = p,
                            .first_row = ncols > 0 ? &rows[k] : NULL};
  }
  const char **cp = params + b->m * 4;
  const char **kp = cp + CHECK_NPARAMS; /* keys: ids, session */
  const char **np = kp + 2;             /* next: session, queues, keys, slots */
  size_t at = b->m + 1;
  rows_drop(&b->round_next);
  if (nx && !keys_known) {
    kp[0] = b->ids;
    kp[1] = oq_session_id(b->s);
    st[at++] =
        (oq__pstmt){.sql = oq__sql(oq_db_engine(b->db), OQ__SQL_ACK_KEYS),
                    .nparams = 2,
                    .params = kp,
                    .rows = key_row,
                    .ud = b};
  }
  if (pg) /* unnamed: a slot of the cache would be one the others need */
    st[at++] = (oq__pstmt){.sql = "SELECT " OQ__PLAN_SETTINGS};
  size_t check_at = at;
  if (!prepare_results(b, NULL)) {
    e = oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  check_params(b, count, cp);
  rows_in ri = {b, rows, cp};
  st[at++] = (oq__pstmt){.sql = check_sql(b),
                         .prepared = check_stmt,
                         .types = check_types,
                         .nparams = CHECK_NPARAMS,
                         .params = cp,
                         .before = ncols > 0 ? results_from_rows : NULL,
                         .before_ud = &ri};
  if (nx) {
    np[0] = oq_session_id(b->s);
    np[1] = np[2] = "{}";
    np[3] = b->slots_arr[0] ? b->slots_arr : NULL;
    st[at++] =
        (oq__pstmt){.sql = oq__sql(oq_db_engine(b->db), OQ__SQL_ACK_NEXT),
                    .prepared = next_stmt,
                    .nparams = 4,
                    .params = np,
                    .rows = oq__item_rows_add,
                    .ud = &b->round_next,
                    .before = next_params,
                    .before_ud = b};
  }
  st[at++] = (oq__pstmt){.sql = "COMMIT"};
  long f = -1;
  e = oq__db_pipeline(b->db, st, ns, &f);
  /* a failed keys or next statement reports like BEGIN/COMMIT */
  b->failed = f < 0                 ? -1
              : f == 0              ? (long)b->m + 1
              : f <= (long)b->m     ? f - 1
              : f == (long)check_at ? (long)b->m
                                    : (long)b->m + 1;
  if (nx)
    next_settle(b, e);
out:
  for (size_t k = 0; rows && k < b->m; k++)
    free(rows[k]);
  free(rows);
  free(att);
  free(params);
  free(st);
  return e;
}

/* ---- verdicts from the database --------------------------------------- */

typedef struct present {
  many *b;
  bool *seen, *ours;
} present;

static oq_err mark_row(void *ud, int ncols, const char *const *vals)
{
  present *p = ud;
  if (ncols < 2 || !vals[0])
    return OQ_OK;
  for (size_t k = 0; k < p->b->m; k++)
    if (strcmp(p->b->items[p->b->active[k]].id, vals[0]) == 0) {
      p->seen[k] = true;
      p->ours[k] = vals[1] && vals[1][0] == 't';
    }
  return OQ_OK;
}

/*
 * Where each active item stands. After a rollback (committed == false) an
 * item that is gone or not ours is lost; after an unknown commit an item
 * that is gone was acknowledged (by this batch or, exactly once, by
 * someone) and one still ours stays pending.
 */
static oq_err settle_from_db(many *b, bool committed_maybe)
{
  char count[24];
  if (!prepare_ids(b, count, sizeof count))
    return oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
  bool *seen = calloc(b->m ? b->m : 1, sizeof *seen);
  bool *ours = calloc(b->m ? b->m : 1, sizeof *ours);
  if (!seen || !ours) {
    free(seen);
    free(ours);
    return oq__db_fail(b->db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  present p = {b, seen, ours};
  const char *params[2] = {b->ids, oq_session_id(b->s)};
  oq_err e = oq__db_query_retry(
      b->db, oq__sql(oq_db_engine(b->db), OQ__SQL_ITEMS_CLAIMED_BY_US), 2,
      params, mark_row, &p, NULL);
  if (e == OQ_OK)
    for (size_t k = 0; k < b->m; k++) {
      oq_ack_result *r = &b->res[b->active[k]];
      if (!seen[k])
        r->verdict = committed_maybe ? OQ_ACK_DONE : OQ_ACK_LOST;
      else if (!ours[k])
        r->verdict = OQ_ACK_LOST;
    }
  free(seen);
  free(ours);
  return e;
}

static bool out_of_time(const oq_retry_policy *p, uint64_t start)
{
  uint64_t now = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
  return p->max_total_ms > 0 && now - start >= (uint64_t)p->max_total_ms;
}

static int id_order(const void *x, const void *y)
{
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* *twice: an id that is in items more than once, or NULL. Sorted, not
 * compared pair by pair: a --sql worker's batches hold about 1,000 items,
 * and the pairs were about a quarter of its CPU time in a drain (perf,
 * session 17). False: out of memory. */
static bool duplicate_id(const oq_item *items, size_t n, const char **twice)
{
  *twice = NULL;
  if (n < 2)
    return true;
  const char **ids = malloc(n * sizeof *ids);
  if (!ids)
    return false;
  for (size_t i = 0; i < n; i++)
    ids[i] = items[i].id;
  qsort(ids, n, sizeof *ids, id_order);
  for (size_t i = 1; i < n && !*twice; i++)
    if (strcmp(ids[i - 1], ids[i]) == 0)
      *twice = ids[i];
  free(ids);
  return true;
}

/* Restarts (40001) of a handler's batch round before it goes one item per
 * round (run_many). */
#define SPLIT_AFTER_RESTARTS 2

static oq_err run_many(many *b, round_fn round)
{
  oq_db *db = b->db;
  const char *sid = oq_session_id(b->s);
  const oq_retry_policy *p = oq__db_policy(db);
  uint64_t start = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
  bool ambiguous = false;
  /* once a round's commit was ambiguous, an item found gone later may have
   * been acknowledged by that round (it may even commit while we rerun,
   * and the rerun's check then finds the row gone): gone means done */
  bool was_ambiguous = false;
  /* one item per round from now on: a round's check came up short with
   * every claim still ours (an item's statement changed onceq_items) */
  bool solo = false;
  int restarts = 0; /* serialization restarts, for SPLIT_AFTER_RESTARTS */
  oq_err e = OQ_OK;
  for (size_t i = 0; i < b->n; i++)
    b->res[i] = (oq_ack_result){.verdict = OQ_ACK_PENDING};
  const char *twice = NULL;
  if (!duplicate_id(b->items, b->n, &twice))
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  if (twice)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "batch ack: item %s is in the batch twice", twice);
  b->active = malloc((b->n ? b->n : 1) * sizeof *b->active);
  if (!b->active)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  /* an earlier call gave up on some of these with the outcome unknown:
   * reconcile before anything runs again (ack.h, "called again") */
  for (size_t i = 0; i < b->n; i++)
    if (oq__ack_take_ambiguous(db, b->items[i].id))
      ambiguous = was_ambiguous = true;
  for (int attempt = 1;; attempt++) {
    b->m = 0;
    for (size_t i = 0; i < b->n && !(solo && b->m == 1); i++)
      if (b->res[i].verdict == OQ_ACK_PENDING)
        b->active[b->m++] = i;
    if (b->m == 0) {
      e = OQ_OK;
      break;
    }
    if (!oq_db_connected(db)) {
      e = oq__db_reconnect_patiently(db);
      if (e != OQ_OK)
        break;
    }
    if (ambiguous) {
      e = settle_from_db(b, true);
      if (e == OQ_OK) {
        OQ_LOG(OQ_LOG_INFO, sid, NULL,
               "batch ack: ambiguous commit of %zu item(s) reconciled", b->m);
        ambiguous = false;
        attempt = 0;
        continue;
      }
      goto again;
    }
    e = round(b);
    if (e == OQ_OK) {
      for (size_t k = 0; k < b->m; k++)
        b->res[b->active[k]].verdict = OQ_ACK_DONE;
      if (solo)
        continue; /* the next item's round */
      break;
    }
    if (e == OQ_ERR_AMBIGUOUS) {
      OQ_LOG(OQ_LOG_WARN, sid, NULL, "batch ack: %s", oq_db_errmsg(db));
      ambiguous = was_ambiguous = true;
      goto again;
    }
    /* our prepared statements went away or no longer fit: prepare again
     * and rerun */
    if (oq__sqlstate_prepared_gone(oq_db_sqlstate(db))) {
      if (oq__sqlstate_is(oq_db_sqlstate(db),
                          OQ_SQLSTATE_INVALID_STATEMENT_NAME))
        oq__db_vanished(db);
      oq__db_forget_prepared(db);
      goto again;
    }
    bool restart =
        e == OQ_ERR_RETRY || oq__sqlstate_is_restart(oq_db_sqlstate(db));
    if (restart || e == OQ_ERR_CONN) {
      if (restart)
        oq__db_count_restart(db);
      /* Under SERIALIZABLE a round as long as its slowest statements
       * (the handler's work) meets the claims and heartbeats committed
       * meanwhile, and lost every rerun in the chaos test's traits pass
       * until the drain's end: from the second restart on, one item per
       * round, the shortest transaction that can still commit. Only for
       * the handler's rounds: oq_ack_many's rounds stay whole. */
      if (restart && ++restarts == SPLIT_AFTER_RESTARTS &&
          round == sql_round_run && !solo && b->m > 1) {
        solo = true;
        OQ_LOG(OQ_LOG_INFO, sid, NULL,
               "batch ack: %d serialization restarts in a row; "
               "acknowledging the %zu pending item(s) one per transaction",
               restarts, b->m);
      }
      goto again;
    }
    if (b->failed >= 0 && b->failed < (long)b->m) {
      oq_ack_result *r = &b->res[b->active[b->failed]];
      r->verdict = OQ_ACK_FAILED;
      snprintf(r->error, sizeof r->error, "%s", oq_db_errmsg(db));
      continue; /* the others, without it, at once */
    }
    if (b->failed == (long)b->m &&
        oq__sqlstate_is(oq_db_sqlstate(db), OQ_SQLSTATE_DIVISION_BY_ZERO)) {
      size_t before = b->m;
      e = settle_from_db(b, was_ambiguous);
      if (e != OQ_OK)
        goto again;
      size_t still = 0;
      for (size_t k = 0; k < b->m; k++)
        still += b->res[b->active[k]].verdict == OQ_ACK_PENDING;
      if (still == before && b->m == 1) {
        /* alone in its round: its own statement deleted or unclaimed its
         * row. A failed attempt (oq_fail counts it), not a loss: the item
         * would run forever (issue 20) */
        oq_ack_result *r = &b->res[b->active[0]];
        oq__touched_own_row(db, b->items[b->active[0]].id);
        r->verdict = OQ_ACK_FAILED;
        snprintf(r->error, sizeof r->error, "%s", oq_db_errmsg(db));
        continue;
      }
      if (still == before) {
        /* every claim is still ours, yet the check did not delete them
         * all: an item's statement changed onceq_items (deleted or
         * unclaimed a row of this batch), and the check cannot say whose.
         * The same round would fail the same way: run the rest one item
         * per round, where that item alone fails and the others commit */
        solo = true;
        OQ_LOG(OQ_LOG_WARN, sid, NULL,
               "batch ack: an item's statement changed onceq_items; "
               "acknowledging the %zu pending item(s) one per transaction",
               b->m);
      }
      continue;
    }
    break; /* BEGIN/COMMIT/check failed for another reason: report it */
  again:
    if (out_of_time(p, start) || oq__db_given_up(db))
      break;
    oq__policy_sleep(p, oq_backoff_delay_ms(p, attempt, oq__db_rng(db)));
  }
  keys_clear(b);
  free(b->kq);
  free(b->kk);
  b->kq = b->kk = NULL;
  rows_drop(&b->round_next);
  free(b->active);
  free(b->ids);
  free(b->results);
  free(b->cuts);
  b->active = NULL;
  b->ids = NULL;
  b->results = NULL;
  b->cuts = NULL;
  /* a round's commit was ambiguous at some point: a pending item may yet
   * turn out acknowledged by it, so the next call reconciles first */
  if (e != OQ_OK && was_ambiguous)
    for (size_t i = 0; i < b->n; i++)
      if (b->res[i].verdict == OQ_ACK_PENDING)
        oq__ack_set_ambiguous(db, b->items[i].id);
  if (e != OQ_OK && ambiguous) {
    return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL,
                       "batch ack: commit outcome still unknown (%s); call "
                       "again once the database is reachable: it reconciles",
                       oq_db_errmsg(db));
  }
  return e;
}

oq_err oq_ack_many(oq_db *db, const oq_session *s, const oq_item *items,
                   size_t n, oq_ack_fn fn, void *ud, const oq_ack_opts *opts,
                   oq_ack_result *results)
{
  many b = {.db = db,
            .s = s,
            .items = items,
            .n = n,
            .opts = opts,
            .res = results,
            .fn = fn,
            .ud = ud};
  if (!fn)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL, "oq_ack_many needs fn");
  return run_many(&b, cb_round_run);
}

oq_err oq_ack_many_sql(oq_db *db, const oq_session *s, const oq_item *items,
                       size_t n, const char *sql, const oq_ack_opts *opts,
                       oq_ack_result *results)
{
  many b = {.db = db,
            .s = s,
            .items = items,
            .n = n,
            .opts = opts,
            .res = results,
            .sql = sql};
  bool asked = opts && opts->next && opts->nnext;
  if (asked) {
    *opts->next = NULL;
    *opts->nnext = 0;
  }
  if (opts && opts->next_unknown)
    *opts->next_unknown = false;
  if (!sql || !*sql)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "oq_ack_many_sql needs a statement");
  /* CockroachDB: not built (docs/design.md 5a): nothing is asked */
  b.want_next = asked && oq_db_engine(db) == OQ_ENGINE_POSTGRES;
  if (b.want_next && opts->next_slots) {
    /* a partitioned session: its own slots only; none, no next item */
    size_t at = 0;
    b.slots_arr[at++] = '{';
    for (size_t i = 0; i < opts->nnext_slots && at + 16 < sizeof b.slots_arr;
         i++)
      at += (size_t)snprintf(b.slots_arr + at, sizeof b.slots_arr - at, "%s%d",
                             i ? "," : "", opts->next_slots[i]);
    b.slots_arr[at++] = '}';
    b.slots_arr[at] = '\0';
    b.want_next = opts->nnext_slots > 0;
  }
  oq_err e = run_many(&b, sql_round_run);
  if (asked) {
    *opts->next = b.next.items;
    *opts->nnext = b.next.n;
  } else {
    oq_items_free(b.next.items, b.next.n);
  }
  if (opts && opts->next_unknown)
    *opts->next_unknown = b.next_unknown;
  return e;
}
