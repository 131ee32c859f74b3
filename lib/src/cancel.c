/*
 * cancel.c: cancelling live items in the caller's transaction (cancel.h):
 * lock the live ids, then either say where the others are or delete them
 * all with their 'cancelled' result rows (OQ__SQL_CANCEL_*, dialect.c).
 */
#include <stdlib.h>

#include "internal.h"

/* The caller's row callback, and how many rows it has seen. */
typedef struct counted {
  oq_row_fn fn;
  void *ud;
  size_t rows;
} counted;

static oq_err count_row(void *ud, int ncols, const char *const *vals)
{
  counted *c = ud;
  c->rows++;
  return c->fn ? c->fn(c->ud, ncols, vals) : OQ_OK;
}

oq_err oq_cancel(oq_db *db, const char *const *ids, size_t n, oq_row_fn on_row,
                 void *ud, long *cancelled)
{
  oq_engine eng = oq_db_engine(db);
  counted live = {on_row, ud, 0};
  if (cancelled)
    *cancelled = 0;
  char *array = oq__text_array(ids, n);
  if (!array)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const char *p[1] = {array};
  oq_err e = oq_db_query(db, oq__sql(eng, OQ__SQL_CANCEL_LOCK), 1, p, count_row,
                         &live);
  if (e != OQ_OK)
    goto out;
  if (live.rows < n) { /* commit nothing but the lookups */
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_CANCEL_CLASSIFY), 1, p, on_row,
                    ud);
    goto out;
  }
  e = oq_db_exec(db, oq__sql(eng, OQ__SQL_CANCEL), 1, p, cancelled);
out:
  free(array);
  return e;
}
