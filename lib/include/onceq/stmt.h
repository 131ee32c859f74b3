/*
 * stmt.h: checking a caller's SQL statement without running it (the
 * worker's --sql handler checks its statement once at start-up, docs/design.md
 * §6).
 *
 * Thread safety: like every oq_db call, one thread per oq_db.
 */
#ifndef ONCEQ_STMT_H
#define ONCEQ_STMT_H

#include "onceq/db.h"
#include "onceq/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Prepare sql on db as the unnamed statement with the parameter types
 * types[0..ntypes) (OQ_OID_*) and read how many parameters it uses into
 * *nparams, under one Sync (so through a transaction pooler both reach the
 * same server connection); nothing is executed. A statement that does
 * not parse, names a missing table, is more than one statement, or whose
 * extra parameters the server cannot type fails with the server's error on
 * db (oq_db_errmsg / oq_db_sqlstate; OQ_ERR_SQL or OQ_ERR_INVALID, or
 * OQ_ERR_CONN when the connection broke). A statement that uses more
 * parameters than ntypes but whose types the server could infer succeeds
 * with *nparams > ntypes: the caller decides.
 * Blocks: one round trip; bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_stmt_check(oq_db *db, const char *sql, int ntypes,
                                   const unsigned int *types, int *nparams);

#ifdef __cplusplus
}
#endif
#endif
