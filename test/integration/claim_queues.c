/*
 * claim_queues.c: a claim over several queues, in both forms the library
 * has: one statement (PostgreSQL) and one statement per queue (what
 * CockroachDB runs; forced here with oq__claim_force_per_queue so the
 * loop runs against a real server).
 *
 * Checks, per form: never more than max items; every ready item of every
 * listed queue is claimed exactly once across calls, none of an unlisted
 * queue; priority orders items within a queue; a worker fenced from the
 * item (its claim gone) cannot ack it. Per-queue form only: consecutive
 * max=1 claims start at different queues, so one busy queue cannot starve
 * another; when a later queue's statement fails, the items of the earlier
 * ones are handed over, unless the failure says the session is gone (then
 * nothing is: the reap gave those items to others).
 */
#include <stdbool.h>

#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define PER_QUEUE 6

static void enqueue(oq_db *db, const char *queue, int priority, int n)
{
  for (int i = 0; i < n; i++) {
    char id[OQ_UUID_LEN + 1];
    oq_enqueue_status st = (oq_enqueue_status)-1;
    oq_enqueue_opts o = {.queue = queue, .priority = priority};
    ASSERT_OK(db, oq_enqueue(db, &o, id, &st));
    ASSERT_EQ(st, OQ_ENQUEUED);
  }
}

static size_t claim(oq_db *db, const oq_session *s, const char *const *q,
                    size_t nq, int max, oq_item **items)
{
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, nq, max, items, &n));
  ASSERT_LE((long long)n, (long long)max);
  return n;
}

static void run_form(oq_db *db, bool per_queue)
{
  const char *form = per_queue ? "per-queue" : "one-statement";
  if (!per_queue && !oq_db_traits(db)->multi_queue_claim) {
    /* ONCEQ_ENGINE_TRAITS=cockroachdb: every claim is per queue */
    printf("skip one-statement form: the %s traits claim per queue\n",
           oq_db_traits(db)->name);
    return;
  }
  oq__claim_force_per_queue(db, per_queue);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue LIKE $1", "cq_%");
  oq_session *s = SEM_LONG_SESSION(db);

  /* a and b: PER_QUEUE items each, two of a's with priority 5; c empty;
   * z is not asked for. */
  enqueue(db, "cq_a", 0, PER_QUEUE - 2);
  enqueue(db, "cq_a", 5, 2);
  enqueue(db, "cq_b", 0, PER_QUEUE);
  enqueue(db, "cq_z", 0, 3);
  const char *q[3] = {"cq_a", "cq_b", "cq_c"};

  /* Rotation: two max=1 claims over {a, b} take one item from each (the
   * per-queue form starts at the next queue each call). The one-statement
   * form orders by priority across queues: a's priority-5 items first. */
  oq_item *it1 = NULL, *it2 = NULL;
  ASSERT_EQ(claim(db, s, q, 2, 1, &it1), 1);
  ASSERT_EQ(claim(db, s, q, 2, 1, &it2), 1);
  if (per_queue) {
    ASSERT(strcmp(it1[0].queue, it2[0].queue) != 0);
  } else {
    ASSERT_STREQ(it1[0].queue, "cq_a");
    ASSERT_STREQ(it2[0].queue, "cq_a");
  }
  for (oq_item *it = it1; it; it = (it == it1) ? it2 : NULL)
    if (strcmp(it[0].queue, "cq_a") == 0)
      ASSERT_EQ(it[0].priority, 5); /* priority first within a queue */
  size_t total = 2;
  ASSERT_OK(db, oq_ack(db, s, &it1[0], NULL, NULL, NULL, NULL));
  ASSERT_OK(db, oq_ack(db, s, &it2[0], NULL, NULL, NULL, NULL));
  oq_items_free(it1, 1);
  oq_items_free(it2, 1);

  /* The rest, 4 at a time: never more than asked, each item once. */
  for (int round = 0; round < 10; round++) {
    oq_item *items = NULL;
    size_t n = claim(db, s, q, 3, 4, &items);
    if (n == 0)
      break;
    for (size_t i = 0; i < n; i++) {
      ASSERT(strcmp(items[i].queue, "cq_z") != 0);
      ASSERT_EQ(items[i].attempt, 1);
      ASSERT_OK(db, oq_ack(db, s, &items[i], NULL, NULL, NULL, NULL));
    }
    total += n;
    oq_items_free(items, n);
  }
  ASSERT_EQ(total, 2 * PER_QUEUE);
  ASSERT_EQ(
      QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue = $1", "cq_z"),
      3);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue LIKE $1"
                  " AND queue <> 'cq_z'",
                  "cq_%"),
            0);

  /* The claim check still decides: an item claimed in the per-queue loop
   * and then taken away (claim cleared, as a reap does) cannot be acked. */
  enqueue(db, "cq_b", 0, 1);
  oq_item *items = NULL;
  ASSERT_EQ(claim(db, s, q, 3, 5, &items), 1);
  QEXEC(db, "UPDATE onceq_items SET claim = NULL WHERE id = $1", items[0].id);
  ASSERT_ERR(OQ_ERR_CLAIM_LOST,
             oq_ack(db, s, &items[0], NULL, NULL, NULL, NULL));
  oq_items_free(items, 1);

  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  QEXEC(db, "DELETE FROM onceq_items WHERE queue LIKE $1", "cq_%");
  printf("ok %s multi-queue claim\n", form);
}

/* Per-queue form: a trigger makes the statement for cq_bad fail (a plain
 * SQL error) and the one for cq_kill fail as a vanished session does
 * (23503 on the claim's foreign key). Two consecutive calls start at
 * different queues, so each order is seen once. */
static void run_partial_failures(oq_db *db)
{
  oq__claim_force_per_queue(db, true);
  oqt_exec(db, "CREATE FUNCTION cq_refuse() RETURNS trigger LANGUAGE plpgsql "
               "AS $$ BEGIN IF NEW.queue = 'cq_kill' THEN RAISE EXCEPTION "
               "'session gone' USING ERRCODE = 'foreign_key_violation'; END "
               "IF; RAISE EXCEPTION 'refused'; END $$");
  oqt_exec(db, "CREATE TRIGGER cq_refuse BEFORE UPDATE ON onceq_items FOR "
               "EACH ROW WHEN (NEW.queue IN ('cq_bad', 'cq_kill') AND "
               "NEW.claim IS NOT NULL) EXECUTE FUNCTION cq_refuse()");
  oq_session *s = SEM_LONG_SESSION(db);
  enqueue(db, "cq_good", 0, 2);
  enqueue(db, "cq_bad", 0, 1);
  enqueue(db, "cq_kill", 0, 1);

  const char *gb[2] = {"cq_good", "cq_bad"};
  int handed = 0, failed = 0;
  for (int call = 0; call < 2; call++) {
    oq_item *items = NULL;
    size_t n = 0;
    oq_err e = oq_claim(db, s, gb, 2, 5, &items, &n);
    if (e == OQ_OK) {
      ASSERT_EQ(n, 2); /* cq_good first: its items, then cq_bad failed */
      for (size_t i = 0; i < n; i++)
        ASSERT_STREQ(items[i].queue, "cq_good");
      handed++;
    } else {
      ASSERT_EQ(e, OQ_ERR_SQL); /* cq_bad first: nothing claimed */
      ASSERT_EQ(n, 0);
      ASSERT(items == NULL);
      failed++;
    }
    oq_items_free(items, n);
  }
  ASSERT_EQ(handed, 1);
  ASSERT_EQ(failed, 1);

  enqueue(db, "cq_good", 0, 2);
  const char *gk[2] = {"cq_good", "cq_kill"};
  for (int call = 0; call < 2; call++) {
    oq_item *items = NULL;
    size_t n = 7;
    ASSERT_ERR(OQ_ERR_SESSION_LOST, oq_claim(db, s, gk, 2, 5, &items, &n));
    ASSERT_EQ(n, 0); /* whatever cq_good gave is not handed over */
    ASSERT(items == NULL);
  }
  oqt_exec(db, "DROP TRIGGER cq_refuse ON onceq_items");
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq__claim_force_per_queue(db, false);
  printf("ok per-queue claim: partial failures\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("claim_queues", 1);
  oq_db *db = oqt_connect(dsn);
  run_form(db, false);
  run_form(db, true);
  run_partial_failures(db);
  oq_db_close(db);
  return 0;
}
