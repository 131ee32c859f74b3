/*
 * migrate.c: applies the embedded schema versions.
 *
 * PostgreSQL: a session advisory lock serialises concurrent runners; then
 * one READ COMMITTED transaction per run creates onceq_migrations, reads the
 * applied version and applies what is missing (PostgreSQL DDL is
 * transactional, so a failed migration leaves nothing half-applied). The
 * lock is taken before BEGIN so the version read sees the previous
 * runner's commit even when the database default is SERIALIZABLE.
 * CockroachDB: no advisory locks, and schema changes inside explicit
 * transactions are limited, so each statement runs on its own; every
 * statement is idempotent (IF NOT EXISTS), which makes concurrent runs safe.
 * The choice follows the connection's traits (traits.h), not its engine:
 * with ONCEQ_ENGINE_TRAITS=cockroachdb PostgreSQL runs its own migration
 * text the CockroachDB way, statement by statement without the lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int oq_migrate_latest(void)
{
  return oq__migration_count;
}

const char *oq_migrate_name(int version)
{
  if (version < 1 || version > oq__migration_count)
    return NULL;
  return oq__migrations[version - 1].name;
}

static oq_err read_int(void *ud, int ncols, const char *const *vals)
{
  int *out = ud;
  *out = ncols > 0 ? oq__int(vals[0]) : 0;
  return OQ_OK;
}

oq_err oq_migrate_status(oq_db *db, int *applied)
{
  *applied = 0;
  oq_err e =
      oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_MIGRATIONS_VERSION), 0,
                  NULL, read_int, applied);
  if (e != OQ_OK && oq_db_sqlstate_is(db, OQ_SQLSTATE_UNDEFINED_TABLE)) {
    *applied = 0; /* undefined_table: nothing applied yet */
    oq__db_clear(db);
    return OQ_OK;
  }
  return e;
}

/* A schema newer than this build: its tables may have changed in ways
 * this code does not know (a column it never fills, a state it never
 * expects), so every binary refuses it rather than guess. */
static oq_err refuse_newer(oq_db *db, int applied)
{
  return oq__db_fail(db, OQ_ERR_SCHEMA, NULL,
                     "the onceq schema in %s is version %d, newer than this "
                     "build of onceq knows (%d); upgrade this onceq (%s) to "
                     "the release that migrated the database",
                     oq_db_masked_conninfo(db), applied, oq_migrate_latest(),
                     oq_version());
}

oq_err oq_migrate_check_not_newer(oq_db *db)
{
  int applied = 0;
  oq_err e = oq_migrate_status(db, &applied);
  if (e != OQ_OK)
    return e;
  return applied > oq_migrate_latest() ? refuse_newer(db, applied) : OQ_OK;
}

oq_err oq_migrate_check(oq_db *db)
{
  int applied = 0;
  oq_err e = oq_migrate_status(db, &applied);
  if (e != OQ_OK)
    return e;
  if (applied == 0)
    return oq__db_fail(db, OQ_ERR_SCHEMA, NULL,
                       "the onceq schema is not installed in %s; run "
                       "`onceq migrate --db URL` first",
                       oq_db_masked_conninfo(db));
  if (applied > oq_migrate_latest())
    return refuse_newer(db, applied);
  if (applied < oq_migrate_latest())
    return oq__db_fail(db, OQ_ERR_SCHEMA, NULL,
                       "the onceq schema in %s is version %d but this "
                       "build needs %d; run `onceq migrate --db URL`",
                       oq_db_masked_conninfo(db), applied, oq_migrate_latest());
  return OQ_OK;
}

static oq_err record(oq_db *db, int version)
{
  char v[16];
  snprintf(v, sizeof v, "%d", version);
  const char *params[2] = {v, oq__migrations[version - 1].name};
  return oq_db_exec(db, oq__sql(oq_db_engine(db), OQ__SQL_MIGRATIONS_RECORD), 2,
                    params, NULL);
}

/* A statement the schema works without (text from sql_start). Zone
 * settings need privileges that a multi-tenant cluster (CockroachDB Cloud
 * Basic/Standard) may refuse ("unsupported with multi-tenancy"; CockroachDB
 * docs, "CONFIGURE ZONE": required privileges); failing the migration for
 * them would leave the schema unusable. */
static bool optional_stmt(const char *sql)
{
  return strncmp(sql, "ALTER TABLE ", 12) == 0 &&
         strstr(sql, " CONFIGURE ZONE ") != NULL;
}

/* Refusals a skippable statement may meet: feature not supported (0A...),
 * or a privilege/syntax rule (42...). Not a restart that ran out of
 * retries, a lost connection, or anything else. */
static bool refusal(const char *sqlstate)
{
  return strncmp(sqlstate, "0A", 2) == 0 || strncmp(sqlstate, "42", 2) == 0;
}

/* The statement without the comment and blank lines before it. */
static const char *sql_start(const char *stmt)
{
  for (;;) {
    while (*stmt == ' ' || *stmt == '\t' || *stmt == '\n')
      stmt++;
    if (stmt[0] != '-' || stmt[1] != '-')
      return stmt;
    const char *nl = strchr(stmt, '\n');
    if (!nl)
      return stmt + strlen(stmt);
    stmt = nl + 1;
  }
}

/* One DDL statement as its own implicit transaction. Concurrent schema
 * changes (two `onceq migrate` at once: CockroachDB has no advisory lock)
 * can abort one with a restart error, retried under the db's policy; IF
 * NOT EXISTS makes a re-run safe. */
static oq_err run_one(oq_db *db, const char *stmt)
{
  oq_err e = oq__db_query_retry(db, stmt, 0, NULL, NULL, NULL, NULL);
  const char *sql = sql_start(stmt);
  if (e != OQ_OK && optional_stmt(sql) && refusal(oq_db_sqlstate(db)) &&
      oq_db_connected(db)) {
    OQ_LOG(OQ_LOG_WARN, NULL, NULL,
           "migrate: skipped a storage setting the server refused (%s); "
           "onceq works without it, but MVCC garbage from claims and acks "
           "is kept longer. An admin can apply it later: %s",
           oq_db_errmsg(db), sql);
    oq__db_clear(db);
    return OQ_OK;
  }
  return e;
}

/* Call fn on each statement of a migration script: ";" at the end of a line
 * ends a statement, except inside a $$-quoted function body (the PostgreSQL
 * scripts' trigger functions). Statements that are only comments and blank
 * lines are skipped. Stops at fn's first error. script is cut in place. */
oq_err oq__migrate_each_statement(char *script,
                                  oq_err (*fn)(void *ud, const char *stmt),
                                  void *ud)
{
  oq_err e = OQ_OK;
  char *stmt = script;
  bool dollar = false;
  for (char *p = script; *p && e == OQ_OK; p++) {
    if (p[0] == '$' && p[1] == '$') {
      dollar = !dollar;
      p++;
      continue;
    }
    if (!dollar && *p == ';' && (p[1] == '\n' || p[1] == '\0')) {
      bool last = p[1] == '\0';
      *p = '\0';
      /* skip statements that are only comments and blank lines */
      int has_sql = 0;
      for (char *l = stmt; *l;) {
        char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        char *t = l;
        while (t < l + len && (*t == ' ' || *t == '\t'))
          t++;
        if (t < l + len && !(t[0] == '-' && t[1] == '-'))
          has_sql = 1;
        l = nl ? nl + 1 : l + len;
      }
      if (has_sql)
        e = fn(ud, stmt);
      if (last)
        break;
      stmt = p + 1;
    }
  }
  return e;
}

static oq_err run_one_cb(void *ud, const char *stmt)
{
  return run_one(ud, stmt);
}

/* Run a migration one statement at a time, each its own implicit
 * transaction. */
oq_err oq__migrate_run_statements(oq_db *db, const char *script)
{
  char *copy = strdup(script);
  if (!copy)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  oq_err e = oq__migrate_each_statement(copy, run_one_cb, db);
  free(copy);
  return e;
}

/* The engine's own script for version v (1-based). */
static const char *script_of(oq_db *db, int v)
{
  return oq_db_engine(db) == OQ_ENGINE_COCKROACH
             ? oq__migrations[v - 1].crdb_sql
             : oq__migrations[v - 1].pg_sql;
}

static oq_err migrate_per_statement(oq_db *db, int *from, int *to)
{
  oq_err e =
      oq__db_simple(db, oq__sql(oq_db_engine(db), OQ__SQL_MIGRATIONS_TABLE));
  if (e != OQ_OK)
    return e;
  int applied = 0;
  e = oq_migrate_status(db, &applied);
  if (e != OQ_OK)
    return e;
  *from = applied;
  for (int v = applied + 1; v <= oq__migration_count && e == OQ_OK; v++) {
    e = oq__migrate_run_statements(db, script_of(db, v));
    if (e == OQ_OK)
      e = record(db, v);
    if (e == OQ_OK)
      *to = v;
  }
  return e;
}

/* The migration lock of a connection that may not hold session state (a
 * transaction pooler, oq_db_pooled): the same key as OQ__SQL_MIGRATE_LOCK,
 * so both kinds exclude each other, released by the COMMIT or ROLLBACK. */
static const char migrate_xact_lock_pg[] =
    "SELECT pg_advisory_xact_lock(465793504625)";

static oq_err migrate_pg(oq_db *db, int *from, int *to)
{
  bool session_lock = oq_db_traits(db)->advisory_lock;
  oq_err e =
      session_lock
          ? oq_db_exec(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_MIGRATE_LOCK), 0,
                       NULL, NULL)
          : OQ_OK;
  if (e != OQ_OK)
    return e;
  e = oq__db_simple(db, "BEGIN ISOLATION LEVEL READ COMMITTED");
  if (e == OQ_OK && !session_lock)
    e = oq__db_simple(db, migrate_xact_lock_pg);
  if (e != OQ_OK && !session_lock)
    (void)oq__db_simple(db, "ROLLBACK");
  if (e != OQ_OK)
    goto unlock;
  e = oq__db_simple(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_MIGRATIONS_TABLE));
  int applied = 0;
  if (e == OQ_OK)
    e = oq_migrate_status(db, &applied);
  *from = applied;
  *to = applied;
  for (int v = applied + 1; v <= oq__migration_count && e == OQ_OK; v++) {
    e = oq__db_simple(db, oq__migrations[v - 1].pg_sql);
    if (e == OQ_OK)
      e = record(db, v);
  }
  if (e == OQ_OK) {
    e = oq__db_simple(db, "COMMIT");
    if (e == OQ_OK)
      *to = oq__migration_count > applied ? oq__migration_count : applied;
  } else {
    char keep[OQ_ERRBUF_SIZE];
    char state[6];
    oq_err kept = e;
    snprintf(keep, sizeof keep, "%s", oq_db_errmsg(db));
    snprintf(state, sizeof state, "%s", oq_db_sqlstate(db));
    (void)oq__db_simple(db, "ROLLBACK");
    e = oq__db_fail(db, kept, state, "migration failed: %s", keep);
  }
unlock:
  if (session_lock && oq_db_connected(db)) {
    char keep[OQ_ERRBUF_SIZE];
    char state[6];
    snprintf(keep, sizeof keep, "%s", oq_db_errmsg(db));
    snprintf(state, sizeof state, "%s", oq_db_sqlstate(db));
    oq_err ue = oq_db_exec(
        db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_MIGRATE_UNLOCK), 0, NULL, NULL);
    if (ue != OQ_OK && e == OQ_OK)
      e = ue;
    if (e != OQ_OK)
      oq__db_fail(db, e, state, "%s", keep);
  }
  return e;
}

oq_err oq_migrate_run(oq_db *db, int *from, int *to)
{
  int f = 0, t = 0;
  /* a newer schema never becomes older: no lock needed to refuse it */
  oq_err e = oq_migrate_check_not_newer(db);
  if (e == OQ_OK)
    e = oq_db_traits(db)->transactional_ddl ? migrate_pg(db, &f, &t)
                                            : migrate_per_statement(db, &f, &t);
  if (from)
    *from = f;
  if (to)
    *to = e == OQ_OK ? (t > f ? t : f) : t;
  return e;
}
