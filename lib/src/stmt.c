/*
 * stmt.c: checking a statement by preparing it (protocol-level Parse and
 * Describe of the unnamed statement, under one Sync), so nothing in it
 * runs. See stmt.h.
 */
#include "internal.h"
#include "onceq/stmt.h"

oq_err oq_stmt_check(oq_db *db, const char *sql, int ntypes,
                     const unsigned int *types, int *nparams)
{
  *nparams = 0;
  /* unnamed, Parse and Describe under one Sync: nothing to deallocate, and
   * nothing another client of a transaction pooler could meet (a fixed
   * name did: two workers through pgbouncer failed with 26000 and 42P05) */
  return oq__db_describe_unnamed(db, sql, ntypes, types, nparams, NULL,
                                 "prepare");
}
