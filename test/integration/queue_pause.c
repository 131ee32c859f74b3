/*
 * queue_pause.c: pause and resume a queue (onceq/queues.h), in both claim
 * forms (one statement on PostgreSQL; one statement per queue, what
 * CockroachDB runs, forced with oq__claim_force_per_queue).
 *
 * Checks, per form: a paused queue's items are not claimed while another
 * queue's are, by the very next claim after the pause; enqueue into a
 * paused queue works; an item claimed before the pause is acknowledged
 * after it (a control decides where a claim looks, never who may ack);
 * the next claim after a resume takes the paused queue's items; pause and
 * resume are idempotent and oq_queue_paused_get reads the state back; an
 * empty queue name is refused.
 */
#include <stdbool.h>

#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

/* Claim up to max from q and ack them all; returns how many came from
 * queue only_from (every item must be from an allowed queue). */
static size_t claim_ack(oq_db *db, const oq_session *s, const char *const *q,
                        size_t nq, int max, const char *forbidden)
{
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, nq, max, &items, &n));
  for (size_t i = 0; i < n; i++) {
    if (forbidden)
      ASSERT(strcmp(items[i].queue, forbidden) != 0);
    ASSERT_OK(db, oq_ack(db, s, &items[i], NULL, NULL, NULL, NULL));
  }
  oq_items_free(items, n);
  return n;
}

static void run_form(oq_db *db, bool per_queue)
{
  const char *form = SEM_FORM_BEGIN(db, per_queue, "pz_%");
  if (!form)
    return;
  oq_session *s = SEM_LONG_SESSION(db);
  const char *q[2] = {"pz_a", "pz_b"};
  const char *qa[1] = {"pz_a"};

  SEM_ENQUEUE(db, "pz_a", 4);
  SEM_ENQUEUE(db, "pz_b", 3);
  /* one item of pz_a is running when the pause comes */
  oq_item *running = NULL;
  size_t nrun = 0;
  ASSERT_OK(db, oq_claim(db, s, qa, 1, 1, &running, &nrun));
  ASSERT_EQ(nrun, 1);

  bool paused = true;
  ASSERT_OK(db, oq_queue_paused_get(db, "pz_a", &paused));
  ASSERT(!paused); /* no row: not paused */
  ASSERT_OK(db, oq_queue_pause(db, "pz_a"));
  ASSERT_OK(db, oq_queue_pause(db, "pz_a")); /* idempotent */
  ASSERT_OK(db, oq_queue_paused_get(db, "pz_a", &paused));
  ASSERT(paused);

  /* the next claim skips pz_a, even asked for it alone */
  ASSERT_EQ(claim_ack(db, s, qa, 1, 10, "pz_a"), 0);
  ASSERT_EQ(claim_ack(db, s, q, 2, 10, "pz_a"), 3); /* pz_b's three */
  SEM_ENQUEUE(db, "pz_a", 2);                       /* enqueue still works */
  ASSERT_EQ(claim_ack(db, s, q, 2, 10, "pz_a"), 0);
  /* the item in flight finishes */
  ASSERT_OK(db, oq_ack(db, s, &running[0], NULL, NULL, NULL, NULL));
  oq_items_free(running, nrun);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE queue = $1"
                  " AND claim IS NULL",
                  "pz_a"),
            5);

  ASSERT_OK(db, oq_queue_resume(db, "pz_a"));
  ASSERT_OK(db, oq_queue_resume(db, "pz_a")); /* idempotent */
  ASSERT_OK(db, oq_queue_paused_get(db, "pz_a", &paused));
  ASSERT(!paused);
  ASSERT_EQ(claim_ack(db, s, q, 2, 10, NULL), 5); /* the next claim */
  ASSERT_EQ(
      QLONG(db, "SELECT count(*) FROM onceq_items WHERE queue LIKE $1", "pz_%"),
      0);

  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq__claim_force_per_queue(db, false);
  printf("ok %s: pause and resume\n", form);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("queue_pause", 1);
  oq_db *db = oqt_connect(dsn);
  ASSERT_ERR(OQ_ERR_INVALID, oq_queue_pause(db, ""));
  ASSERT_ERR(OQ_ERR_INVALID, oq_queue_resume(db, NULL));
  run_form(db, false);
  run_form(db, true);
  oq_db_close(db);
  return 0;
}
