/* oq_test.c: database plumbing shared by the integration tests. */
#include "oq_test.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

/* The login role of ONCEQ_TEST_ROLE=worker (oq_test.h, oqt_worker_dsn). */
#define OQT_WORKER_ROLE "onceq_test_worker"

const char *oqt_admin_dsn(void)
{
  const char *dsn = getenv("ONCEQ_TEST_DSN");
  if (!dsn || !*dsn) {
    /* ctest hides a skip's output; test/harness/no_dsn_note.sh says it
       once per run, this says it to whoever runs the binary by hand. */
    const char *name = getenv("ONCEQ_TEST_NAME");
    fprintf(stderr,
            "SKIP: ONCEQ_TEST_DSN is not set, and this test needs the "
            "database.\n  Run it with its throwaway server: "
            "./test/run.sh --one %s\n  (docs/testing.md, \"Running one "
            "test\")\n",
            name && *name ? name : "NAME");
    exit(77);
  }
  return dsn;
}

const char *oqt_isolation(void)
{
  const char *iso = getenv("ONCEQ_TEST_ISOLATION");
  return (iso && *iso) ? iso : "read committed";
}

oq_db *oqt_connect(const char *dsn)
{
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_db_opts o = {.conninfo = dsn, .application_name = "onceq-test"};
  oq_err e = oq_db_open(&o, &db, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("connect: %s: %s", oq_strerror(e), err);
  return db;
}

static oq_err first_col(void *ud, int ncols, const char *const *vals)
{
  long *out = ud;
  if (ncols > 0 && vals[0])
    *out = strtol(vals[0], NULL, 10);
  return OQ_OK;
}

/* A statement the server aborted to resolve a conflict (under SERIALIZABLE
 * even a read can be the victim while workers run): the tests' own
 * look-ups retry those, boundedly, like the library does. */
static bool restartable(oq_db *db)
{
  const char *st = oq_db_sqlstate(db);
  return strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0;
}

long oqt_scalar(oq_db *db, const char *sql)
{
  long v = 0;
  oq_err e = OQ_OK;
  for (int i = 0; i < 20; i++) {
    v = 0;
    e = oq_db_query(db, sql, 0, NULL, first_col, &v);
    if (e == OQ_OK || !restartable(db))
      break;
    oqt_sleep_ms(10 + 10 * i);
  }
  if (e != OQ_OK)
    OQT_FAIL("%s: %s (%s)", sql, oq_strerror(e), oq_db_errmsg(db));
  return v;
}

void oqt_exec(oq_db *db, const char *sql)
{
  oq_err e = oq_db_exec(db, sql, 0, NULL, NULL);
  if (e != OQ_OK)
    OQT_FAIL("%s: %s (%s)", sql, oq_strerror(e), oq_db_errmsg(db));
}

/* Run a script of several statements (the simple query protocol). Roles
 * are cluster-wide: two tests creating or granting the same one at once
 * can fail (23505, "tuple concurrently updated"); the script is idempotent,
 * so it is run again, boundedly. */
static void exec_script(oq_db *db, const char *sql, const char *what)
{
  char why[512] = "";
  for (int i = 0; i < 10; i++) {
    PGresult *r = PQexec(oq_db_pgconn(db), sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      PQclear(r);
      return;
    }
    oqt_copy(why, sizeof why, PQresultErrorMessage(r));
    PQclear(r);
    oqt_sleep_ms(20 + 30 * i);
  }
  OQT_FAIL("%s: %s", what, why);
}

/* ONCEQ_TEST_ROLE=worker: the shipped grants on this (migrated) database,
 * and the login role the worker-side connections use. */
static void grant_worker_role(oq_db *db)
{
  /* the test server's admin may; a --dsn server's admin need not */
  if (oqt_scalar(db, "SELECT count(*) FROM pg_roles WHERE rolname ="
                     " current_user AND (rolsuper OR rolcreaterole)") != 1) {
    fprintf(stderr, "SKIP: ONCEQ_TEST_ROLE needs an admin that may create "
                    "roles (CREATEROLE)\n");
    exit(77);
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/deploy/grants/postgres.sql",
           OQ_TEST_SOURCE_DIR);
  FILE *f = fopen(path, "rb");
  if (!f)
    OQT_FAIL("ONCEQ_TEST_ROLE: cannot open %s", path);
  char *sql = NULL;
  size_t len = 0, cap = 0, got;
  char buf[4096];
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    if (len + got + 1 > cap) {
      cap = (len + got + 1) * 2;
      char *more = realloc(sql, cap);
      if (!more)
        OQT_FAIL("out of memory");
      sql = more;
    }
    memcpy(sql + len, buf, got);
    len += got;
  }
  fclose(f);
  if (!sql)
    OQT_FAIL("ONCEQ_TEST_ROLE: %s is empty", path);
  sql[len] = '\0';
  exec_script(db, sql, path);
  free(sql);
  /* the tables the test makes after this (ledgers) are the handler's own:
   * an operator grants those separately (the deploy file's header) */
  exec_script(db,
              "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles"
              " WHERE rolname = '" OQT_WORKER_ROLE "') THEN"
              " CREATE ROLE " OQT_WORKER_ROLE " LOGIN; END IF; END $$;"
              " GRANT onceq_worker TO " OQT_WORKER_ROLE ";"
              " ALTER DEFAULT PRIVILEGES IN SCHEMA public"
              " GRANT ALL ON TABLES TO " OQT_WORKER_ROLE ";"
              " ALTER DEFAULT PRIVILEGES IN SCHEMA public"
              " GRANT ALL ON SEQUENCES TO " OQT_WORKER_ROLE,
              "ONCEQ_TEST_ROLE: the login role");
}

const char *oqt_fresh_db(const char *name, int migrate)
{
  static char dsn[1024];
  char dbname[64], sql[256];
  size_t j = 0;
  for (const char *p = name; *p && j < 40; p++)
    dbname[j++] = isalnum((unsigned char)*p) ? (char)tolower(*p) : '_';
  dbname[j] = '\0';
  char full[80];
  snprintf(full, sizeof full, "oqt_%s_%d", dbname, (int)getpid());

  oq_db *admin = oqt_connect(oqt_admin_dsn());
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", full);
  oqt_exec(admin, sql);
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", full);
  oqt_exec(admin, sql);
  snprintf(sql, sizeof sql,
           "ALTER DATABASE %s SET default_transaction_isolation = '%s'", full,
           oqt_isolation());
  oqt_exec(admin, sql);
  oq_db_close(admin);

  snprintf(dsn, sizeof dsn, "%s dbname=%s", oqt_admin_dsn(), full);
  if (migrate) {
    oq_db *db = oqt_connect(dsn);
    ASSERT_OK(db, oq_migrate_run(db, NULL, NULL));
    if (oqt_worker_role())
      grant_worker_role(db);
    oq_db_close(db);
  }
  return dsn;
}

const char *oqt_worker_role(void)
{
  const char *r = getenv("ONCEQ_TEST_ROLE");
  if (!r || !*r)
    return NULL;
  if (strcmp(r, "worker") != 0)
    OQT_FAIL("ONCEQ_TEST_ROLE=%s: the one role this switch knows is "
             "'worker'",
             r);
  return OQT_WORKER_ROLE;
}

const char *oqt_worker_dsn(const char *dsn)
{
  static char out[1200];
  if (!oqt_worker_role())
    oqt_copy(out, sizeof out, dsn);
  else
    snprintf(out, sizeof out, "%s user=%s", dsn, OQT_WORKER_ROLE);
  return out;
}

void oqt_enqueue_n(oq_db *db, const char *queue, int n)
{
  char payload[64], id[OQ_UUID_LEN + 1];
  oqt_exec(db, "BEGIN");
  for (int i = 0; i < n; i++) {
    snprintf(payload, sizeof payload, "{\"n\": %d}", i);
    oq_enqueue_opts o = {.queue = queue, .payload = payload};
    ASSERT_OK(db, oq_enqueue(db, &o, id, NULL));
  }
  oqt_exec(db, "COMMIT");
}

void oqt_sleep_ms(int ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void oqt_metric(const char *name, double value, const char *unit)
{
  printf("METRIC %s %.3f %s (isolation: %s)\n", name, value, unit,
         oqt_isolation());
  fflush(stdout);
}

void oqt_copy(char *dst, size_t len, const char *src)
{
  if (len == 0)
    return;
  size_t n = src ? strnlen(src, len - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}
