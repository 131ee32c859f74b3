/*
 * engine_traits.c (integration): the traits a connection runs with follow
 * ONCEQ_ENGINE_TRAITS (onceq/traits.h), and what they switch really
 * happens on this server. Run in every pass: in the CockroachDB-traits pass
 * of test/run.sh it proves the switch is on (a misspelt value would leave
 * the PostgreSQL traits and fail here), elsewhere that it is off.
 *  - LISTEN is refused without listen_notify (callers poll);
 *  - a fresh database migrates completely either way (one transaction
 *    under the advisory lock, or statement by statement), and again;
 *  - claims over two queues take one statement or one per queue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oq_test.h"

int main(void)
{
  const char *want = getenv(OQ_TRAITS_ENV);
  bool crdb_traits = want && strcmp(want, "cockroachdb") == 0;
  /* a fresh database, migrated by the harness through oq_migrate_run: the
   * per-statement path when the traits say so */
  const char *dsn = oqt_fresh_db("engine_traits", 1);
  oq_db *db = oqt_connect(dsn);
  const oq_engine_traits *t = oq_db_traits(db);
  printf("traits: %s (engine %s, %s=%s)\n", t->name,
         oq_db_engine(db) == OQ_ENGINE_COCKROACH ? "cockroachdb" : "postgres",
         OQ_TRAITS_ENV, want ? want : "");
  if (crdb_traits || oq_db_engine(db) == OQ_ENGINE_COCKROACH)
    ASSERT_STREQ(t->name, "cockroachdb");
  else
    ASSERT_STREQ(t->name, "postgres");

  /* LISTEN: refused exactly when the traits have no NOTIFY */
  oq_err e = oq_db_listen(db, "onceq");
  if (t->listen_notify) {
    ASSERT_OK(db, e);
  } else {
    ASSERT_EQ(e, OQ_ERR_CONFIG);
    ASSERT_CONTAINS(oq_db_errmsg(db), "no LISTEN/NOTIFY");
    printf("ok LISTEN refused: %s\n", oq_db_errmsg(db));
  }

  /* the migration left every version recorded, and a second run (the
   * other path's idempotence: IF NOT EXISTS per statement, or the lock)
   * changes nothing */
  int applied = 0;
  ASSERT_OK(db, oq_migrate_status(db, &applied));
  ASSERT_EQ(applied, oq_migrate_latest());
  int from = -1, to = -1;
  ASSERT_OK(db, oq_migrate_run(db, &from, &to));
  ASSERT_EQ(from, oq_migrate_latest());
  ASSERT_EQ(to, oq_migrate_latest());
  printf("ok migrations: %d versions, %s\n", applied,
         t->transactional_ddl ? "one transaction under the advisory lock"
                              : "statement by statement, no lock");

  /* claims over two queues: per queue exactly when the traits say so */
  ASSERT_EQ(oq__claim_per_queue(db), !t->multi_queue_claim);
  printf("ok claims: %s\n",
         t->multi_queue_claim ? "one statement" : "one statement per queue");
  oq_db_close(db);
  printf("engine_traits: ok\n");
  return 0;
}
