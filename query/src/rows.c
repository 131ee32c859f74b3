/* rows.c: statements in their own restartable transaction (rows.h). */
#include <stdlib.h>
#include <string.h>

#include "rows.h"

const char *qv_rows_get(const qv_rows *r, int row, int col)
{
  if (!r || !r->v || row < 0 || row >= r->nrows || col < 0 || col >= r->ncols)
    return NULL;
  return r->v[(size_t)row * (size_t)r->ncols + (size_t)col];
}

void qv_rows_free(qv_rows *r)
{
  if (!r)
    return;
  if (r->v) {
    size_t n = (size_t)r->nrows * (size_t)r->ncols;
    for (size_t i = 0; i < n; i++)
      free(r->v[i]);
    free(r->v);
  }
  memset(r, 0, sizeof *r);
}

/* Row callback: append one row, growing the array geometrically. */
typedef struct collect {
  qv_rows *rows;
  int cap; /* rows allocated */
} collect;

static oq_err add_row(void *ud, int ncols, const char *const *vals)
{
  collect *c = ud;
  qv_rows *r = c->rows;
  if (r->nrows == 0 && r->ncols == 0)
    r->ncols = ncols;
  if (ncols != r->ncols)
    return OQ_ERR_INVALID;
  if (r->nrows == c->cap) {
    int ncap = c->cap ? c->cap * 2 : 16;
    char **nv =
        realloc(r->v, (size_t)ncap * (size_t)(ncols ? ncols : 1) * sizeof *nv);
    if (!nv)
      return OQ_ERR_NOMEM;
    r->v = nv;
    c->cap = ncap;
  }
  for (int i = 0; i < ncols; i++) {
    char *copy = NULL;
    if (vals[i]) {
      copy = strdup(vals[i]);
      if (!copy) {
        /* keep the table rectangular so qv_rows_free frees what was set */
        for (int j = i; j < ncols; j++)
          r->v[(size_t)r->nrows * (size_t)ncols + (size_t)j] = NULL;
        r->nrows++;
        return OQ_ERR_NOMEM;
      }
    }
    r->v[(size_t)r->nrows * (size_t)ncols + (size_t)i] = copy;
  }
  r->nrows++;
  return OQ_OK;
}

oq_err qv_query_in_tx(oq_db *db, const char *sql, int nparams,
                      const char *const *params, qv_rows *out)
{
  qv_rows_free(out);
  collect c = {out, 0};
  return oq_db_query(db, sql, nparams, params, add_row, &c);
}

typedef struct stmt {
  const char *sql;
  int nparams;
  const char *const *params;
  qv_rows *rows;  /* qv_query: where the rows go */
  long *affected; /* qv_exec */
} stmt;

static oq_err run_query(oq_db *db, void *ud)
{
  stmt *s = ud;
  return qv_query_in_tx(db, s->sql, s->nparams, s->params, s->rows);
}

static oq_err run_exec(oq_db *db, void *ud)
{
  stmt *s = ud;
  return oq_db_exec(db, s->sql, s->nparams, s->params, s->affected);
}

oq_err qv_query(oq_db *db, const char *sql, int nparams,
                const char *const *params, qv_rows *out)
{
  memset(out, 0, sizeof *out);
  stmt s = {sql, nparams, params, out, NULL};
  return oq_db_transact(db, run_query, &s);
}

oq_err qv_exec(oq_db *db, const char *sql, int nparams,
               const char *const *params, long *affected)
{
  long n = 0;
  stmt s = {sql, nparams, params, NULL, &n};
  oq_err e = oq_db_transact(db, run_exec, &s);
  if (affected)
    *affected = e == OQ_OK ? n : 0;
  return e;
}
