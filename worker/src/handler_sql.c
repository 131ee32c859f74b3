/*
 * handler_sql.c: the --sql handler (handler_sql.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handler_sql.h"
#include "settle.h"

typedef struct sql_ctx {
  const char *sql;
  oq_ack_opts *ao; /* its result: the statement's first row as JSON */
  char *row_json;  /* owned; replaced when the transaction restarts */
} sql_ctx;

/* The ack transaction's handler part (oq_ack_fn). */
static oq_err run_sql(oq_db *db, const oq_item *it, void *ud)
{
  sql_ctx *c = ud;
  static const unsigned int types[4] = {OQ_OID_JSONB, OQ_OID_UUID, OQ_OID_TEXT,
                                        OQ_OID_INT4};
  char attempt[16];
  snprintf(attempt, sizeof attempt, "%d", it->attempt);
  const char *params[4] = {it->payload, it->id, it->queue, attempt};
  free(c->row_json);
  c->row_json = NULL;
  /* prepared once per connection, as the batched acks prepare it (the same
   * text and types, so the same cache entry): an idle worker's items come
   * one at a time, and parsing and planning the handler's statement was
   * on every one's latency path */
  oq_err e =
      oq_db_exec_prepared_json(db, c->sql, 4, types, params, &c->row_json);
  /* the ack's statement reads it after this returns (ack.c) */
  c->ao->result = c->row_json;
  if (e == OQ_OK || e == OQ_ERR_RETRY || e == OQ_ERR_CONN)
    return e;
  return OQ_ERR_CALLBACK; /* the handler failed: a failed attempt */
}

void wk_sql_handle(wk *w, oq_db *db, wk_job *j)
{
  oq_ack_opts ao = {.history = w->cfg->history};
  sql_ctx c = {w->cfg->sql, &ao, NULL};
  const char *sid = oq_session_id(j->g->session);
  uint64_t rng = oq_backoff_seed();
  for (int round = 1;; round++) {
    bool rec = false;
    oq_err e = oq_ack(db, j->g->session, &j->item, run_sql, &c, &ao, &rec);
    if (e == OQ_OK) {
      wk_metrics_add(w->m, WK_C_ACKED, 1);
      OQ_LOG(OQ_LOG_DEBUG, sid, j->item.id, "acked%s",
             rec ? " (reconciled)" : "");
      goto out;
    }
    if (e == OQ_ERR_CLAIM_LOST || e == OQ_ERR_SESSION_LOST) {
      wk_metrics_add(w->m, WK_C_LOST, 1);
      OQ_LOG(OQ_LOG_WARN, sid, j->item.id, "ack rejected: %s",
             oq_db_errmsg(db));
      goto out;
    }
    if (e == OQ_ERR_CALLBACK || !wk_transient(e)) {
      char why[1024];
      snprintf(why, sizeof why, "%s", oq_db_errmsg(db));
      wk_settle_failure(w, db, j, why, -1);
      goto out;
    }
    /* oq_ack reconciles an ambiguous commit itself when called again */
    if (!wk_keep_trying(w, j, round)) {
      OQ_LOG(OQ_LOG_WARN, sid, j->item.id,
             "ack not completed (%s); a reconciliation sweep releases the "
             "claim if it is still held",
             oq_db_errmsg(db));
      j->unsettled = true;
      goto out;
    }
    wk_retry_pause(round, &rng);
    wk_db_revive(db);
  }
out:
  free(c.row_json);
}

/* Whether a batch's ack claims its keyed items' next items (docs/design.md
 * 5a, "The ack's next item"): not with --sql-per-item, not while draining
 * or stopping (they would only be released), and only while the session is
 * LIVE; a partitioned session's only in the parts it may claim from
 * (next_slots). The library asks nothing on CockroachDB. */
static bool want_next(wk *w, const oq_session *s)
{
  /* --sql-per-item keeps one plain claim-checked DELETE per transaction */
  return !w->cfg->sql_per_item && !atomic_load(&w->draining) &&
         !atomic_load(&w->hard_stop) &&
         oq_session_state_get(s) == OQ_SESSION_LIVE;
}

/* --partitioned: the slots of the keyed items among items[0..m) that the
 * session may still claim from (wk.claim_slots), into out (m entries);
 * returns how many. A key's next item is in its head's slot. */
static size_t next_slots(wk *w, const oq_item *items, size_t m, int *out)
{
  size_t n = 0;
  for (size_t k = 0; k < m; k++) {
    int slot = items[k].slot;
    if (!items[k].keyed || slot < 0 || slot >= OQ_PARTS_SLOTS)
      continue;
    if (atomic_load(&w->claim_slots[slot / 64]) & (1ULL << (slot % 64)))
      out[n++] = slot;
  }
  return n;
}

/* One oq_ack_many_sql call; the next items it claimed, committed, become
 * jobs of the batch's session generation, as a claim's items do. */
static oq_err ack_round(wk *w, oq_db *db, wk_gen *g, oq_item *items, size_t m,
                        oq_ack_opts *ao, oq_ack_result *res)
{
  /* only a round with a keyed item claims next items (ack_many.c): the
   * others are plain acks, and counting them in wk_next_begin would make
   * every reconciliation sweep of a busy worker wait (reconcile.c) */
  bool keyed = false;
  for (size_t k = 0; k < m && !keyed; k++)
    keyed = items[k].keyed;
  if (!keyed || !want_next(w, g->session))
    return oq_ack_many_sql(db, g->session, items, m, w->cfg->sql, ao, res);
  int *slots = NULL;
  if (w->cfg->partitioned) {
    slots = malloc(m * sizeof *slots);
    size_t ns = slots ? next_slots(w, items, m, slots) : 0;
    if (ns == 0) {
      free(slots); /* none of its keys' parts is ours to claim from */
      return oq_ack_many_sql(db, g->session, items, m, w->cfg->sql, ao, res);
    }
    ao->next_slots = slots;
    ao->nnext_slots = ns;
  }
  oq_item *next = NULL;
  size_t nnext = 0;
  bool unknown = false;
  ao->next = &next;
  ao->nnext = &nnext;
  ao->next_unknown = &unknown;
  wk_next_begin(w);
  oq_err e = oq_ack_many_sql(db, g->session, items, m, w->cfg->sql, ao, res);
  if (nnext > 0) {
    wk_metrics_add(w->m, WK_C_CLAIMED, nnext);
    wk_jobs_push(w, g, next, nnext);
  }
  oq_items_free(next, nnext);
  wk_next_end(w);
  ao->next = NULL;
  ao->nnext = NULL;
  ao->next_unknown = NULL;
  ao->next_slots = NULL;
  ao->nnext_slots = 0;
  free(slots);
  /* rule 6 (docs/design.md 4a): rows of ours that no job holds */
  if (unknown)
    wk_sweep_request(w, "an ack's next items may be claimed and not held");
  return e;
}

void wk_sql_handle_batch(wk *w, oq_db *db, wk_job **jobs, size_t n)
{
  /* one item without a key has no next item to ask for: the plain ack */
  if (n == 1 && (!jobs[0]->item.keyed || !want_next(w, jobs[0]->g->session))) {
    wk_sql_handle(w, db, jobs[0]);
    return;
  }
  oq_session *s = jobs[0]->g->session;
  const char *sid = oq_session_id(s);
  oq_ack_opts ao = {.history = w->cfg->history};
  oq_item *items = malloc(n * sizeof *items);
  wk_job **pend = malloc(n * sizeof *pend);
  oq_ack_result *res = malloc(n * sizeof *res);
  if (!items || !pend || !res) {
    free(items);
    free(pend);
    free(res);
    for (size_t i = 0; i < n; i++)
      wk_sql_handle(w, db, jobs[i]);
    return;
  }
  size_t m = n;
  memcpy(pend, jobs, n * sizeof *pend);
  uint64_t rng = oq_backoff_seed();
  for (int round = 1; m > 0; round++) {
    for (size_t k = 0; k < m; k++)
      items[k] = pend[k]->item; /* shallow: the jobs own the strings */
    oq_err e = ack_round(w, db, jobs[0]->g, items, m, &ao, res);
    size_t left = 0;
    for (size_t k = 0; k < m; k++) {
      wk_job *j = pend[k];
      switch (res[k].verdict) {
      case OQ_ACK_DONE:
        wk_metrics_add(w->m, WK_C_ACKED, 1);
        OQ_LOG(OQ_LOG_DEBUG, sid, j->item.id, "acked (batch of %zu)", m);
        break;
      case OQ_ACK_FAILED:
        wk_settle_failure(w, db, j, res[k].error, -1);
        break;
      case OQ_ACK_LOST:
        wk_metrics_add(w->m, WK_C_LOST, 1);
        OQ_LOG(OQ_LOG_WARN, sid, j->item.id,
               "ack rejected: claim lost (reaped, cancelled or taken over)");
        break;
      case OQ_ACK_PENDING:
        pend[left++] = j;
        break;
      }
    }
    m = left;
    if (m == 0 || e == OQ_OK)
      break;
    if (!wk_transient(e)) {
      /* nothing in the verdicts explains it: find the culprit one by one */
      OQ_LOG(OQ_LOG_WARN, sid, NULL,
             "batch ack of %zu item(s) failed (%s); acknowledging them one "
             "per transaction",
             m, oq_db_errmsg(db));
      for (size_t k = 0; k < m; k++)
        wk_sql_handle(w, db, pend[k]);
      break;
    }
    if (!wk_keep_trying(w, pend[0], round)) {
      OQ_LOG(OQ_LOG_WARN, sid, NULL,
             "batch ack of %zu item(s) not completed (%s); a reconciliation "
             "sweep releases what is still claimed",
             m, oq_db_errmsg(db));
      for (size_t k = 0; k < m; k++)
        pend[k]->unsettled = true;
      break;
    }
    wk_retry_pause(round, &rng);
    wk_db_revive(db);
  }
  free(items);
  free(pend);
  free(res);
}
