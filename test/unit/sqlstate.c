/*
 * sqlstate.c (unit): the SQLSTATE table decides transient versus permanent,
 * one check per class and per special code. In particular 08P01 (protocol
 * violation, e.g. a --sql statement that uses $5) is permanent, not a lost
 * connection: callers retry OQ_ERR_CONN, and retrying 08P01 never ends.
 */
#include "oq_test.h"

#include "internal.h"

static void check(const char *state, oq_err want)
{
  oq_err got = oq__sqlstate_classify(state);
  if (got != want)
    OQT_FAIL("classify(%s) = %s (%d), want %s (%d)", state ? state : "NULL",
             oq_strerror(got), (int)got, oq_strerror(want), (int)want);
}

int main(void)
{
  /* not a SQLSTATE */
  check(NULL, OQ_ERR_SQL);
  check("", OQ_ERR_SQL);
  check("08", OQ_ERR_SQL);
  check("08P011", OQ_ERR_SQL);

  /* class 08: connection loss is OQ_ERR_CONN, the rest permanent */
  check("08000", OQ_ERR_CONN);
  check("08001", OQ_ERR_CONN);
  check("08003", OQ_ERR_CONN);
  check("08004", OQ_ERR_CONN);
  check("08006", OQ_ERR_CONN);
  check("08007", OQ_ERR_AMBIGUOUS);
  check("08P01", OQ_ERR_SQL);
  check("08999", OQ_ERR_SQL);

  /* class 40: transaction rollback */
  check("40001", OQ_ERR_RETRY);
  check("40P01", OQ_ERR_RETRY);
  check("40003", OQ_ERR_AMBIGUOUS);
  check("40002", OQ_ERR_SQL); /* integrity violation at commit */
  ASSERT(oq__sqlstate_is_restart("40001"));
  ASSERT(oq__sqlstate_is_restart("40P01"));
  ASSERT(!oq__sqlstate_is_restart("40003"));
  ASSERT(!oq__sqlstate_is_restart("08P01"));
  ASSERT(!oq__sqlstate_is_restart(NULL));

  /* class 23: integrity constraint violation */
  check("23505", OQ_ERR_CONFLICT);
  check("23503", OQ_ERR_SQL); /* foreign key */
  check("23502", OQ_ERR_SQL); /* not null */

  /* class 22: data exception (bad JSON, bad timestamp, bad UTF-8) */
  check("22P02", OQ_ERR_INVALID);
  check("22021", OQ_ERR_INVALID); /* invalid byte sequence for encoding */
  check("22007", OQ_ERR_INVALID);

  /* class 28: invalid authorization */
  check("28P01", OQ_ERR_AUTH);
  check("28000", OQ_ERR_AUTH);

  /* class 53/55/57: resources, object state, operator intervention */
  check("53300", OQ_ERR_CONN);
  check("53100", OQ_ERR_SQL); /* disk full */
  check("55P03", OQ_ERR_TIMEOUT);
  check("55000", OQ_ERR_SQL);
  check("57014", OQ_ERR_TIMEOUT);
  check("57P01", OQ_ERR_CONN);
  check("57P02", OQ_ERR_CONN);
  check("57P03", OQ_ERR_CONN);
  check("57P05", OQ_ERR_CONN);

  /* class 42 and others: the statement or the schema is wrong */
  check("42601", OQ_ERR_SQL); /* syntax error */
  check("42P01", OQ_ERR_SQL); /* undefined table */
  check("42P02", OQ_ERR_SQL); /* undefined parameter ($5) */
  check("0A000", OQ_ERR_SQL);
  check("25P02", OQ_ERR_SQL);
  check("25006", OQ_ERR_CONN); /* a read-only server: connect again */
  check("XX000", OQ_ERR_SQL);
  /* the named codes (onceq/sqlstate.h): each one five characters, the
   * ones the programs compare with spelled as the server sends them */
  for (int c = 0; c < OQ_SQLSTATE__COUNT; c++)
    ASSERT(strlen(oq_sqlstate_code((oq_sqlstate)c)) == 5);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_UNDEFINED_TABLE), "42P01") == 0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_FOREIGN_KEY_VIOLATION), "23503") ==
         0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_CHECK_VIOLATION), "23514") == 0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_UNIQUE_VIOLATION), "23505") == 0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_IN_FAILED_TRANSACTION), "25P02") ==
         0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_PROGRAM_LIMIT_EXCEEDED),
                "54000") == 0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE_STATEMENT_TOO_COMPLEX), "54001") ==
         0);
  ASSERT(strcmp(oq_sqlstate_code(OQ_SQLSTATE__COUNT), "") == 0);
  ASSERT(oq__sqlstate_is("42P01", OQ_SQLSTATE_UNDEFINED_TABLE));
  ASSERT(!oq__sqlstate_is("42P02", OQ_SQLSTATE_UNDEFINED_TABLE));
  ASSERT(!oq__sqlstate_is(NULL, OQ_SQLSTATE_UNDEFINED_TABLE));
  ASSERT(!oq_db_sqlstate_is(NULL, OQ_SQLSTATE_UNDEFINED_TABLE));
  printf("PASS unit_lib_sqlstate\n");
  return 0;
}
