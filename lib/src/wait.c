/*
 * wait.c: waiting for items' outcomes (wait.h).
 *
 * One loop per call: opt the live items in (keep_result), then check all
 * the unsettled ones in one statement, and sleep until the next check.
 * On PostgreSQL the next check comes when a NOTIFY onceq_finished names
 * one of our ids (then only the ids named are read again), when one
 * carries no usable id (all of them are), and every 2 s anyway, so a lost
 * notification is still found. A notification about anybody else's item
 * costs a lookup, no query: 50 waiters under 2,000 completions/s send
 * about one check per own completion, not one each per commit. On
 * CockroachDB the loop polls all the unsettled ids with capped
 * exponential backoff. Sleeps are cut into slices of at most 100 ms so
 * stop() is seen quickly.
 *
 * Ids are matched through an index sorted by the id's lowercase text
 * (rows and notification payloads by binary search), so a wait for many
 * ids does not compare every row with every id.
 *
 * An item seen live by this call and later gone with no record at all
 * (no result row, not dead, not in the history) was acknowledged by an
 * ack that kept no result row: the only other ways out of onceq_items
 * (dead-letter, `onceq cancel`) leave a record. It is reported DONE with
 * no result.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "onceq/wait.h"

#define WAIT_CHANNEL "onceq_finished"
#define PG_RECHECK_MS 2000 /* re-check even without a notification */
#define SLICE_MS 100       /* longest sleep between stop() polls */

typedef struct wait_ctx {
  const char *const *ids;
  size_t n;
  oq_wait_result *out;
  bool *seen_live; /* ids[i] was live at some check of this call */
  size_t left;     /* unsettled */
  /* ids[i] in lowercase: the sort key */
  char (*key)[OQ_UUID_LEN + 1];
  size_t *order;    /* indexes into ids, sorted by key */
  bool *named;      /* a notification named ids[i] since the last check */
  size_t *named_at; /* the indexes with named set, n_named of them */
  size_t n_named;
  bool all; /* the next check reads every unsettled id */
} wait_ctx;

const char *oq_wait_state_name(oq_wait_state s)
{
  switch (s) {
  case OQ_WAIT_PENDING:
    return "pending";
  case OQ_WAIT_DONE:
    return "done";
  case OQ_WAIT_DEAD:
    return "dead";
  case OQ_WAIT_CANCELLED:
    return "cancelled";
  case OQ_WAIT_UNKNOWN:
    return "unknown";
  }
  return "unknown";
}

void oq_wait_results_free(oq_wait_result *out, size_t n)
{
  if (!out)
    return;
  for (size_t i = 0; i < n; i++) {
    free(out[i].result);
    free(out[i].error);
    out[i].result = NULL;
    out[i].error = NULL;
  }
}

static bool is_uuid(const char *s)
{
  if (!s || strlen(s) != OQ_UUID_LEN)
    return false;
  for (int i = 0; i < OQ_UUID_LEN; i++) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
      return false;
  }
  return true;
}

/* The first position in order whose key is id (lowercased), or c->n. */
static size_t find(const wait_ctx *c, const char *id)
{
  char k[OQ_UUID_LEN + 1];
  if (!id || strlen(id) != OQ_UUID_LEN)
    return c->n;
  for (int i = 0; i < OQ_UUID_LEN; i++)
    k[i] = (char)tolower((unsigned char)id[i]);
  k[OQ_UUID_LEN] = '\0';
  size_t lo = 0, hi = c->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(c->key[c->order[mid]], k) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->n && strcmp(c->key[c->order[lo]], k) == 0 ? lo : c->n;
}

/* Settle or mark ids[i] from one row of OQ__SQL_WAIT_STATE. */
static oq_err take_one(wait_ctx *c, size_t i, const char *const *v)
{
  oq_wait_result *r = &c->out[i];
  if (r->state != OQ_WAIT_PENDING)
    return OQ_OK;
  bool live = v[1] && v[1][0] == 't';
  if (live) {
    c->seen_live[i] = true;
    return OQ_OK;
  }
  const char *text = NULL; /* the string this outcome keeps */
  if (v[2] && strcmp(v[2], "done") == 0) {
    r->state = OQ_WAIT_DONE;
    text = v[3];
    r->truncated = v[4] && v[4][0] == 't';
  } else if (v[2] && strcmp(v[2], "cancelled") == 0) {
    r->state = OQ_WAIT_CANCELLED;
    text = v[3]; /* a cancel keeps the item's last error as its result */
  } else if (v[5] && v[5][0] == 't') {
    r->state = OQ_WAIT_DEAD;
    text = v[6];
    r->attempts = oq__int(v[7]);
  } else if (v[8] && v[8][0] == 't') {
    r->state = OQ_WAIT_DONE; /* from the history (--history) */
    text = v[9];
  } else if (c->seen_live[i]) {
    r->state = OQ_WAIT_DONE; /* acknowledged; no result row (see top) */
  } else {
    r->state = OQ_WAIT_UNKNOWN;
  }
  if (text) {
    char *copy = strdup(text);
    if (!copy)
      return OQ_ERR_NOMEM;
    if (r->state == OQ_WAIT_DEAD || r->state == OQ_WAIT_CANCELLED)
      r->error = copy;
    else
      r->result = copy;
  }
  c->left--;
  return OQ_OK;
}

/* One row of OQ__SQL_WAIT_STATE: id, live, outcome, result, truncated,
 * dead, last_error, attempts, in history, history result. Every entry of
 * ids with that id (a caller may name one twice) takes it. */
static oq_err take_row(void *ud, int ncols, const char *const *v)
{
  wait_ctx *c = ud;
  if (ncols < 10 || !v[0])
    return OQ_OK;
  size_t at = find(c, v[0]);
  if (at == c->n)
    return OQ_OK;
  const char *k = c->key[c->order[at]];
  for (; at < c->n && strcmp(c->key[c->order[at]], k) == 0; at++) {
    oq_err e = take_one(c, c->order[at], v);
    if (e != OQ_OK)
      return e;
  }
  return OQ_OK;
}

/* One notification consumed while sleeping (PostgreSQL). Only
 * onceq_finished concerns us: an id of ours marks it for the next check,
 * somebody else's id is ignored, and a payload that is no id at all (a
 * hand-sent NOTIFY) makes the next check read every unsettled id. */
static void on_notify(void *ud, const char *channel, const char *payload)
{
  wait_ctx *c = ud;
  if (strcmp(channel, WAIT_CHANNEL) != 0)
    return;
  if (!is_uuid(payload)) {
    c->all = true;
    return;
  }
  size_t at = find(c, payload);
  if (at == c->n)
    return;
  const char *k = c->key[c->order[at]];
  for (; at < c->n && strcmp(c->key[c->order[at]], k) == 0; at++) {
    size_t i = c->order[at];
    if (c->out[i].state == OQ_WAIT_PENDING && !c->named[i]) {
      c->named[i] = true;
      c->named_at[c->n_named++] = i;
    }
  }
}

/* The ids the next check reads, as a uuid[] literal: every unsettled one,
 * or (!c->all) those a notification named. NULL on out of memory. */
static char *check_array(const wait_ctx *c)
{
  size_t cap = c->all ? c->left : c->n_named;
  const char **p = calloc(cap ? cap : 1, sizeof *p);
  if (!p)
    return NULL;
  size_t k = 0;
  if (c->all) {
    for (size_t i = 0; i < c->n; i++)
      if (c->out[i].state == OQ_WAIT_PENDING && k < cap)
        p[k++] = c->out[i].id;
  } else {
    for (size_t j = 0; j < c->n_named; j++)
      if (c->out[c->named_at[j]].state == OQ_WAIT_PENDING && k < cap)
        p[k++] = c->out[c->named_at[j]].id;
  }
  char *arr = oq__text_array(p, k);
  free(p);
  return arr;
}

/* Opt the live items in (first check only), then read the state of the
 * ids check_array picks in one statement; the notifications' marks are
 * cleared once the check is done. */
static oq_err check(oq_db *db, wait_ctx *c, bool opt_in)
{
  char *arr = check_array(c);
  if (!arr)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const char *params[1] = {arr};
  oq_err e = OQ_OK;
  oq_engine eng = oq_db_engine(db);
  if (opt_in)
    e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_WAIT_OPT_IN), 1, params,
                           NULL, NULL, NULL);
  if (e == OQ_OK)
    e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_WAIT_STATE), 1, params,
                           take_row, c, NULL);
  if (e == OQ_ERR_NOMEM)
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  free(arr);
  if (e == OQ_OK) {
    for (size_t j = 0; j < c->n_named; j++)
      c->named[c->named_at[j]] = false;
    c->n_named = 0;
    c->all = false;
  }
  return e;
}

static int by_text(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The lowercase keys and the sorted index over them (take_row, on_notify).
 * False on out of memory. */
static bool index_ids(wait_ctx *c)
{
  size_t m = c->n ? c->n : 1;
  c->key = calloc(m, sizeof *c->key);
  c->order = calloc(m, sizeof *c->order);
  c->named = calloc(m, sizeof *c->named);
  c->named_at = calloc(m, sizeof *c->named_at);
  const char **by = calloc(m, sizeof *by);
  if (!c->key || !c->order || !c->named || !c->named_at || !by) {
    free(by);
    return false;
  }
  for (size_t i = 0; i < c->n; i++) {
    for (int k = 0; k < OQ_UUID_LEN; k++)
      c->key[i][k] = (char)tolower((unsigned char)c->out[i].id[k]);
    c->key[i][OQ_UUID_LEN] = '\0';
    by[i] = c->key[i];
  }
  qsort(by, c->n, sizeof *by, by_text);
  for (size_t j = 0; j < c->n; j++)
    c->order[j] = (size_t)((by[j] - c->key[0]) / (OQ_UUID_LEN + 1));
  free(by);
  return true;
}

static void ctx_free(wait_ctx *c)
{
  free(c->seen_live);
  free(c->key);
  free(c->order);
  free(c->named);
  free(c->named_at);
}

static bool stopped(const oq_wait_opts *o)
{
  return o && o->stop && o->stop(o->stop_ud);
}

/* Milliseconds left before the deadline (a large number without one). */
static long left_ms(const oq_wait_opts *o, uint64_t start)
{
  if (!o || o->timeout_ms < 0)
    return 1L << 30;
  long spent = (long)(oq_monotonic_ms() - start);
  return spent >= o->timeout_ms ? 0 : o->timeout_ms - spent;
}

static int imin(long a, long b)
{
  return (int)(a < b ? a : b);
}

/* (Re)connect db and the listening connection ldb (db itself, or
 * opts->listen) and, where it can, LISTEN on ldb. A listener of the
 * caller's that fails is left for the next round: db still polls. */
static oq_err prepare(oq_db *db, oq_db *ldb, bool *listening)
{
  if (!oq_db_connected(db)) {
    oq_err e = oq__db_reconnect_patiently(db);
    if (e != OQ_OK)
      return e;
    if (ldb == db)
      *listening = false;
  }
  if (ldb != db && !oq_db_connected(ldb)) {
    *listening = false;
    if (oq_db_reconnect(ldb) != OQ_OK)
      return OQ_OK;
  }
  if (oq_db_traits(ldb)->listen_notify && !*listening) {
    oq_err e = oq_db_listen(ldb, WAIT_CHANNEL);
    if (e != OQ_OK)
      return ldb == db ? e : OQ_OK;
    *listening = true;
  }
  return OQ_OK;
}

oq_err oq_wait(oq_db *db, const char *const *ids, size_t n,
               const oq_wait_opts *opts, oq_wait_result *out)
{
  oq__db_clear(db);
  for (size_t i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    if (!is_uuid(ids[i]))
      return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                         "%.80s is not an item id (a UUID such as "
                         "2d2daced-df73-46ab-84ba-7fe5e2a051ab)",
                         ids[i] ? ids[i] : "(null)");
    memcpy(out[i].id, ids[i], OQ_UUID_LEN + 1);
  }
  wait_ctx c = {.ids = ids,
                .n = n,
                .out = out,
                .seen_live = calloc(n ? n : 1, sizeof(bool)),
                .left = n,
                .all = true};
  if (!c.seen_live || !index_ids(&c)) {
    ctx_free(&c);
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  int min_ms = opts && opts->poll_min_ms > 0 ? opts->poll_min_ms : 50;
  int max_ms = opts && opts->poll_max_ms > 0 ? opts->poll_max_ms : 1000;
  uint64_t start = oq_monotonic_ms();
  uint64_t rng = oq_backoff_seed();
  bool listening = false, first = true;
  oq_db *ldb = opts && opts->listen ? opts->listen : db;
  int delay = min_ms;
  uint64_t recheck_at = 0; /* PostgreSQL: the next check of every id */
  oq_err e = OQ_OK;
  while (c.left > 0) {
    /* LISTEN before the check, so no commit falls between them */
    e = prepare(db, ldb, &listening);
    if (e != OQ_OK)
      break; /* could not reconnect within the db's retry policy */
    /* every id: the periodic re-check, and the last check at the deadline */
    if (oq_monotonic_ms() >= recheck_at || left_ms(opts, start) == 0)
      c.all = true;
    bool full = c.all;
    e = check(db, &c, first);
    if (e == OQ_ERR_CONN || e == OQ_ERR_RETRY) {
      listening = false;
      c.all = true; /* notifications may have been lost meanwhile */
      if (left_ms(opts, start) == 0)
        break;
      oq__policy_sleep(oq__db_policy(db), imin(left_ms(opts, start), 500));
      continue;
    }
    if (e != OQ_OK)
      break;
    first = false;
    if (c.left == 0)
      break;
    if (left_ms(opts, start) == 0) {
      e = OQ_ERR_TIMEOUT;
      break;
    }
    /* sleep until the next check */
    bool pg = listening;
    uint64_t until;
    if (pg) {
      if (full)
        recheck_at = oq_monotonic_ms() + PG_RECHECK_MS;
      until = recheck_at;
    } else {
      /* jitter: 75-125 % of the current delay */
      int sleep_ms =
          delay * 3 / 4 + (int)(oq__xorshift64(&rng) % (delay / 2 + 1));
      delay = delay * 2 > max_ms ? max_ms : delay * 2;
      until = oq_monotonic_ms() + (uint64_t)sleep_ms;
    }
    /* woken: a notification named one of our ids, or carried none */
    while (c.n_named == 0 && !c.all && oq_monotonic_ms() < until) {
      if (stopped(opts)) {
        e = OQ_ERR_CALLBACK;
        goto out;
      }
      long slice = imin((long)(until - oq_monotonic_ms()), SLICE_MS);
      slice = imin(slice, left_ms(opts, start));
      if (slice <= 0)
        break;
      if (pg) {
        int notified = 0;
        if (oq__db_notifies(ldb, (int)slice, on_notify, &c, &notified) !=
            OQ_OK) {
          listening = false;
          c.all = true;
          break; /* the next check reconnects */
        }
      } else {
        oq__policy_sleep(oq__db_policy(db), (int)slice);
      }
    }
    if (!pg)
      c.all = true; /* polling reads every unsettled id */
  }
out:
  if (e == OQ_OK && stopped(opts) && c.left > 0)
    e = OQ_ERR_CALLBACK;
  if (listening && oq_db_connected(ldb))
    (void)oq__db_simple(ldb, "UNLISTEN " WAIT_CHANNEL);
  size_t left = c.left;
  ctx_free(&c);
  if (e == OQ_ERR_TIMEOUT)
    return oq__db_fail(db, OQ_ERR_TIMEOUT, NULL,
                       "%zu of %zu items still pending when the wait's time "
                       "ran out",
                       left, n);
  if (e == OQ_ERR_CALLBACK)
    return oq__db_fail(db, OQ_ERR_CALLBACK, NULL, "wait stopped");
  return e;
}
