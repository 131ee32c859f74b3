/*
 * dead.c: the notification mark on a dead letter (dead.h): the only code
 * that writes onceq_dead's notified_at and notify_status.
 */
#include <stdio.h>

#include "internal.h"

/* died_at: a retried item that died again is a new death, not this one. */
static const char SQL_MARK[] =
    "UPDATE onceq_dead SET notified_at = now(), notify_status = $2::int"
    " WHERE id = $1::uuid AND died_at = $3::timestamptz"
    " AND notified_at IS NULL";

typedef struct mark {
  const char *const *params;
  long marked;
} mark;

static oq_err mark_tx(oq_db *db, void *ud)
{
  mark *m = ud;
  return oq_db_exec(db, SQL_MARK, 3, m->params, &m->marked);
}

oq_err oq_dead_mark_notified(oq_db *db, const char *id, const char *died_at,
                             long http_status, long *marked)
{
  char st[16];
  snprintf(st, sizeof st, "%ld", http_status);
  const char *p[3] = {id, st, died_at};
  mark m = {.params = p, .marked = 0};
  oq_err e = oq_db_transact(db, mark_tx, &m);
  if (marked)
    *marked = e == OQ_OK ? m.marked : 0;
  return e;
}
