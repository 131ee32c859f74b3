/*
 * db_pipeline.h: many statements in one round trip (db_pipeline.c), and the
 * Parse+Describe pipeline that checks a statement.
 * Included through internal.h; see db_state.h for the connection files.
 */
#ifndef ONCEQ_DB_PIPELINE_H
#define ONCEQ_DB_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

/* One statement of a pipeline (oq__db_pipeline). */
typedef struct oq__pstmt {
  const char *sql;
  const char *prepared; /* when set: run this prepared statement instead */
  int nparams;
  const unsigned int *types; /* may be NULL: infer */
  const char *const *params;
  oq_row_fn rows; /* may be NULL: rows discarded */
  void *ud;
  char **first_row; /* may be NULL; else out: the first row as JSON
                       (oq__pgresult_row_json, free()), NULL: no row */
  /* may be NULL; else called when every earlier statement's results are
   * in, before this one is sent (its params may depend on them). The
   * transaction stays open meanwhile: one more round trip, not a commit.
   * A non-OK return fails the pipeline at this statement. */
  oq_err (*before)(void *before_ud, struct oq__pstmt *self);
  void *before_ud;
  long affected; /* out: rows affected/returned, -1 unknown */
} oq__pstmt;

/*
 * Send n statements in one pipeline (libpq pipeline mode: one Sync, so one
 * round trip for all of them) and collect their results, each within the
 * connection's deadline. *failed gets the index of the first statement that
 * failed, or -1. Statements after a failure are not run (the server skips
 * them until the Sync). Returns OQ_OK when all succeeded; the first
 * failure's error otherwise (details on db). A connection lost before every
 * result arrived gives OQ_ERR_AMBIGUOUS when no statement had failed yet
 * and the last statement had been sent (it, a COMMIT, may have run), else
 * OQ_ERR_CONN. A statement with a before hook splits the pipeline in two
 * round trips (the Sync only follows the last statement).
 */
oq_err oq__db_pipeline(oq_db *db, oq__pstmt *stmts, size_t n, long *failed);

/* Parse sql unnamed and describe it in one pipeline (one Sync, so one
 * server connection even behind a transaction pooler); nothing runs.
 * *nparams_out and *ncols_out may be NULL. `what` heads the error. */
OQ_MUST_CHECK oq_err oq__db_describe_unnamed(oq_db *db, const char *sql,
                                             int nparams,
                                             const unsigned int *types,
                                             int *nparams_out, int *ncols_out,
                                             const char *what);

#endif
