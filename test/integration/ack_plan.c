/*
 * it_lib_ack_plan: the statements that name a session's items by id (the
 * acks, a failure's retry and dead-letter, a release, the keys read before
 * a keyed ack) do not read them through onceq_items_claim on PostgreSQL;
 * they find them by the primary key.
 *
 * The state that misled the planner: the table analyzed while nothing was
 * claimed (a backlog enqueued, then worked: the claim column all NULL in
 * the statistics), then one session holding many claims. The planner then
 * costs `claim = $session` at one row and, in the generic plan a prepared
 * statement may switch to, read every item the session holds and compared
 * each with the whole id array (lib/src/internal.h, OQ__STILL_CLAIMED). With
 * autovacuum off for the table (no ANALYZE may mend the statistics
 * meanwhile), a control first shows that state still misleads the planner:
 * the all-or-nothing ack written with plain `claim = $2` must read the
 * claim index, or the test proves nothing and fails. Then each statement's
 * generic plan (plan_cache_mode) is shown and checked, and the all-or-
 * nothing ack, a retry, a dead-letter and a release run against that
 * state and do what they should. Runs under the harness's isolation.
 */
#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "ack_plan"
#define HELD 2000
#define CLAIM_MAX 500

typedef struct plan_scan {
  int pkey, claim; /* how often the plan names each index */
} plan_scan;

static int lines_naming(const char *plan, const char *index)
{
  int n = 0;
  for (const char *at = strstr(plan, index); at; at = strstr(at + 1, index))
    n++;
  return n;
}

/* The generic plan of `text`, prepared as the library prepares it (its
 * parameters typed by its own casts): which indexes it reads. */
static plan_scan generic_plan(oq_db *db, const char *text, const char *name)
{
  SEM_PREPARE(db, "oqt_p", text);
  long n = oqt_scalar(db, "SELECT cardinality(parameter_types) FROM"
                          " pg_prepared_statements WHERE name = 'oqt_p'");
  char explain[512];
  size_t at = (size_t)snprintf(explain, sizeof explain,
                               "EXPLAIN (COSTS OFF) EXECUTE oqt_p(");
  for (long i = 0; i < n && at < sizeof explain; i++)
    at += (size_t)snprintf(explain + at, sizeof explain - at, "%sNULL",
                           i ? ", " : "");
  if (at + 2 > sizeof explain)
    OQT_FAIL("%ld parameters do not fit the EXPLAIN buffer", n);
  snprintf(explain + at, sizeof explain - at, ")");
  char title[160];
  snprintf(title, sizeof title, "%s, generic plan", name);
  char *plan = SEM_PLAN(db, explain, title);
  plan_scan p = {lines_naming(plan, "onceq_items_pkey"),
                 lines_naming(plan, "onceq_items_claim")};
  free(plan);
  oqt_exec(db, "DEALLOCATE oqt_p");
  return p;
}

/* Statement st reads no item through the claim index and, when by_pkey,
 * finds them by the primary key. */
static void check_generic_plan(oq_db *db, oq__stmt st, const char *name,
                               bool by_pkey)
{
  plan_scan p = generic_plan(db, oq__sql(OQ_ENGINE_POSTGRES, st), name);
  if (p.claim > 0 || (by_pkey && p.pkey == 0))
    OQT_FAIL("%s reads onceq_items %s (above): with the statistics of an "
             "unclaimed backlog it filters every item the session holds "
             "against its ids",
             name, p.claim > 0 ? "by the claim index" : "not by its key");
  printf("ok %s %s\n", name,
         by_pkey ? "finds its items by the primary key"
                 : "does not read the claim index");
}

/* The control: the all-or-nothing ack with `claim = $2` as it was written
 * before OQ__STILL_CLAIMED must still read the claim index in this state. */
static void check_control(oq_db *db)
{
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_MANY);
  char *old = SEM_AS_BEFORE(text, OQ__STILL_CLAIMED, "claim = $2::uuid");
  plan_scan p = generic_plan(db, old, "control: the ack with claim = $2");
  free(old);
  if (p.claim == 0)
    OQT_FAIL("the control (above) does not read the claim index: this "
             "state no longer misleads the planner, so the checks below "
             "would pass with the old text too");
  printf("ok the control reads the claim index: the state misleads the "
         "planner\n");
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
  if (oq_db_engine(admin) == OQ_ENGINE_POSTGRES)
    oqt_exec(admin, "ALTER TABLE onceq_items SET (autovacuum_enabled = off)");
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
    check_control(admin);
    check_generic_plan(admin, OQ__SQL_ACK, "the ack", true);
    check_generic_plan(admin, OQ__SQL_ACK_BATCH, "the batch ack", true);
    check_generic_plan(admin, OQ__SQL_ACK_MANY, "the all-or-nothing ack", true);
    check_generic_plan(admin, OQ__SQL_FAIL_RETRY, "a failure's retry", true);
    check_generic_plan(admin, OQ__SQL_FAIL_DEAD, "a failure's dead-letter",
                       true);
    check_generic_plan(admin, OQ__SQL_RELEASE, "a release", true);
    /* its key test is written so that it does not match
     * onceq_items_key_order's predicate either (dialect.c) */
    check_generic_plan(admin, OQ__SQL_ACK_KEYS, "the keyed ack's key lookup",
                       true);
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
  QEXEC(admin, "UPDATE onceq_items SET max_attempts = 1 WHERE id = $1::uuid",
        held[1][1].id);
  ASSERT_OK(dbc, oq_fail(dbc, s, &held[1][1], "a dead letter", 0, &out));
  ASSERT_EQ(out, OQ_FAIL_DEAD);
  size_t released = 0;
  ASSERT_OK(dbc, oq_release(dbc, s, held[2], CLAIM_MAX, &released));
  ASSERT_EQ(released, CLAIM_MAX);
  char *ids = ids_of(held[3], CLAIM_MAX);
  long still = QLONG(admin,
                     "SELECT count(*) FROM onceq_items WHERE"
                     " id = ANY($1::uuid[]) AND claim = $2::uuid",
                     ids, oq_session_id(s));
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
         CLAIM_MAX, CLAIM_MAX, 2 * CLAIM_MAX - 2);
  for (int i = 0; i < HELD / CLAIM_MAX; i++)
    oq_items_free(held[i], CLAIM_MAX);
  oq_session_free(s);
  oq_db_close(dbc);
  oq_db_close(admin);
  return 0;
}
