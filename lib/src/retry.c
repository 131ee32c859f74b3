/*
 * retry.c: moving dead items back to onceq_items in the caller's
 * transaction (retry.h; the statements: OQ__SQL_RETRY_*, dialect.c).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The caller's check callback, and whether a row blocks the retry. */
typedef struct checked {
  oq_row_fn fn;
  void *ud;
  bool blocked;
} checked;

static oq_err check_row(void *ud, int ncols, const char *const *v)
{
  checked *c = ud;
  if (ncols < 4)
    return OQ_ERR_SQL;
  /* not dead, or a live item holds its unique key */
  if (!v[1] || strcmp(v[1], "dead") != 0 || (v[2] && *v[2]))
    c->blocked = true;
  return c->fn ? c->fn(c->ud, ncols, v) : OQ_OK;
}

static oq_err read_count(void *ud, int ncols, const char *const *v)
{
  long *n = ud;
  if (ncols > 0 && v[0])
    *n = strtol(v[0], NULL, 10);
  return OQ_OK;
}

oq_err oq_retry_dead(oq_db *db, const char *const *ids, size_t n,
                     oq_row_fn on_check, oq_row_fn on_moved, void *ud,
                     bool *blocked)
{
  oq_engine eng = oq_db_engine(db);
  checked c = {on_check, ud, false};
  if (blocked)
    *blocked = false;
  char *array = oq__text_array(ids, n);
  if (!array)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const char *p[1] = {array};
  oq_err e =
      oq_db_query(db, oq__sql(eng, OQ__SQL_RETRY_LOCK), 1, p, NULL, NULL);
  if (e == OQ_OK)
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_RETRY_CHECK), 1, p, check_row, &c);
  if (blocked)
    *blocked = c.blocked;
  /* blocked: commit nothing but the lookups */
  if (e == OQ_OK && !c.blocked)
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_RETRY_IDS), 1, p, on_moved, ud);
  free(array);
  return e;
}

oq_err oq_retry_all_dead(oq_db *db, const char *queue, oq_row_fn on_moved,
                         void *ud, long *kept)
{
  oq_engine eng = oq_db_engine(db);
  long k = 0;
  const char *p[1] = {queue};
  oq_err e =
      oq_db_query(db, oq__sql(eng, OQ__SQL_RETRY_ALL), 1, p, on_moved, ud);
  if (e == OQ_OK)
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_RETRY_KEPT), 1, p, read_count, &k);
  if (kept)
    *kept = k;
  return e;
}
