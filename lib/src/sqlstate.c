/*
 * sqlstate.c: the one table that turns a SQLSTATE into an oq_err kind, and
 * so decides what is transient (run it again) and what is permanent.
 *
 * Exact codes are matched first, then two-character classes; anything not in
 * the table is OQ_ERR_SQL (permanent: the statement, the data or the schema
 * is wrong, and running it again gives the same answer).
 *
 * Transient: OQ_ERR_RETRY (run the transaction again), OQ_ERR_CONN
 * (reconnect, then run it again), OQ_ERR_TIMEOUT, OQ_ERR_AMBIGUOUS (the
 * outcome must be reconciled first). Permanent: everything else.
 *
 * Class 08 is split by code: only the codes that mean the connection is gone
 * or cannot be made are OQ_ERR_CONN. 08P01 (protocol violation: e.g. "bind
 * message supplies 4 parameters, but prepared statement requires 5") is the
 * statement's fault and happens again on every connection, so it is
 * OQ_ERR_SQL; so is any class-08 code not listed. A connection that really
 * broke is caught by db_conn.c from libpq's CONNECTION_BAD whatever the
 * SQLSTATE.
 *
 * References: PostgreSQL "Appendix A. Error Codes"; CockroachDB reports
 * "restart transaction" errors as 40001 and ambiguous results as 40003
 * (docs: transaction-retry-error-reference, common-errors).
 */
#include <string.h>

#include "internal.h"

#define SQLSTATE_SERIALIZATION_FAILURE "40001"
#define SQLSTATE_DEADLOCK_DETECTED "40P01"
#define SQLSTATE_STATEMENT_COMPLETION_UNKNOWN "40003"
#define SQLSTATE_UNIQUE_VIOLATION "23505"
#define SQLSTATE_QUERY_CANCELED "57014"
#define SQLSTATE_LOCK_NOT_AVAILABLE "55P03"
#define SQLSTATE_ADMIN_SHUTDOWN "57P01"
#define SQLSTATE_CRASH_SHUTDOWN "57P02"
#define SQLSTATE_CANNOT_CONNECT_NOW "57P03"
#define SQLSTATE_TOO_MANY_CONNECTIONS "53300"
#define SQLSTATE_IDLE_SESSION_TIMEOUT "57P05"
#define SQLSTATE_CONNECTION_EXCEPTION "08000"
#define SQLSTATE_SQLCLIENT_UNABLE_TO_CONNECT "08001"
#define SQLSTATE_CONNECTION_DOES_NOT_EXIST "08003"
#define SQLSTATE_SERVER_REJECTED_CONNECTION "08004"
#define SQLSTATE_CONNECTION_FAILURE "08006"
#define SQLSTATE_TRANSACTION_RESOLUTION_UNKNOWN "08007"
#define SQLSTATE_PROTOCOL_VIOLATION "08P01"
#define SQLSTATE_FEATURE_NOT_SUPPORTED "0A000"
#define SQLSTATE_INVALID_SQL_STATEMENT_NAME "26000"
#define SQLSTATE_DUPLICATE_PREPARED_STATEMENT "42P05"
#define SQLSTATE_FOREIGN_KEY_VIOLATION "23503"
#define SQLSTATE_DIVISION_BY_ZERO "22012"
#define SQLSTATE_UNDEFINED_TABLE "42P01"
#define SQLSTATE_CHECK_VIOLATION "23514"
#define SQLSTATE_IN_FAILED_SQL_TRANSACTION "25P02"
#define SQLSTATE_PROGRAM_LIMIT_EXCEEDED "54000"
#define SQLSTATE_STATEMENT_TOO_COMPLEX "54001"
#define SQLSTATE_READ_ONLY_SQL_TRANSACTION "25006"

static const struct {
  const char *code; /* 5 chars: exact; 2 chars: class */
  oq_err err;
} table[] = {
    /* class 40: transaction rollback */
    {SQLSTATE_SERIALIZATION_FAILURE, OQ_ERR_RETRY},
    {SQLSTATE_DEADLOCK_DETECTED, OQ_ERR_RETRY},
    {SQLSTATE_STATEMENT_COMPLETION_UNKNOWN, OQ_ERR_AMBIGUOUS},
    /* class 23: integrity constraint violation */
    {SQLSTATE_UNIQUE_VIOLATION, OQ_ERR_CONFLICT},
    /* timeouts */
    {SQLSTATE_QUERY_CANCELED, OQ_ERR_TIMEOUT},
    {SQLSTATE_LOCK_NOT_AVAILABLE, OQ_ERR_TIMEOUT},
    /* the server is going away or cannot take us now */
    {SQLSTATE_ADMIN_SHUTDOWN, OQ_ERR_CONN},
    {SQLSTATE_CRASH_SHUTDOWN, OQ_ERR_CONN},
    {SQLSTATE_CANNOT_CONNECT_NOW, OQ_ERR_CONN},
    {SQLSTATE_TOO_MANY_CONNECTIONS, OQ_ERR_CONN},
    {SQLSTATE_IDLE_SESSION_TIMEOUT, OQ_ERR_CONN},
    /* a write on a server that takes none: a demoted old primary still up,
     * a standby reached without target_session_attrs. The server's state,
     * not the statement's: connect again (db_conn.c drops the connection,
     * and libpq's target_session_attrs=read-write then skips that host) */
    {SQLSTATE_READ_ONLY_SQL_TRANSACTION, OQ_ERR_CONN},
    /* class 08, connection exception: only connection loss is OQ_ERR_CONN */
    {SQLSTATE_CONNECTION_EXCEPTION, OQ_ERR_CONN},
    {SQLSTATE_SQLCLIENT_UNABLE_TO_CONNECT, OQ_ERR_CONN},
    {SQLSTATE_CONNECTION_DOES_NOT_EXIST, OQ_ERR_CONN},
    {SQLSTATE_SERVER_REJECTED_CONNECTION, OQ_ERR_CONN},
    {SQLSTATE_CONNECTION_FAILURE, OQ_ERR_CONN},
    {SQLSTATE_TRANSACTION_RESOLUTION_UNKNOWN, OQ_ERR_AMBIGUOUS},
    {SQLSTATE_PROTOCOL_VIOLATION, OQ_ERR_SQL}, /* the statement's fault */
    {"08", OQ_ERR_SQL}, /* any other 08 code: permanent (see above) */
    /* classes */
    {"28", OQ_ERR_AUTH},    /* invalid authorization specification */
    {"22", OQ_ERR_INVALID}, /* data exception: bad JSON, bad timestamp */
};

oq_err oq__sqlstate_classify(const char *sqlstate)
{
  if (!sqlstate || strlen(sqlstate) != 5)
    return OQ_ERR_SQL;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    size_t n = strlen(table[i].code);
    if (strncmp(sqlstate, table[i].code, n) == 0)
      return table[i].err;
  }
  return OQ_ERR_SQL;
}

/* The codes other modules and the programs name (onceq/sqlstate.h), in its
 * order: the only place they are written as text. */
static const char *const named[OQ_SQLSTATE__COUNT] = {
    [OQ_SQLSTATE_FEATURE_NOT_SUPPORTED] = SQLSTATE_FEATURE_NOT_SUPPORTED,
    [OQ_SQLSTATE_INVALID_STATEMENT_NAME] = SQLSTATE_INVALID_SQL_STATEMENT_NAME,
    [OQ_SQLSTATE_DUPLICATE_PREPARED] = SQLSTATE_DUPLICATE_PREPARED_STATEMENT,
    [OQ_SQLSTATE_FOREIGN_KEY_VIOLATION] = SQLSTATE_FOREIGN_KEY_VIOLATION,
    [OQ_SQLSTATE_DIVISION_BY_ZERO] = SQLSTATE_DIVISION_BY_ZERO,
    [OQ_SQLSTATE_UNDEFINED_TABLE] = SQLSTATE_UNDEFINED_TABLE,
    [OQ_SQLSTATE_CHECK_VIOLATION] = SQLSTATE_CHECK_VIOLATION,
    [OQ_SQLSTATE_UNIQUE_VIOLATION] = SQLSTATE_UNIQUE_VIOLATION,
    [OQ_SQLSTATE_IN_FAILED_TRANSACTION] = SQLSTATE_IN_FAILED_SQL_TRANSACTION,
    [OQ_SQLSTATE_PROGRAM_LIMIT_EXCEEDED] = SQLSTATE_PROGRAM_LIMIT_EXCEEDED,
    [OQ_SQLSTATE_STATEMENT_TOO_COMPLEX] = SQLSTATE_STATEMENT_TOO_COMPLEX,
    [OQ_SQLSTATE_READ_ONLY_TRANSACTION] = SQLSTATE_READ_ONLY_SQL_TRANSACTION,
};

const char *oq_sqlstate_code(oq_sqlstate code)
{
  return (int)code >= 0 && code < OQ_SQLSTATE__COUNT ? named[code] : "";
}

bool oq__sqlstate_is(const char *sqlstate, oq_sqlstate code)
{
  return sqlstate && strcmp(sqlstate, oq_sqlstate_code(code)) == 0;
}

bool oq__sqlstate_prepared_gone(const char *sqlstate)
{
  return oq__sqlstate_is(sqlstate, OQ_SQLSTATE_INVALID_STATEMENT_NAME) ||
         oq__sqlstate_is(sqlstate, OQ_SQLSTATE_FEATURE_NOT_SUPPORTED) ||
         oq__sqlstate_is(sqlstate, OQ_SQLSTATE_DUPLICATE_PREPARED);
}

bool oq__sqlstate_is_restart(const char *sqlstate)
{
  return sqlstate && (strcmp(sqlstate, SQLSTATE_SERIALIZATION_FAILURE) == 0 ||
                      strcmp(sqlstate, SQLSTATE_DEADLOCK_DETECTED) == 0);
}
