/*
 * claim.c: claiming ready items for a session (item.h). Claims decide only
 * where to look; the ack's claim check decides who may acknowledge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct claim_acc {
  oq_item *items; /* grows up to cap */
  size_t n;
  size_t cap;
  bool nomem;
} claim_acc;

static char *dupstr(const char *s)
{
  return strdup(s ? s : "");
}

static oq_err add_row(void *ud, int ncols, const char *const *v)
{
  claim_acc *a = ud;
  if (ncols < 8 || a->n >= a->cap)
    return OQ_OK;
  oq_item *it = &a->items[a->n];
  memset(it, 0, sizeof *it);
  snprintf(it->id, sizeof it->id, "%s", v[0] ? v[0] : "");
  it->queue = dupstr(v[1]);
  it->payload = dupstr(v[2]);
  if (!it->queue || !it->payload) {
    free(it->queue);
    free(it->payload);
    a->nomem = true;
    return OQ_ERR_NOMEM;
  }
  it->attempt = v[3] ? atoi(v[3]) : 0;
  it->max_attempts = v[4] ? atoi(v[4]) : 0;
  it->priority = v[5] ? atoi(v[5]) : 0;
  it->enqueued_at_us = v[6] ? strtoll(v[6], NULL, 10) : 0;
  it->claimed_at_us = v[7] ? strtoll(v[7], NULL, 10) : 0;
  a->n++;
  return OQ_OK;
}

oq_err oq_claim(oq_db *db, const oq_session *s, const char *const *queues,
                size_t nqueues, int max, oq_item **items, size_t *n)
{
  *items = NULL;
  *n = 0;
  oq__db_clear(db);
  if (max <= 0 || nqueues == 0 || !queues)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "claim needs at least one queue and max > 0");
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
  char *qarr = oq__text_array(queues, nqueues);
  claim_acc acc = {.items = calloc((size_t)max, sizeof(oq_item)),
                   .cap = (size_t)max};
  if (!qarr || !acc.items) {
    free(qarr);
    free(acc.items);
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  char lim[16];
  snprintf(lim, sizeof lim, "%d", max);
  const char *params[3] = {oq_session_id(s), qarr, lim};
  oq_err e = oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_CLAIM), 3,
                                params, add_row, &acc, NULL);
  free(qarr);
  if (e == OQ_ERR_SQL && strcmp(oq_db_sqlstate(db), "23503") == 0)
    /* foreign_key_violation: our session row is gone */
    e = oq__db_fail(db, OQ_ERR_SESSION_LOST, "23503",
                    "session %s no longer exists (reaped); open a new "
                    "session",
                    oq_session_id(s));
  if (e != OQ_OK) {
    oq_items_free(acc.items, acc.n);
    return acc.nomem ? oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory") : e;
  }
  if (acc.n == 0) {
    free(acc.items);
    acc.items = NULL;
  }
  *items = acc.items;
  *n = acc.n;
  return OQ_OK;
}

void oq_items_free(oq_item *items, size_t n)
{
  if (!items)
    return;
  for (size_t i = 0; i < n; i++) {
    free(items[i].queue);
    free(items[i].payload);
  }
  free(items);
}
