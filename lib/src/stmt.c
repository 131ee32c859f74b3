/*
 * stmt.c: checking a statement by preparing it (protocol-level Parse and
 * Describe, then DEALLOCATE), so nothing in it runs. See stmt.h.
 */
#include <libpq-fe.h>

#include "internal.h"
#include "onceq/stmt.h"

#define STMT_CHECK_NAME "onceq_stmt_check"

/* Record res's error on db: a broken connection is OQ_ERR_CONN, anything
 * else is classified by its SQLSTATE. Clears res. */
static oq_err fail_with(oq_db *db, PGresult *res, const char *what)
{
  PGconn *conn = oq_db_pgconn(db);
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  const char *prim =
      res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  const char *msg = prim ? prim : conn ? PQerrorMessage(conn) : "no connection";
  oq_err code = oq__sqlstate_classify(state);
  if (!res || !conn || PQstatus(conn) == CONNECTION_BAD)
    code = OQ_ERR_CONN;
  if (code == OQ_OK)
    code = OQ_ERR_SQL;
  /* the message goes through the one setter; the PGresult dies here */
  oq_err e = oq__db_fail(db, code, state, "%s: %s", what, msg);
  PQclear(res);
  return e;
}

oq_err oq_stmt_check(oq_db *db, const char *sql, int ntypes,
                     const unsigned int *types, int *nparams)
{
  oq__db_clear(db);
  *nparams = 0;
  PGconn *conn = oq_db_pgconn(db);
  if (!conn)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected");
  PGresult *res = PQprepare(conn, STMT_CHECK_NAME, sql, ntypes, types);
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
    return fail_with(db, res, "prepare");
  PQclear(res);
  oq_err e = OQ_OK;
  res = PQdescribePrepared(conn, STMT_CHECK_NAME);
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
    e = fail_with(db, res, "describe");
    res = NULL;
  } else {
    *nparams = PQnparams(res);
  }
  PQclear(res);
  /* the name is ours and fixed: no caller text in this statement */
  PGresult *d = PQexec(conn, "DEALLOCATE " STMT_CHECK_NAME);
  if (e == OQ_OK && (!d || PQresultStatus(d) != PGRES_COMMAND_OK))
    return fail_with(db, d, "deallocate");
  PQclear(d);
  return e;
}
