/*
 * migrate_statements.c: the statement-at-a-time runner that applies the
 * CockroachDB migrations, run against a real server. PostgreSQL does not
 * know CONFIGURE ZONE, so it refuses that statement the way a multi-tenant
 * CockroachDB cluster refuses a zone setting: the runner must log one
 * warning naming the statement and carry on, while any other failing
 * statement stops the script with its error (also one whose comment
 * mentions CONFIGURE ZONE). A restart error (40001) is retried. Comment-
 * only chunks are skipped; a re-run of an idempotent script is a no-op.
 */
#include <pthread.h>

#include "internal.h"
#include "oq_test.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int warnings;
static char last_warning[1024];

static void sink(void *ud, oq_log_level level, const char *session,
                 const char *item, const char *msg)
{
  (void)ud;
  (void)session;
  (void)item;
  if (level != OQ_LOG_WARN)
    return;
  pthread_mutex_lock(&mu);
  warnings++;
  snprintf(last_warning, sizeof last_warning, "%s", msg);
  pthread_mutex_unlock(&mu);
}

static const char script_ok[] =
    "-- a comment-only chunk;\n"
    "CREATE TABLE IF NOT EXISTS ms_a (id INT PRIMARY KEY);\n"
    "-- refused here, as on a multi-tenant cluster\n"
    "ALTER TABLE ms_a CONFIGURE ZONE USING gc.ttlseconds = 600;\n"
    "CREATE TABLE IF NOT EXISTS ms_b (id INT PRIMARY KEY);\n";

static const char script_bad[] =
    "CREATE TABLE IF NOT EXISTS ms_c (id INT PRIMARY KEY);\n"
    "CREATE TABLE ms_d (id INT REFERENCES no_such_table (id));\n"
    "CREATE TABLE IF NOT EXISTS ms_e (id INT PRIMARY KEY);\n";

static const char script_comment[] =
    "-- not optional, although this comment says CONFIGURE ZONE\n"
    "CREATE TABLE ms_f (id INT REFERENCES no_such_table (id));\n";

/* fails twice with 40001, then runs */
static const char script_restart[] =
    "DO $$ BEGIN IF nextval('ms_r') < 3 THEN RAISE EXCEPTION 'conflict' "
    "USING ERRCODE = 'serialization_failure'; END IF; END $$;\n"
    "CREATE TABLE IF NOT EXISTS ms_g (id INT PRIMARY KEY);\n";

static long table_exists(oq_db *db, const char *name)
{
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM pg_tables WHERE tablename = '%s'", name);
  return oqt_scalar(db, sql);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("migrate_statements", 0);
  oq_db *db = oqt_connect(dsn);
  oq_log_set_sink(sink, NULL, OQ_LOG_WARN);

  /* the refused setting is skipped with one warning; the rest runs */
  ASSERT_OK(db, oq__migrate_run_statements(db, script_ok));
  ASSERT_EQ(table_exists(db, "ms_a"), 1);
  ASSERT_EQ(table_exists(db, "ms_b"), 1);
  ASSERT_EQ(warnings, 1);
  ASSERT_CONTAINS(last_warning, "skipped a storage setting");
  ASSERT_CONTAINS(last_warning,
                  "ALTER TABLE ms_a CONFIGURE ZONE USING gc.ttlseconds = 600");
  ASSERT_NOT_CONTAINS(last_warning, "-- refused here");
  ASSERT_STREQ(oq_db_sqlstate(db), "");

  /* idempotent: a second run changes nothing and warns again */
  ASSERT_OK(db, oq__migrate_run_statements(db, script_ok));
  ASSERT_EQ(warnings, 2);

  /* any other failure stops the script where it failed */
  ASSERT_ERR(OQ_ERR_SQL, oq__migrate_run_statements(db, script_bad));
  ASSERT_CONTAINS(oq_db_errmsg(db), "no_such_table");
  ASSERT_EQ(table_exists(db, "ms_c"), 1);
  ASSERT_EQ(table_exists(db, "ms_d"), 0);
  ASSERT_EQ(table_exists(db, "ms_e"), 0);
  ASSERT_EQ(warnings, 2);

  /* only the zone statement itself is optional, not one whose comment
   * mentions it */
  ASSERT_ERR(OQ_ERR_SQL, oq__migrate_run_statements(db, script_comment));
  ASSERT_EQ(table_exists(db, "ms_f"), 0);
  ASSERT_EQ(warnings, 2);

  /* a restart error (40001) is retried under the db's policy */
  oqt_exec(db, "CREATE SEQUENCE ms_r");
  uint64_t before = oq_db_restarts(db);
  ASSERT_OK(db, oq__migrate_run_statements(db, script_restart));
  ASSERT_EQ(oqt_scalar(db, "SELECT last_value FROM ms_r"), 3);
  ASSERT_EQ(oq_db_restarts(db) - before, 2);
  ASSERT_EQ(table_exists(db, "ms_g"), 1);

  oq_log_set_sink(NULL, NULL, OQ_LOG_OFF);
  oq_db_close(db);
  printf("PASS it_lib_migrate_statements\n");
  return 0;
}
