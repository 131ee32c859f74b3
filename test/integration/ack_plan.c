/*
 * it_lib_ack_plan: the statements that name a session's items by id (the
 * acks, a failure's retry and dead-letter, a release) find them by the
 * primary key, not by onceq_items_claim, on PostgreSQL.
 *
 * The state that misled the planner: the table analyzed while nothing was
 * claimed (a backlog enqueued, then worked: the claim column all NULL in
 * the statistics), then one session holding many claims. The planner then
 * costs `claim = $session` at one row and, in the generic plan a prepared
 * statement switches to, read every item the session holds and compared
 * each with the whole id array (lib/src/dialect.c, STILL_CLAIMED). The
 * generic plan is asked for directly (plan_cache_mode) and shown; then one
 * batch ack, a retry, a dead-letter and a release run against that state
 * and do what they should. Runs under the harness's isolation.
 */
#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "ack_plan"
#define HELD 2000
#define CLAIM_MAX 500

typedef struct plan_scan {
  int pkey, claim; /* plan lines naming each index */
} plan_scan;

static oq_err plan_line(void *ud, int ncols, const char *const *vals)
{
  plan_scan *p = ud;
  if (ncols < 1 || !vals[0])
    return OQ_OK;
  printf("    %s\n", vals[0]);
  if (strstr(vals[0], "onceq_items_pkey"))
    p->pkey++;
  if (strstr(vals[0], "onceq_items_claim"))
    p->claim++;
  return OQ_OK;
}

static oq_err count_row(void *ud, int ncols, const char *const *vals)
{
  if (ncols >= 1 && vals[0])
    *(long *)ud = atol(vals[0]);
  return OQ_OK;
}

/* The generic plan of statement st, prepared as the library prepares it
 * (its parameters typed by its own casts). */
static void check_generic_plan(oq_db *db, oq__stmt st, const char *name)
{
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, st);
  size_t len = strlen(text) + 32;
  char *sql = malloc(len);
  if (!sql)
    OQT_FAIL("out of memory");
  snprintf(sql, len, "PREPARE oqt_p AS %s", text);
  oqt_exec(db, sql);
  free(sql);
  long n = -1;
  ASSERT_OK(db, oq_db_query(db,
                            "SELECT cardinality(parameter_types) FROM"
                            " pg_prepared_statements WHERE name = 'oqt_p'",
                            0, NULL, count_row, &n));
  char explain[512];
  size_t at = (size_t)snprintf(explain, sizeof explain,
                               "EXPLAIN (COSTS OFF) EXECUTE oqt_p(");
  for (long i = 0; i < n && at < sizeof explain; i++)
    at += (size_t)snprintf(explain + at, sizeof explain - at, "%sNULL",
                           i ? ", " : "");
  if (at + 2 > sizeof explain)
    OQT_FAIL("%ld parameters do not fit the EXPLAIN buffer", n);
  snprintf(explain + at, sizeof explain - at, ")");
  printf("  %s, generic plan:\n", name);
  plan_scan p = {0, 0};
  ASSERT_OK(db, oq_db_query(db, explain, 0, NULL, plan_line, &p));
  oqt_exec(db, "DEALLOCATE oqt_p");
  if (p.claim > 0 || p.pkey == 0)
    OQT_FAIL("%s reads onceq_items by the claim index (above): with the "
             "statistics of an unclaimed backlog it filters every item the "
             "session holds against its ids",
             name);
  printf("ok %s finds its items by the primary key\n", name);
}

/* oq_ack_many's effects: none */
static oq_err no_effect(oq_db *db, const oq_item *it, void *ud)
{
  (void)db;
  (void)it;
  (void)ud;
  return OQ_OK;
}

/* `n` held items' ids, as a text array */
static char *ids_of(const oq_item *items, size_t n)
{
  const char **ids = malloc(n * sizeof *ids);
  if (!ids)
    OQT_FAIL("out of memory");
  for (size_t i = 0; i < n; i++)
    ids[i] = items[i].id;
  char *arr = oq__text_array(ids, n);
  free(ids);
  if (!arr)
    OQT_FAIL("out of memory");
  return arr;
}

int main(void)
{
  const char *dsn = oqt_fresh_db("ack_plan", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *dbc = oqt_connect(oqt_worker_dsn(dsn));
  oqt_enqueue_n(admin, QUEUE, HELD);
  oqt_exec(admin, "VACUUM ANALYZE onceq_items");
  oq_session *s = SEM_LONG_SESSION(dbc);
  oq_item *held[HELD / CLAIM_MAX];
  for (int i = 0; i < HELD / CLAIM_MAX; i++)
    ASSERT_EQ(SEM_CLAIM(dbc, s, QUEUE, CLAIM_MAX, &held[i]), CLAIM_MAX);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            HELD);

  if (oq_db_engine(admin) == OQ_ENGINE_POSTGRES) {
    oqt_exec(admin, "SET plan_cache_mode = force_generic_plan");
    check_generic_plan(admin, OQ__SQL_ACK, "the ack");
    check_generic_plan(admin, OQ__SQL_ACK_BATCH, "the batch ack");
    check_generic_plan(admin, OQ__SQL_ACK_MANY, "the all-or-nothing ack");
    check_generic_plan(admin, OQ__SQL_FAIL_RETRY, "a failure's retry");
    check_generic_plan(admin, OQ__SQL_FAIL_DEAD, "a failure's dead-letter");
    check_generic_plan(admin, OQ__SQL_RELEASE, "a release");
    oqt_exec(admin, "RESET plan_cache_mode");
  } else {
    printf("SKIP: the plans are checked on PostgreSQL only\n");
  }

  /* the same statements, run by the library against that state */
  oq_ack_result res[CLAIM_MAX];
  ASSERT_OK(
      dbc, oq_ack_many(dbc, s, held[0], CLAIM_MAX, no_effect, NULL, NULL, res));
  for (int i = 0; i < CLAIM_MAX; i++)
    ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
  oq_fail_outcome out = OQ_FAIL_DEAD;
  ASSERT_OK(dbc, oq_fail(dbc, s, &held[1][0], "a retry", 60000, &out));
  ASSERT_EQ(out, OQ_FAIL_RETRY);
  const char *last[1] = {held[1][1].id};
  ASSERT_OK(admin, oq_db_exec(admin,
                              "UPDATE onceq_items SET max_attempts = 1"
                              " WHERE id = $1::uuid",
                              1, last, NULL));
  ASSERT_OK(dbc, oq_fail(dbc, s, &held[1][1], "a dead letter", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_DEAD);
  size_t released = 0;
  ASSERT_OK(dbc, oq_release(dbc, s, held[2], CLAIM_MAX, &released));
  ASSERT_EQ(released, CLAIM_MAX);
  char *ids = ids_of(held[3], CLAIM_MAX);
  const char *p[2] = {ids, oq_session_id(s)};
  long still = -1;
  ASSERT_OK(admin, oq_db_query(admin,
                               "SELECT count(*) FROM onceq_items WHERE"
                               " id = ANY($1::uuid[]) AND claim = $2::uuid",
                               2, p, count_row, &still));
  free(ids);
  ASSERT_EQ(still, CLAIM_MAX);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"),
            HELD - CLAIM_MAX - 1);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL"),
            CLAIM_MAX + CLAIM_MAX - 2);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(*) FROM onceq_dead"), 1);
  printf("ok against that state: %d acked, one retried, one dead-lettered, "
         "%d released, the other %d still held\n",
         CLAIM_MAX, CLAIM_MAX, CLAIM_MAX);
  for (int i = 0; i < HELD / CLAIM_MAX; i++)
    oq_items_free(held[i], CLAIM_MAX);
  oq_session_free(s);
  oq_db_close(dbc);
  oq_db_close(admin);
  return 0;
}
