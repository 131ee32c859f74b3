/*
 * sqlstate.c: the one table that turns a SQLSTATE into an oq_err kind.
 * Exact codes are matched first, then two-character classes.
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

static const struct {
  const char *code; /* 5 chars: exact; 2 chars: class */
  oq_err err;
} table[] = {
    {SQLSTATE_SERIALIZATION_FAILURE, OQ_ERR_RETRY},
    {SQLSTATE_DEADLOCK_DETECTED, OQ_ERR_RETRY},
    {SQLSTATE_STATEMENT_COMPLETION_UNKNOWN, OQ_ERR_AMBIGUOUS},
    {SQLSTATE_UNIQUE_VIOLATION, OQ_ERR_CONFLICT},
    {SQLSTATE_QUERY_CANCELED, OQ_ERR_TIMEOUT},
    {SQLSTATE_LOCK_NOT_AVAILABLE, OQ_ERR_TIMEOUT},
    {SQLSTATE_ADMIN_SHUTDOWN, OQ_ERR_CONN},
    {SQLSTATE_CRASH_SHUTDOWN, OQ_ERR_CONN},
    {SQLSTATE_CANNOT_CONNECT_NOW, OQ_ERR_CONN},
    {SQLSTATE_TOO_MANY_CONNECTIONS, OQ_ERR_CONN},
    {SQLSTATE_IDLE_SESSION_TIMEOUT, OQ_ERR_CONN},
    {"08", OQ_ERR_CONN},    /* connection exception */
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

bool oq__sqlstate_is_restart(const char *sqlstate)
{
  return sqlstate && (strcmp(sqlstate, SQLSTATE_SERIALIZATION_FAILURE) == 0 ||
                      strcmp(sqlstate, SQLSTATE_DEADLOCK_DETECTED) == 0);
}
