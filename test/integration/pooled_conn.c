/*
 * pooled_conn.c (integration): the parts of pooler support that a direct
 * connection shows too (docs/deployment.md, "Poolers and high
 * availability"; the pgbouncer tests are it_worker_pgbouncer,
 * it_cli_pgbouncer and chaos_worker_pgbouncer):
 *  - a direct connection is not taken for a pooled one;
 *  - two connections name the same statement differently (a per-connection
 *    nonce), so no client can Bind another's statement;
 *  - oq_db_set_async_commits: a single statement runs with
 *    synchronous_commit = off in its own implicit transaction, nothing of
 *    it outlives that statement, and a transaction's statements keep the
 *    session's setting.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "oq_test.h"

static oq_err probe_in_tx(oq_db *db, void *ud)
{
  long *v = ud;
  *v = oqt_scalar(db, "SELECT (current_setting('synchronous_commit') = "
                      "'off')::int");
  return OQ_OK;
}

int main(void)
{
  const char *dsn = oqt_fresh_db("pooled_conn", 0);
  oq_db *a = oqt_connect(dsn);
  oq_db *b = oqt_connect(dsn);
  if (oq_db_engine(a) != OQ_ENGINE_POSTGRES) {
    printf("SKIP: PostgreSQL only\n");
    return 77;
  }
  ASSERT_EQ(oq_db_pooled(a), false);

  /* the same SQL, two connections: two names */
  char na[32], nb[32];
  const char *sql = "SELECT $1::int + 1";
  ASSERT_OK(a, oq__db_prepare_once(a, sql, 1, NULL, na, sizeof na, NULL));
  ASSERT_OK(b, oq__db_prepare_once(b, sql, 1, NULL, nb, sizeof nb, NULL));
  printf("names: %s, %s\n", na, nb);
  ASSERT_EQ(strncmp(na, "oq_p", 4), 0);
  ASSERT_NE(strcmp(na, nb), 0);

  const char *probe =
      "SELECT (current_setting('synchronous_commit') = 'off')::int";
  ASSERT_EQ(oqt_scalar(a, probe), 0);
  oq_db_set_async_commits(a, true);
  ASSERT_EQ(oqt_scalar(a, probe), 1); /* its own implicit transaction */
  long in_tx = -1;
  ASSERT_OK(a, oq_db_transact(a, probe_in_tx, &in_tx));
  ASSERT_EQ(in_tx, 0); /* a transaction keeps the session's setting */
  oq_db_set_async_commits(a, false);
  ASSERT_EQ(oqt_scalar(a, probe), 0); /* nothing outlived the statement */
  printf("ok async commits: per statement, not in transactions, not after\n");

  oq_db_close(a);
  oq_db_close(b);
  return 0;
}
