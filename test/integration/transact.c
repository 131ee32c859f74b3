/*
 * transact.c: oq_db_transact sends its BEGIN with the callback's first
 * statement (one round trip fewer), and the heartbeat connects on its own
 * thread. Neither may change what commits.
 *
 * Checks: the first statement runs inside the transaction (a later failure
 * rolls it back, through the plain and the prepared path); a callback that
 * runs nothing commits nothing and leaves no transaction open; raw libpq
 * through oq_db_pgconn as the first statement is inside it too; a failing
 * first statement leaves a usable connection; claims go on after the
 * server drops our prepared statements (DEALLOCATE ALL, as a pooler or
 * DISCARD ALL would); a full statement cache never drops the two statements
 * it named last (a pipeline's, about to be sent); a restart (40001) reruns the
 * whole callback, also when the 40001 hits a library call that retries
 * on its own outside a transaction (it must hand the restart to the
 * transaction, not rerun its statement in the aborted one); a heartbeat whose
 * connection cannot be made starts at once, lands no beat and lets the session
 * fence itself by its clock, while one that can connect lands beats.
 */
#include <libpq-fe.h>
#include <stdbool.h>
#include <time.h>

#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

typedef struct tx_case {
  int step;     /* which statement fails: 0 none */
  int restarts; /* 40001s to raise before succeeding */
  int runs;     /* how often the callback ran */
} tx_case;

static oq_err tx_fn(oq_db *db, void *ud)
{
  tx_case *c = ud;
  c->runs++;
  oq_err e =
      oq_db_exec(db, "INSERT INTO tx_probe (k) VALUES (1)", 0, NULL, NULL);
  if (e != OQ_OK || c->step == 1)
    return e;
  if (c->restarts > 0) {
    c->restarts--;
    return oq_db_exec(db,
                      "DO $$ BEGIN RAISE EXCEPTION 'restart' USING ERRCODE "
                      "= '40001'; END $$",
                      0, NULL, NULL);
  }
  if (c->step == 2)
    return oq_db_exec(db, "SELECT 1 / 0", 0, NULL, NULL);
  return OQ_OK;
}

static oq_err first_fails(oq_db *db, void *ud)
{
  (void)ud;
  oq_err e = oq_db_exec(db, "SELECT * FROM tx_no_such_table", 0, NULL, NULL);
  return e;
}

static oq_err nothing(oq_db *db, void *ud)
{
  (void)db;
  (*(int *)ud)++;
  return OQ_OK;
}

static long probe_rows(oq_db *other)
{
  return oqt_scalar(other, "SELECT count(*) FROM tx_probe");
}

/* The first statement is inside the transaction: the second's failure
 * takes it back. */
static void test_first_statement_in_tx(oq_db *db, oq_db *other)
{
  tx_case c = {.step = 2};
  oq_err e = oq_db_transact(db, tx_fn, &c);
  ASSERT_EQ(e != OQ_OK, 1);
  ASSERT_EQ(probe_rows(other), 0);
  c = (tx_case){.step = 0};
  ASSERT_OK(db, oq_db_transact(db, tx_fn, &c));
  ASSERT_EQ(probe_rows(other), 1);
  oqt_exec(other, "TRUNCATE tx_probe");
  printf("ok first statement: rolled back with the transaction\n");
}

/* A restart reruns the callback whole, the pending BEGIN included. */
static void test_restart(oq_db *db, oq_db *other)
{
  tx_case c = {.restarts = 2};
  ASSERT_OK(db, oq_db_transact(db, tx_fn, &c));
  ASSERT_EQ(c.runs, 3);
  ASSERT_EQ(probe_rows(other), 1);
  oqt_exec(other, "TRUNCATE tx_probe");
  printf("ok restart: 3 runs, one row\n");
}

/* A library call that restarts on its own outside a transaction
 * (oq_queue_set_limits, through the retrying query) hands a 40001 inside
 * one to oq_db_transact: before, it reran its statement in the aborted
 * transaction and failed with 25P02 ("current transaction is aborted"),
 * which `onceq limit` met under serializable isolation. */
static oq_err lib_call(oq_db *db, void *ud)
{
  (*(int *)ud)++;
  return oq_queue_set_limits(db, "tx_q", 3);
}

static void test_restart_in_lib_call(oq_db *db, oq_db *other)
{
  oqt_exec(other, "CREATE SEQUENCE tx_restart_seq");
  oqt_exec(other,
           "CREATE FUNCTION tx_restart_once() RETURNS trigger LANGUAGE plpgsql "
           "AS $$ BEGIN IF nextval('tx_restart_seq') = 1 THEN RAISE EXCEPTION "
           "'restart' USING ERRCODE = '40001'; END IF; RETURN NEW; END $$");
  oqt_exec(other, "CREATE TRIGGER tx_restart_once BEFORE INSERT OR UPDATE ON "
                  "onceq_queues FOR EACH ROW EXECUTE FUNCTION "
                  "tx_restart_once()");
  int runs = 0;
  ASSERT_OK(db, oq_db_transact(db, lib_call, &runs));
  ASSERT_EQ(runs, 2);
  ASSERT_EQ(oqt_scalar(other, "SELECT max_running FROM onceq_queues WHERE "
                              "queue = 'tx_q'"),
            3);
  oqt_exec(other, "DROP TRIGGER tx_restart_once ON onceq_queues");
  printf("ok restart in a library call: the transaction reran, 2 runs\n");
}

/* Raw libpq first (oq_db_pgconn, as db.h invites inside an ack): still
 * inside the transaction, so a later failure takes it back. */
static oq_err raw_first(oq_db *db, void *ud)
{
  (void)ud;
  PGresult *r = PQexec(oq_db_pgconn(db), "INSERT INTO tx_probe (k) VALUES (4)");
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok)
    return OQ_ERR_SQL;
  return oq_db_exec(db, "SELECT 1 / 0", 0, NULL, NULL);
}

static void test_raw_libpq(oq_db *db, oq_db *other)
{
  oq_err e = oq_db_transact(db, raw_first, NULL);
  ASSERT_EQ(e != OQ_OK, 1);
  ASSERT_EQ(probe_rows(other), 0);
  printf("ok raw libpq: inside the transaction\n");
}

/* Nothing run: nothing committed and no transaction left open (the next
 * plain statement is visible to others at once). A failing first statement
 * leaves the connection usable. */
static void test_empty_and_failing(oq_db *db, oq_db *other)
{
  int runs = 0;
  ASSERT_OK(db, oq_db_transact(db, nothing, &runs));
  ASSERT_EQ(runs, 1);
  oqt_exec(db, "INSERT INTO tx_probe (k) VALUES (2)");
  ASSERT_EQ(probe_rows(other), 1);
  oq_err e = oq_db_transact(db, first_fails, NULL);
  ASSERT_EQ(e, OQ_ERR_SQL);
  ASSERT_CONTAINS(oq_db_errmsg(db), "tx_no_such_table");
  oqt_exec(db, "INSERT INTO tx_probe (k) VALUES (3)");
  ASSERT_EQ(probe_rows(other), 2);
  oqt_exec(other, "TRUNCATE tx_probe");
  printf("ok empty and failing: no open transaction, connection usable\n");
}

/* The prepared path (a one-item ack is a claim check by a prepared
 * statement) inside the transaction: a handler write and the ack commit or
 * roll back together. */
typedef struct ack_case {
  const char *id;
  bool fail_after;
} ack_case;

static oq_err ack_write(oq_db *db, const oq_item *it, void *ud)
{
  ack_case *c = ud;
  const char *p[1] = {it->id};
  oq_err e = oq_db_exec(db, "INSERT INTO tx_ledger (id) VALUES ($1::uuid)", 1,
                        p, NULL);
  if (e == OQ_OK && c->fail_after)
    e = oq_db_exec(db, "SELECT 1 / 0", 0, NULL, NULL);
  return e;
}

static void test_ack(oq_db *db, oq_db *other, oq_session *s)
{
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "tx", .payload = "{}"};
  oq_enqueue_status st;
  ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "tx", 1, &it);
  ASSERT_EQ(n, 1);
  ack_case c = {it[0].id, true};
  bool rec = false;
  oq_err e = oq_ack(db, s, &it[0], ack_write, &c, NULL, &rec);
  ASSERT_EQ(e != OQ_OK, 1);
  ASSERT_CONTAINS(oq_db_errmsg(db), "division by zero");
  ASSERT_EQ(oqt_scalar(other, "SELECT count(*) FROM tx_ledger"), 0);
  ASSERT_EQ(QLONG(other, "SELECT count(*) FROM onceq_items WHERE id = $1", id),
            1);
  c.fail_after = false;
  ASSERT_OK(db, oq_ack(db, s, &it[0], ack_write, &c, NULL, &rec));
  ASSERT_EQ(oqt_scalar(other, "SELECT count(*) FROM tx_ledger"), 1);
  ASSERT_EQ(QLONG(other, "SELECT count(*) FROM onceq_items WHERE id = $1", id),
            0);
  oq_items_free(it, n);
  printf("ok ack: effect and claim check commit together\n");
}

/* A claim is planned without JIT: its estimated cost grows with the
 * queue (past jit_above_cost at about 100,000 ready items), and compiling
 * it cost some 35 ms a claim, five times the claim itself
 * (docs/benchmarks.md). A statement trigger records the setting the
 * claim's UPDATE ran under. */
static void test_claim_without_jit(oq_db *db, oq_db *other, oq_session *s)
{
  if (oq_db_engine(db) != OQ_ENGINE_POSTGRES)
    return;
  /* the first claim meets a 40001: the re-run is planned the same way */
  /* plan_mode, custom: the claim is also planned once per connection
   * (a generic plan, not one planned again at every bind, about 1 ms of a
   * 12 ms claim of 1,000): the setting, and the custom plans the claim
   * statements of this connection were ever given (pg_prepared_statements
   * is the session's own; the bind came before this trigger) */
  oqt_exec(other, "CREATE TABLE tx_jit (setting text NOT NULL, plan_mode "
                  "text NOT NULL, custom bigint NOT NULL)");
  oqt_exec(other, "CREATE SEQUENCE tx_jit_seq");
  /* pg_prepared_statements counts plans from PostgreSQL 14 on; on 13
   * only the setting is checked */
  bool counts =
      oqt_scalar(other, "SELECT (current_setting("
                        "'server_version_num')::int >= 140000)::int") == 1;
  char fn[1024];
  snprintf(fn, sizeof fn,
           "CREATE FUNCTION tx_jit_seen() RETURNS trigger LANGUAGE plpgsql AS "
           "$$ BEGIN IF nextval('tx_jit_seq') = 1 THEN RAISE EXCEPTION "
           "'restart' USING ERRCODE = '40001'; END IF; "
           "INSERT INTO tx_jit SELECT current_setting('jit'), "
           "current_setting('plan_cache_mode'), %s; "
           "RETURN NULL; END $$",
           counts ? "coalesce(sum(custom_plans), 0) FROM pg_prepared_statements"
                    " WHERE statement LIKE '%FOR UPDATE SKIP LOCKED%'"
                  : "0");
  oqt_exec(other, fn);
  oqt_exec(other, "CREATE TRIGGER tx_jit_seen BEFORE UPDATE ON onceq_items "
                  "FOR EACH STATEMENT EXECUTE FUNCTION tx_jit_seen()");
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "jit", .payload = "{}"};
  oq_enqueue_status st;
  ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "jit", 1, &it);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(oqt_scalar(other, "SELECT last_value FROM tx_jit_seq"), 2);
  ASSERT_EQ(oqt_scalar(other, "SELECT count(*) FROM tx_jit"), 1);
  ASSERT_EQ(oqt_scalar(other, "SELECT count(*) FROM tx_jit "
                              "WHERE setting = 'off'"),
            1);
  ASSERT_EQ(oqt_scalar(other, "SELECT count(*) FROM tx_jit "
                              "WHERE plan_mode = 'force_generic_plan'"),
            1);
  ASSERT_EQ(oqt_scalar(other, "SELECT custom FROM tx_jit"), 0);
  bool rec = false;
  ASSERT_OK(db, oq_ack(db, s, &it[0], NULL, NULL, NULL, &rec));
  oq_items_free(it, n);
  oqt_exec(other, "DROP TRIGGER tx_jit_seen ON onceq_items");
  printf("ok claim planned once, without JIT, also when re-run\n");
}

/* A claim whose implicit transaction fails at its COMMIT (here a deferred
 * constraint trigger; under SERIALIZABLE a serialization failure found at
 * commit) claimed nothing: the failure arrives after the claim's rows,
 * before the Sync that ends its pipeline, and must not be dropped there. */
static void test_claim_fails_at_commit(oq_db *db, oq_db *other, oq_session *s)
{
  if (oq_db_engine(db) != OQ_ENGINE_POSTGRES)
    return;
  oqt_exec(other, "CREATE SEQUENCE tx_commit_seq");
  oqt_exec(other, "CREATE FUNCTION tx_commit_fail() RETURNS trigger LANGUAGE "
                  "plpgsql AS $$ BEGIN IF nextval('tx_commit_seq') = 1 THEN "
                  "RAISE EXCEPTION 'fails at commit'; END IF; RETURN NULL; "
                  "END $$");
  oqt_exec(other, "CREATE CONSTRAINT TRIGGER tx_commit_fail AFTER UPDATE ON "
                  "onceq_items DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                  "EXECUTE FUNCTION tx_commit_fail()");
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_opts o = {.queue = "commitfail", .payload = "{}"};
  oq_enqueue_status st;
  ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  oq_item *it = NULL;
  size_t n = 0;
  const char *q[] = {"commitfail"};
  oq_err e = oq_claim(db, s, q, 1, 1, &it, &n);
  ASSERT_EQ(e != OQ_OK, 1);
  ASSERT_EQ(n, 0);
  ASSERT_EQ(QLONG(other,
                  "SELECT count(*) FROM onceq_items WHERE id = $1 "
                  "AND claim IS NULL",
                  id),
            1);
  oqt_exec(other, "DROP TRIGGER tx_commit_fail ON onceq_items");
  printf("ok a claim that fails at its commit claims nothing\n");
}

/* The claim is a prepared statement: when the server forgets it, the
 * claim prepares it again instead of failing from then on. */
static void test_prepared_lost(const char *dsn, oq_db *db)
{
  oq_db *d = oqt_connect(dsn);
  oq_session *s = SEM_LONG_SESSION(d);
  oq_enqueue_opts o = {.queue = "lost", .payload = "{}"};
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_status st;
  for (int i = 0; i < 3; i++)
    ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
  for (int round = 0; round < 3; round++) {
    oq_item *it = NULL;
    size_t n = SEM_CLAIM(d, s, "lost", 1, &it);
    ASSERT_EQ(n, 1);
    oq_items_free(it, n);
    PGresult *r = PQexec(oq_db_pgconn(d), "DEALLOCATE ALL");
    ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
  }
  ASSERT_OK(d, oq_session_end(d, s));
  oq_session_free(s);
  oq_db_close(d);
  /* a handler's statement through the cache (oq_db_exec_prepared_json), on
   * a connection of its own (the claims above made theirs run unnamed:
   * statements gone between Parse and Bind look like a pooler): the call
   * that finds it gone says OQ_ERR_RETRY, and the next one runs it (unnamed
   * from then on, for the same reason) */
  d = oqt_connect(dsn);
  static const unsigned int types[1] = {OQ_OID_INT4};
  const char *one[1] = {"41"};
  const char *sql = "SELECT $1 + 1 AS k";
  char *row = NULL;
  ASSERT_OK(d, oq_db_exec_prepared_json(d, sql, 1, types, one, &row));
  ASSERT_STREQ(row, "{\"k\": 42}");
  free(row);
  ASSERT_EQ(oqt_scalar(d, "SELECT count(*) FROM pg_prepared_statements"
                          " WHERE statement LIKE '%$1 + 1 AS k%'"),
            1);
  PGresult *r = PQexec(oq_db_pgconn(d), "DEALLOCATE ALL");
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  ASSERT_EQ(oq_db_exec_prepared_json(d, sql, 1, types, one, &row),
            OQ_ERR_RETRY);
  free(row);
  ASSERT_OK(d, oq_db_exec_prepared_json(d, sql, 1, types, one, &row));
  ASSERT_STREQ(row, "{\"k\": 42}");
  free(row);
  oq_db_close(d);
  printf("ok prepared lost: three claims and a handler's statement across "
         "DEALLOCATE ALL\n");
}

/* 0A000 from a statement prepared in the same call is its own failure
 * (OQ_ERR_SQL: an --sql handler's attempt fails), not a lost statement;
 * from one prepared by an earlier call it may be a plan the server threw
 * away (OQ_ERR_RETRY, the cache forgotten), and the call after that,
 * preparing it anew, reports the statement's own 0A000 as OQ_ERR_SQL. */
static void test_prepared_own_0a000(const char *dsn, oq_db *other)
{
  oqt_exec(other, "CREATE TABLE tx_unsup (fail bool NOT NULL)");
  oqt_exec(other, "INSERT INTO tx_unsup VALUES (false)");
  oqt_exec(other,
           "CREATE FUNCTION tx_unsup() RETURNS int LANGUAGE plpgsql AS $$"
           " BEGIN IF (SELECT fail FROM tx_unsup) THEN RAISE EXCEPTION"
           " 'not supported here' USING ERRCODE = '0A000'; END IF;"
           " RETURN 1; END $$");
  oq_db *d = oqt_connect(dsn);
  const char *sql = "SELECT tx_unsup() AS k";
  char *row = NULL;
  ASSERT_OK(d, oq_db_exec_prepared_json(d, sql, 0, NULL, NULL, &row));
  free(row);
  oqt_exec(other, "UPDATE tx_unsup SET fail = true");
  /* prepared by the call before: taken for a plan the server dropped */
  ASSERT_EQ(oq_db_exec_prepared_json(d, sql, 0, NULL, NULL, &row),
            OQ_ERR_RETRY);
  free(row);
  /* prepared anew: the statement's own failure; it stays named, so the
   * next call is the first case again: an --sql handler's transaction
   * restarts at most once before its attempt fails */
  for (int i = 0; i < 2; i++) {
    oq_err e = oq_db_exec_prepared_json(d, sql, 0, NULL, NULL, &row);
    free(row);
    if (e != OQ_ERR_SQL)
      OQT_FAIL("round %d, prepared anew: %s (%s)", i, oq_strerror(e),
               oq_db_errmsg(d));
    ASSERT(oq_db_sqlstate_is(d, OQ_SQLSTATE_FEATURE_NOT_SUPPORTED));
    ASSERT_EQ(oq_db_exec_prepared_json(d, sql, 0, NULL, NULL, &row),
              OQ_ERR_RETRY);
    free(row);
  }
  oq_db_close(d);
  printf("ok prepared 0A000: a plan the server dropped is retried once, the "
         "statement's own 0A000 is an error\n");
}

/* 16 statements fill the cache; naming the first again and then adding a
 * 17th must not evict the first (the round robin points at its slot). */
static void test_cache_keeps_last(const char *dsn)
{
  oq_db *d = oqt_connect(dsn);
  char sql[64], first[32], name[32];
  for (int i = 0; i <= OQ__DB_PREPARED_MAX; i++) {
    snprintf(sql, sizeof sql, "SELECT %d AS k", i);
    if (i == OQ__DB_PREPARED_MAX)
      ASSERT_OK(d, oq__db_prepare_once(d, "SELECT 0 AS k", 0, NULL, first,
                                       sizeof first, NULL));
    ASSERT_OK(d, oq__db_prepare_once(d, sql, 0, NULL, name, sizeof name, NULL));
  }
  PGresult *r = PQexecPrepared(oq_db_pgconn(d), first, 0, NULL, NULL, NULL, 0);
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  ASSERT_STREQ(PQgetvalue(r, 0, 0), "0");
  PQclear(r);
  oq_db_close(d);
  printf("ok cache: the statement named last survives an eviction\n");
}

/* A batched --sql round names three statements (its handler's, the claim
 * check, the next-item statement): the two named before the third must
 * survive an eviction it makes. Name two, prepare a new third, run the two,
 * over and over: the round robin passes their slots while the cache is
 * full. */
static void test_cache_keeps_two(const char *dsn)
{
  oq_db *d = oqt_connect(dsn);
  char sql[64], first[32], second[32], name[32];
  for (int i = 0; i < 3 * OQ__DB_PREPARED_MAX; i++) {
    ASSERT_OK(d, oq__db_prepare_once(d, "SELECT -1 AS k", 0, NULL, first,
                                     sizeof first, NULL));
    ASSERT_OK(d, oq__db_prepare_once(d, "SELECT -2 AS k", 0, NULL, second,
                                     sizeof second, NULL));
    snprintf(sql, sizeof sql, "SELECT %d AS k", i);
    ASSERT_OK(d, oq__db_prepare_once(d, sql, 0, NULL, name, sizeof name, NULL));
    const char *names[2] = {first, second};
    for (int k = 0; k < 2; k++) {
      PGresult *r =
          PQexecPrepared(oq_db_pgconn(d), names[k], 0, NULL, NULL, NULL, 0);
      /* an evicted name is the next statement's (names go by slot) */
      const char *want = k == 0 ? "-1" : "-2";
      if (PQresultStatus(r) != PGRES_TUPLES_OK ||
          strcmp(PQgetvalue(r, 0, 0), want) != 0)
        OQT_FAIL("round %d: the statement named %s last was evicted by the "
                 "next one (its name ran %s)",
                 i, k == 0 ? "second" : "first",
                 PQresultStatus(r) == PGRES_TUPLES_OK
                     ? PQgetvalue(r, 0, 0)
                     : PQresultErrorMessage(r));
      PQclear(r);
    }
  }
  oq_db_close(d);
  printf("ok cache: the two statements named last survive an eviction\n");
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A heartbeat that cannot connect: start returns OK without waiting for
 * the connection, no beat lands, and the session fences by its clock. One
 * that can: beats land. */
static void test_heartbeat(oq_db *db, const char *dsn)
{
  oq_session_opts so = {.heartbeat_interval_ms = 200, .expiry_ms = 2000};
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  /* port 1 on loopback: refused at once */
  oq_db_opts bad = {.conninfo = "host=127.0.0.1 port=1 dbname=x "
                                "connect_timeout=2",
                    .application_name = "tx-hb-bad"};
  oq_heartbeat *hb = NULL;
  char err[OQ_ERRBUF_SIZE] = "";
  ASSERT_EQ(oq_heartbeat_start(&bad, s, NULL, NULL, &hb, err, sizeof err),
            OQ_OK);
  double until = now_s() + 10;
  while (oq_session_state_get(s) == OQ_SESSION_LIVE && now_s() < until)
    oqt_sleep_ms(50);
  ASSERT_EQ(oq_session_state_get(s) != OQ_SESSION_LIVE, 1);
  ASSERT_EQ(oq_heartbeat_count(hb), 0);
  oq_heartbeat_stop(hb);
  oq_session_free(s);

  s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  oq_db_opts good = {.conninfo = dsn, .application_name = "tx-hb-good"};
  ASSERT_EQ(oq_heartbeat_start(&good, s, NULL, NULL, &hb, err, sizeof err),
            OQ_OK);
  until = now_s() + 10;
  while (oq_heartbeat_count(hb) < 2 && now_s() < until)
    oqt_sleep_ms(50);
  ASSERT_EQ(oq_heartbeat_count(hb) >= 2, 1);
  ASSERT_EQ(oq_session_state_get(s), OQ_SESSION_LIVE);
  oq_heartbeat_stop(hb);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  printf("ok heartbeat: connects on its thread; unreachable fences\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("transact", 1);
  oq_db *db = oqt_connect(dsn);
  oq_db *other = oqt_connect(dsn);
  oqt_exec(other, "CREATE TABLE tx_probe (k int NOT NULL)");
  oqt_exec(other, "CREATE TABLE tx_ledger (id uuid PRIMARY KEY)");
  oq_session *s = SEM_LONG_SESSION(db);

  test_first_statement_in_tx(db, other);
  test_restart(db, other);
  test_restart_in_lib_call(db, other);
  test_empty_and_failing(db, other);
  test_raw_libpq(db, other);
  test_ack(db, other, s);
  test_claim_without_jit(db, other, s);
  test_claim_fails_at_commit(db, other, s);
  test_prepared_lost(dsn, db);
  test_prepared_own_0a000(dsn, other);
  test_cache_keeps_last(dsn);
  test_cache_keeps_two(dsn);
  test_heartbeat(db, dsn);

  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(other);
  oq_db_close(db);
  printf("PASS it_lib_transact (isolation: %s)\n", oqt_isolation());
  return 0;
}
