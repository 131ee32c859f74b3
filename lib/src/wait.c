/*
 * wait.c: waiting for items' outcomes (wait.h).
 *
 * One loop per call: opt the live items in (keep_result), then check all
 * the unsettled ones in one statement, and sleep until the next check:
 * until a NOTIFY onceq_finished or 2 s on PostgreSQL, with capped
 * exponential backoff on CockroachDB. Sleeps are cut into slices of at
 * most 100 ms so stop() is seen quickly.
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

/* One row of OQ__SQL_WAIT_STATE: id, live, outcome, result, truncated,
 * dead, last_error, attempts, in history, history result. */
static oq_err take_row(void *ud, int ncols, const char *const *v)
{
  wait_ctx *c = ud;
  if (ncols < 10 || !v[0])
    return OQ_OK;
  for (size_t i = 0; i < c->n; i++) {
    oq_wait_result *r = &c->out[i];
    if (r->state != OQ_WAIT_PENDING || strcasecmp(r->id, v[0]) != 0)
      continue;
    bool live = v[1] && v[1][0] == 't';
    if (live) {
      c->seen_live[i] = true;
      continue;
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
  }
  return OQ_OK;
}

/* The unsettled ids as a uuid[] literal; NULL on out of memory. */
static char *pending_array(const wait_ctx *c)
{
  const char **p = calloc(c->left ? c->left : 1, sizeof *p);
  if (!p)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->out[i].state == OQ_WAIT_PENDING)
      p[k++] = c->out[i].id;
  char *arr = oq__text_array(p, k);
  free(p);
  return arr;
}

/* Opt the live items in (first check only), then read every unsettled
 * item's state in one statement. */
static oq_err check(oq_db *db, wait_ctx *c, bool opt_in)
{
  char *arr = pending_array(c);
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
  return e;
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
  wait_ctx c = {ids, n, out, calloc(n ? n : 1, sizeof(bool)), n};
  if (!c.seen_live)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  int min_ms = opts && opts->poll_min_ms > 0 ? opts->poll_min_ms : 50;
  int max_ms = opts && opts->poll_max_ms > 0 ? opts->poll_max_ms : 1000;
  uint64_t start = oq_monotonic_ms();
  uint64_t rng = oq_backoff_seed();
  bool listening = false, first = true;
  oq_db *ldb = opts && opts->listen ? opts->listen : db;
  int delay = min_ms;
  oq_err e = OQ_OK;
  while (c.left > 0) {
    /* LISTEN before the check, so no commit falls between them */
    e = prepare(db, ldb, &listening);
    if (e != OQ_OK)
      break; /* could not reconnect within the db's retry policy */
    e = check(db, &c, first);
    if (e == OQ_ERR_CONN || e == OQ_ERR_RETRY) {
      listening = false;
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
    int sleep_ms = PG_RECHECK_MS;
    if (!pg) {
      /* jitter: 75-125 % of the current delay */
      sleep_ms = delay * 3 / 4 + (int)(oq__xorshift64(&rng) % (delay / 2 + 1));
      delay = delay * 2 > max_ms ? max_ms : delay * 2;
    }
    uint64_t until = oq_monotonic_ms() + (uint64_t)sleep_ms;
    bool woken = false;
    while (!woken && oq_monotonic_ms() < until) {
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
        if (oq_db_wait_notify(ldb, (int)slice, &notified) != OQ_OK) {
          listening = false;
          break; /* the next check reconnects */
        }
        woken = notified != 0;
      } else {
        oq__policy_sleep(oq__db_policy(db), (int)slice);
      }
    }
  }
out:
  if (e == OQ_OK && stopped(opts) && c.left > 0)
    e = OQ_ERR_CALLBACK;
  if (listening && oq_db_connected(ldb))
    (void)oq__db_simple(ldb, "UNLISTEN " WAIT_CHANNEL);
  free(c.seen_live);
  if (e == OQ_ERR_TIMEOUT)
    return oq__db_fail(db, OQ_ERR_TIMEOUT, NULL,
                       "%zu of %zu items still pending when the wait's time "
                       "ran out",
                       c.left, n);
  if (e == OQ_ERR_CALLBACK)
    return oq__db_fail(db, OQ_ERR_CALLBACK, NULL, "wait stopped");
  return e;
}
