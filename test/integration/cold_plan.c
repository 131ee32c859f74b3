/*
 * it_lib_cold_plan: a claim planned while onceq_items was empty still walks
 * the ready index once the items come.
 *
 * The library plans its claim once per connection, at the connection's
 * first claim (plan_cache_mode = force_generic_plan; lib/src/db_tx.c), and
 * keeps that plan until an ANALYZE of the table. A worker that starts on
 * an empty table (a new deployment; a queue drained and vacuumed, which
 * truncates the table's empty pages) made it for a table of no pages:
 * sequential scans and sorts, and the claim's UPDATE comparing every row
 * with every claimed id (an array parameter's = ANY is tested element by
 * element). One worker then drained 100,000 items enqueued after it
 * started in 18 to 25 s instead of about 3 (docs/benchmarks.md, "A claim
 * planned on an empty table"). The claim's settings now also turn sequential
 * and bitmap scans off while it is planned.
 *
 * Both plans are made on the empty table, analyzed empty, autovacuum off
 * for it (so no ANALYZE replaces them): the control's, prepared in a
 * connection of the test's with the settings as they were, and the
 * library's, by its own first claim. Then the items come, and each cached
 * plan runs a claim of CLAIM_N under EXPLAIN ANALYZE, rolled back: the rows
 * it reads are counted (EXPLAIN EXECUTE of the prepared statement itself,
 * which runs the cached plan, not a new one).
 *
 * The acks the same way. They are prepared too, and the plan cache keeps
 * a generic plan from about a statement's sixth run: an idle worker's first
 * acks run on a table of one row, where that plan, with the server's
 * settings, is a sequential scan, then kept for every ack of a backlog
 * enqueued later. The library's acks now carry the same settings
 * (lib/src/db_tx.h, oq__db_plan_next). Its single ack (without a handler:
 * the BEGIN still owed), batch ack and batched ack with effects each
 * acknowledge ACKS items, one at a time, on the vacuumed, empty table; the
 * control prepares the single ack's text and runs it as often, with the
 * server's settings.
 *
 * And the batched ack's next item of a key (OQ__SQL_ACK_NEXT), planned
 * on a table of a few rows, then run on a backlog of keyed items.
 *
 * And a claim after claims made inside the caller's transaction on the
 * empty table: those are not prepared, so they leave no plan of the
 * server's choosing for it to reuse.
 */
#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "cold_plan"
#define ROWS 20000
#define CLAIM_N 10
/* rows read: a few per item claimed through the indexes, the whole table
 * (several times) through sequential scans */
#define BOUND 1000
/* the claim's settings before this test (db_tx.c, OQ__PLAN_SETTINGS) */
#define OLD_SETTINGS                                                           \
  "SELECT set_config('jit', 'off', true),"                                     \
  " set_config('plan_cache_mode', 'force_generic_plan', true)"

static long server_version; /* server_version_num */

/* A control must read past the bound. Only from PostgreSQL 14 on, which
 * plans a vacuumed, analyzed empty table as empty; 13 plans a table of no
 * pages as one of 10 (pg_class.reltuples could not yet tell "never
 * analyzed"), so there it may not be misled, and the checks then only hold
 * the library's plans to the bound. */
static void control_past(long was)
{
  if (server_version >= 140000 || was > BOUND) {
    SEM_CONTROL_PAST(was, BOUND, "rows");
    return;
  }
  printf("ok the control reads %ld rows: PostgreSQL %ld plans a table of no "
         "pages as one of 10 pages, so this state does not mislead it\n",
         was, server_version / 10000);
}

/* The rows one run of the prepared statement `name` with `args` reads in
 * its cached generic plan (not a custom one: auto's first five), rolled
 * back; its `node` (e.g. "Update on onceq_items") must have handled `want`
 * rows: a plan that does less would read less for the wrong reason. */
static long cached_run(oq_db *db, const char *name, const char *args,
                       const char *title, const char *node, double want)
{
  char explain[600];
  snprintf(explain, sizeof explain,
           "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE %s(%s)",
           name, args);
  oqt_exec(db, "BEGIN");
  oqt_exec(db, "SET LOCAL plan_cache_mode = force_generic_plan");
  char *plan = SEM_PLAN(db, explain, title);
  oqt_exec(db, "ROLLBACK");
  long seen = sem_plan_rows_read(plan);
  double did = sem_plan_node_rows(plan, node);
  free(plan);
  printf("  %s: %ld rows read; %s: %.0f rows\n", title, seen, node, did);
  if (did != want)
    OQT_FAIL("%s: its plan (above) did %.0f rows at %s, not %.0f", title, did,
             node, want);
  return seen;
}

/* The same for a claim of CLAIM_N from QUEUE by session sid. */
static long cached_rows(oq_db *db, const char *name, const char *sid,
                        const char *title)
{
  char args[200];
  snprintf(args, sizeof args, "'%s', '{%s}', %d, 67108864", sid, QUEUE,
           CLAIM_N);
  return cached_run(db, name, args, title, "Update on onceq_items", CLAIM_N);
}

/* The name the library's connection db gave the statement `text` (its
 * plan the server keeps: generic, as the library asks); fails when there is
 * none. */
static void lib_statement(oq_db *db, const char *text, char *name, size_t len)
{
  char got[128];
  if (!QTEXT(db, got,
             "SELECT name FROM pg_prepared_statements WHERE statement = $1",
             text))
    OQT_FAIL("no prepared statement for: %.80s...", text);
  snprintf(name, len, "%s", got);
}

/* onceq_items emptied, vacuumed (its pages truncated) and analyzed. */
static void empty_table(oq_db *admin)
{
  oqt_exec(admin, "DELETE FROM onceq_items");
  oqt_exec(admin, "VACUUM ANALYZE onceq_items");
  ASSERT_EQ(oqt_scalar(admin, "SELECT pg_relation_size('onceq_items')"), 0);
}

#define KEYED_QUEUE "cold_keyed"

/* Inside oq_db_transact's transaction (the caller's): a claim of `queue`
 * (its items acknowledged there too), or a batch ack of `id`. */
typedef struct in_tx {
  oq_session *s;
  const char *queue; /* a claim's, or NULL */
  const char *id;    /* a batch ack's */
  size_t got;
} in_tx;

static oq_err run_in_tx(oq_db *db, void *ud)
{
  in_tx *c = ud;
  if (!c->queue) {
    bool acked[1] = {false};
    const char *ids[1] = {c->id};
    return oq_ack_batch(db, c->s, ids, 1, acked, &c->got, NULL);
  }
  const char *q[1] = {c->queue};
  oq_item *items = NULL;
  oq_err e = oq_claim(db, c->s, q, 1, CLAIM_N, &items, &c->got);
  for (size_t i = 0; e == OQ_OK && i < c->got; i++)
    e = oq_db_exec(db, "DELETE FROM onceq_items WHERE id = $1::uuid", 1,
                   (const char *const[]){items[i].id}, NULL);
  oq_items_free(items, c->got);
  return e;
}

/* No statement of this text is prepared on db. */
static void not_prepared(oq_db *db, const char *text, const char *what)
{
  long n = QLONG(db,
                 "SELECT count(*) FROM pg_prepared_statements"
                 " WHERE statement = $1",
                 text);
  if (n != 0)
    OQT_FAIL("%s inside the caller's transaction left a prepared statement",
             what);
  printf("ok %s inside the caller's transaction is not prepared\n", what);
}

/* Claims and batch acks inside the caller's transaction get none of the
 * settings (they would hold into the caller's statements), so they are not
 * prepared: a plan of theirs, made by the server's settings for the empty
 * table, would be the one the connection's later claims reuse. */
static void check_claims_in_tx(oq_db *admin, const char *dsn)
{
  empty_table(admin);
  oq_db *dbt = oqt_connect(oqt_worker_dsn(dsn));
  oq_db *oth = oqt_connect(oqt_worker_dsn(dsn)); /* claims outside */
  oq_session *s = SEM_LONG_SESSION(dbt);
  for (int i = 0; i < 8; i++) {
    in_tx c = {s, QUEUE, NULL, 0};
    ASSERT_OK(dbt, oq_db_transact(dbt, run_in_tx, &c));
    ASSERT_EQ(c.got, 0);
    /* a keyed queue's claim goes through its key lock first */
    QEXEC(admin,
          "INSERT INTO onceq_items (queue, payload, ordering_key)"
          " VALUES ($1, '{}', 'k')",
          KEYED_QUEUE);
    in_tx k = {s, KEYED_QUEUE, NULL, 0};
    ASSERT_OK(dbt, oq_db_transact(dbt, run_in_tx, &k));
    ASSERT_EQ(k.got, 1);
    /* a batch ack */
    SEM_ENQUEUE(admin, QUEUE, 1);
    oq_item *one = NULL;
    ASSERT_EQ(SEM_CLAIM(oth, s, QUEUE, 1, &one), 1);
    in_tx b = {s, NULL, one[0].id, 0};
    ASSERT_OK(dbt, oq_db_transact(dbt, run_in_tx, &b));
    ASSERT_EQ(b.got, 1);
    oq_items_free(one, 1);
  }
  not_prepared(dbt, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM), "a claim");
  not_prepared(dbt, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_KEYED),
               "a keyed claim");
  not_prepared(dbt, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_BATCH),
               "a batch ack");
  oq_session_free(s);
  oq_db_close(oth);
  oq_db_close(dbt);
}

#define ACKS 8
#define ACK_QUEUE "cold_acks"

/* The same for an ack of one item. */
static long ack_rows(oq_db *db, const char *name, const char *args,
                     const char *title)
{
  return cached_run(db, name, args, title, "Delete on onceq_items", 1);
}

/* One item of ACK_QUEUE enqueued and claimed by s on db (oq_items_free
 * it, 1). */
static oq_item *claim_one(oq_db *admin, oq_db *db, oq_session *s)
{
  SEM_ENQUEUE(admin, ACK_QUEUE, 1);
  oq_item *got = NULL;
  ASSERT_EQ(SEM_CLAIM(db, s, ACK_QUEUE, 1, &got), 1);
  return got;
}

/* An ack handler with a statement of its own: the ack's BEGIN goes with it,
 * so the ack's settings go inside the open transaction. */
static oq_err handler_stmt(oq_db *db, const oq_item *it, void *ud)
{
  (void)it;
  (void)ud;
  return oq_db_exec(db, "SELECT 1", 0, NULL, NULL);
}

static void check_acks(oq_db *admin, const char *dsn)
{
  empty_table(admin);
  oq_db *dba = oqt_connect(oqt_worker_dsn(dsn));
  oq_db *ctl = oqt_connect(oqt_worker_dsn(dsn));
  oq_db *dbh = oqt_connect(oqt_worker_dsn(dsn));
  oq_session *s = SEM_LONG_SESSION(dba);
  const char *sid = oq_session_id(s);
  const char *ack = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK);
  SEM_PREPARE(ctl, "oqt_cold_ack", ack);
  for (int i = 0; i < ACKS; i++) {
    /* the single ack, as oq_ack sends it without a handler */
    oq_item *it = claim_one(admin, dba, s);
    bool rec = false;
    ASSERT_OK(dba, oq_ack(dba, s, it, NULL, NULL, NULL, &rec));
    oq_items_free(it, 1);
    /* the same after a handler's statement, on a connection of its own */
    it = claim_one(admin, dbh, s);
    ASSERT_OK(dbh, oq_ack(dbh, s, it, handler_stmt, NULL, NULL, &rec));
    oq_items_free(it, 1);
    /* the batch ack (oq_ack_batch) */
    it = claim_one(admin, dba, s);
    const char *ids[1] = {it->id};
    bool acked[1] = {false};
    size_t nacked = 0;
    ASSERT_OK(dba, oq_ack_batch(dba, s, ids, 1, acked, &nacked, NULL));
    ASSERT(acked[0]);
    oq_items_free(it, 1);
    /* the batched ack with effects (oq_ack_many_sql) */
    it = claim_one(admin, dba, s);
    oq_ack_result res[1];
    ASSERT_OK(dba, oq_ack_many_sql(dba, s, it, 1, "SELECT 1", NULL, res));
    ASSERT_EQ(res[0].verdict, OQ_ACK_DONE);
    oq_items_free(it, 1);
    /* the control: the single ack's text with the server's settings */
    it = claim_one(admin, dba, s);
    char run[300];
    snprintf(run, sizeof run,
             "EXECUTE oqt_cold_ack('%s', '%s', NULL, false, false)", it->id,
             sid);
    oqt_exec(ctl, run);
    ASSERT_EQ(
        QLONG(admin, "SELECT count(*) FROM onceq_items WHERE id = $1", it->id),
        0);
    oq_items_free(it, 1);
  }
  char a1[128], ah[128], ab[128], am[128];
  lib_statement(dba, ack, a1, sizeof a1);
  lib_statement(dbh, ack, ah, sizeof ah);
  lib_statement(dba, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_BATCH), ab,
                sizeof ab);
  lib_statement(dba, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_MANY), am,
                sizeof am);

  /* then a backlog, and one of its items claimed to be acknowledged */
  char sql[300];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload)"
           " SELECT '%s', jsonb_build_object('n', g)"
           " FROM generate_series(1, %d) AS g",
           ACK_QUEUE, ROWS);
  oqt_exec(admin, sql);
  oq_item *it = claim_one(admin, dba, s);
  char args[300];
  snprintf(args, sizeof args, "'%s', '%s', NULL, false, false", it->id, sid);
  long was = ack_rows(ctl, "oqt_cold_ack", args,
                      "control: the single ack with the server's settings");
  control_past(was);
  long now = ack_rows(dba, a1, args, "the library's single ack");
  SEM_WITHIN("the single ack planned on a one-row table", now, BOUND, "rows",
             "its plan, made on a one-row table, scans the table");
  now = ack_rows(dbh, ah, args, "the single ack after a handler's statement");
  SEM_WITHIN("the single ack after a handler's statement", now, BOUND, "rows",
             "its plan, made on a one-row table, scans the table");
  snprintf(args, sizeof args, "'{%s}', '%s', '{NULL}', false, '{f}'", it->id,
           sid);
  now = ack_rows(dba, ab, args, "the library's batch ack");
  SEM_WITHIN("the batch ack planned on a one-row table", now, BOUND, "rows",
             "its plan, made on a one-row table, scans the table");
  snprintf(args, sizeof args, "'{%s}', '%s', 1, '{NULL}', false, '{f}'", it->id,
           sid);
  now = ack_rows(dba, am, args, "the library's batched ack with effects");
  SEM_WITHIN("the batched ack planned on a one-row table", now, BOUND, "rows",
             "its plan, made on a one-row table, scans the table");
  oq_items_free(it, 1);
  oqt_exec(ctl, "DEALLOCATE oqt_cold_ack");
  oq_session_free(s);
  oq_db_close(dbh);
  oq_db_close(ctl);
  oq_db_close(dba);
}

#define NEXT_QUEUE "cold_next"
#define NEXT_KEYS 1000

/* A keyed item of NEXT_QUEUE, claimed by s on db, acknowledged by the
 * batched ack that claims its key's next item (oq_ack_opts.next, the
 * worker's --sql path); that next item is returned (oq_items_free it, 1). */
static oq_item *ack_with_next(oq_db *db, oq_session *s, oq_item *it)
{
  oq_item *next = NULL;
  size_t nnext = 0;
  oq_ack_opts o = {.next = &next, .nnext = &nnext};
  oq_ack_result res[1];
  ASSERT_OK(db, oq_ack_many_sql(db, s, it, 1, "SELECT 1", &o, res));
  ASSERT_EQ(res[0].verdict, OQ_ACK_DONE);
  ASSERT_EQ(nnext, 1);
  return next;
}

/* The ack's next-item statement (OQ__SQL_ACK_NEXT, prepared) runs after
 * the batched ack's settings: planned on a table of a few rows it still
 * finds a key's next item through the key index once a backlog is in. */
static void check_ack_next(oq_db *admin, const char *dsn)
{
  empty_table(admin);
  oq_db *dba = oqt_connect(oqt_worker_dsn(dsn));
  oq_db *ctl = oqt_connect(oqt_worker_dsn(dsn));
  oq_session *s = SEM_LONG_SESSION(dba);
  const char *sid = oq_session_id(s);
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_NEXT);
  SEM_PREPARE(ctl, "oqt_cold_next", text);
  for (int i = 0; i < ACKS; i++) {
    QEXEC(admin,
          "INSERT INTO onceq_items (queue, payload, ordering_key)"
          " VALUES ($1, '{}', 'once'), ($1, '{}', 'once'), ($1, '{}', 'once')",
          NEXT_QUEUE);
    oq_item *it = NULL;
    ASSERT_EQ(SEM_CLAIM(dba, s, NEXT_QUEUE, 1, &it), 1);
    oq_item *next = ack_with_next(dba, s, it);
    oq_items_free(it, 1);
    /* the control: the same text with the settings from before the scans
     * were turned off (OLD_SETTINGS: a generic plan, made at its first run,
     * on this table of three rows), claiming the key's third item, rolled
     * back */
    char run[300];
    snprintf(run, sizeof run,
             "EXECUTE oqt_cold_next('%s', '{%s}', '{once}', NULL)", sid,
             NEXT_QUEUE);
    oqt_exec(ctl, "BEGIN");
    oqt_exec(ctl, OLD_SETTINGS);
    oqt_exec(ctl, run);
    oqt_exec(ctl, "ROLLBACK");
    oq_item *last = ack_with_next(dba, s, next);
    oq_items_free(next, 1);
    bool rec = false;
    ASSERT_OK(dba, oq_ack(dba, s, last, NULL, NULL, NULL, &rec));
    oq_items_free(last, 1);
  }
  char name[128];
  lib_statement(dba, text, name, sizeof name);

  /* then a backlog of keyed items, one key's head claimed */
  char sql[400];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key)"
           " SELECT '%s', '{}', 'k' || (g %% %d)"
           " FROM generate_series(1, %d) AS g",
           NEXT_QUEUE, NEXT_KEYS, ROWS);
  oqt_exec(admin, sql);
  oq_item *it = NULL;
  ASSERT_EQ(SEM_CLAIM(dba, s, NEXT_QUEUE, 1, &it), 1);
  ASSERT(it->ordering_key != NULL);
  char args[300];
  snprintf(args, sizeof args, "'%s', '{%s}', '{%s}', NULL", sid, NEXT_QUEUE,
           it->ordering_key);
  long was = cached_run(ctl, "oqt_cold_next", args,
                        "control: the next item planned with the old settings",
                        "Update on onceq_items", 1);
  control_past(was);
  long now = cached_run(dba, name, args, "the library's next item",
                        "Update on onceq_items", 1);
  SEM_WITHIN("the next item planned on a table of a few rows", now, BOUND,
             "rows", "its plan, made on a table of a few rows, scans it");
  oq_items_free(it, 1);
  oqt_exec(ctl, "DEALLOCATE oqt_cold_next");
  oq_session_free(s);
  oq_db_close(ctl);
  oq_db_close(dba);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("cold_plan", 1);
  oq_db *admin = oqt_connect(dsn);
  if (oq_db_engine(admin) != OQ_ENGINE_POSTGRES) {
    printf("SKIP: the claim's plan cache is PostgreSQL's\n");
    oq_db_close(admin);
    return 0;
  }
  server_version =
      oqt_scalar(admin, "SELECT current_setting('server_version_num')::int");
  oq_db *dbc = oqt_connect(oqt_worker_dsn(dsn));
  oq_db *ctl = oqt_connect(oqt_worker_dsn(dsn));
  oqt_exec(admin, "ALTER TABLE onceq_items SET (autovacuum_enabled = off)");
  oqt_exec(admin, "VACUUM ANALYZE onceq_items");
  ASSERT_EQ(oqt_scalar(admin, "SELECT pg_relation_size('onceq_items')"), 0);
  oq_session *s = SEM_LONG_SESSION(dbc);
  const char *sid = oq_session_id(s);
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM);

  /* the control's plan and the library's, both made on the empty table */
  SEM_PREPARE(ctl, "oqt_cold", text);
  oqt_exec(ctl, "BEGIN");
  oqt_exec(ctl, OLD_SETTINGS);
  char run[200];
  snprintf(run, sizeof run, "EXECUTE oqt_cold('%s', '{%s}', %d, 67108864)", sid,
           QUEUE, CLAIM_N);
  oqt_exec(ctl, run);
  oqt_exec(ctl, "COMMIT");
  oq_item *none = NULL;
  ASSERT_EQ(SEM_CLAIM(dbc, s, QUEUE, CLAIM_N, &none), 0);
  oq_items_free(none, 0);
  char lib_name[128];
  lib_statement(dbc, text, lib_name, sizeof lib_name);

  /* then the items */
  char sql[300];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload)"
           " SELECT '%s', jsonb_build_object('n', g)"
           " FROM generate_series(1, %d) AS g",
           QUEUE, ROWS);
  oqt_exec(admin, sql);

  long was = cached_rows(ctl, "oqt_cold", sid,
                         "control: planned empty with the old settings");
  control_past(was);
  long now = cached_rows(dbc, lib_name, sid,
                         "the library's claim, planned at its first claim");
  SEM_WITHIN("the claim planned on an empty table", now, BOUND, "rows",
             "its plan, made on the empty table, scans the table");

  oq_item *got = NULL;
  ASSERT_EQ(SEM_CLAIM(dbc, s, QUEUE, CLAIM_N, &got), CLAIM_N);
  oq_items_free(got, CLAIM_N);
  printf("ok the library's claim takes %d of them\n", CLAIM_N);
  check_acks(admin, dsn);
  check_ack_next(admin, dsn);
  check_claims_in_tx(admin, dsn);
  oqt_exec(ctl, "DEALLOCATE oqt_cold");
  oq_session_free(s);
  oq_db_close(ctl);
  oq_db_close(dbc);
  oq_db_close(admin);
  return 0;
}
