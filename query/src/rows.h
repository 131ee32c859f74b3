/*
 * rows.h: the one way the read views, the coordinator and the CLI
 * (schedule) run a statement and read its rows: in its own transaction, re-run
 * on restarts (40001/40P01, CockroachDB "restart transaction") by
 * oq_db_transact, with the rows copied out so that no PGresult escapes and a
 * re-run starts from an empty result. The listing views (views.c) stream rows
 * straight from oq_db_query into their output instead, once: a re-run would
 * print its rows twice, and a copy would hold a long listing twice.
 *
 * Terms: a qv_rows is a rectangular copy of a result, text values, NULL
 * for SQL NULL.
 *
 * Thread safety: as oq_db (one thread per connection); qv_rows are plain
 * memory.
 */
#ifndef ONCEQ_QUERY_ROWS_H
#define ONCEQ_QUERY_ROWS_H

#include "onceq/onceq.h"

typedef struct qv_rows {
  int nrows;
  int ncols;
  char **v; /* nrows * ncols values, row-major; NULL = SQL NULL */
} qv_rows;

/* Value at (row, col), or NULL (SQL NULL or out of range). */
const char *qv_rows_get(const qv_rows *r, int row, int col);
/* Free the values and zero *r. NULL and an empty r are fine. */
void qv_rows_free(qv_rows *r);

/*
 * Run one statement in its own transaction (restarts re-run it) and copy
 * its rows into *out (free with qv_rows_free, also on failure). Errors are
 * reported on db.
 */
OQ_MUST_CHECK oq_err qv_query(oq_db *db, const char *sql, int nparams,
                              const char *const *params, qv_rows *out);

/* Like qv_query for a statement whose rows are not wanted; *affected (may
 * be NULL) gets the row count of the run that committed. */
OQ_MUST_CHECK oq_err qv_exec(oq_db *db, const char *sql, int nparams,
                             const char *const *params, long *affected);

/* Inside a caller's transaction: run sql and copy its rows (no retry; the
 * caller's oq_db_transact re-runs the whole body). */
OQ_MUST_CHECK oq_err qv_query_in_tx(oq_db *db, const char *sql, int nparams,
                                    const char *const *params, qv_rows *out);

#endif
