/*
 * sqlstate.h: the SQLSTATE codes the library and its programs act on, by
 * name. The five characters of each are written once, in the library's
 * classification table (lib/src/sqlstate.c), so code that must tell one
 * server error from another (a missing table, a refused foreign key) names
 * it here instead of comparing a literal (the style lint checks it).
 *
 * Thread safety: all functions are pure (oq_db_sqlstate_is reads the
 * handle, which belongs to one thread like every oq_db call).
 */
#ifndef ONCEQ_SQLSTATE_H
#define ONCEQ_SQLSTATE_H

#include <stdbool.h>

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The named codes (PostgreSQL "Appendix A. Error Codes"). */
typedef enum oq_sqlstate {
  OQ_SQLSTATE_FEATURE_NOT_SUPPORTED,  /* 0A000 */
  OQ_SQLSTATE_INVALID_STATEMENT_NAME, /* 26000: no such prepared stmt */
  OQ_SQLSTATE_DUPLICATE_PREPARED,     /* 42P05: the name is taken */
  OQ_SQLSTATE_FOREIGN_KEY_VIOLATION,  /* 23503 */
  OQ_SQLSTATE_DIVISION_BY_ZERO,       /* 22012 */
  OQ_SQLSTATE_UNDEFINED_TABLE,        /* 42P01: not migrated */
  OQ_SQLSTATE_CHECK_VIOLATION,        /* 23514 */
  OQ_SQLSTATE_UNIQUE_VIOLATION,       /* 23505 */
  OQ_SQLSTATE_IN_FAILED_TRANSACTION,  /* 25P02: transaction aborted */
  OQ_SQLSTATE_PROGRAM_LIMIT_EXCEEDED, /* 54000 */
  OQ_SQLSTATE_STATEMENT_TOO_COMPLEX,  /* 54001: e.g. JSON nested too deep */
  OQ_SQLSTATE_READ_ONLY_TRANSACTION,  /* 25006: the server takes no writes */
  OQ_SQLSTATE__COUNT
} oq_sqlstate;

/* The five characters of code ("" for a value out of range): a static
 * string, never freed.
 * Blocks: never. */
const char *oq_sqlstate_code(oq_sqlstate code);

/* Whether the last error on db (oq_db_sqlstate) is code; false when db is
 * NULL or holds no error.
 * Blocks: never. */
bool oq_db_sqlstate_is(const oq_db *db, oq_sqlstate code);

#ifdef __cplusplus
}
#endif
#endif
