/*
 * ack_next.c: the batched --sql ack claims a key's next item in the
 * transaction that acknowledges its head (oq_ack_opts.next; docs/design.md
 * 5a, "The ack's next item").
 *
 * Checks, one batch acknowledging the claimed heads of several keys:
 *  - key a (3 items): its second item comes back, claimed by the session
 *    (attempt 1, claim and claimed_at as oq_claim sets them), and only
 *    once the COMMIT is done; acking it brings the third, then nothing;
 *  - no next item where it must not be claimed: the next one is not ready
 *    (run_at ahead), out of attempts, claimed by another session, or its
 *    queue is paused or has a concurrency limit; an unkeyed item has none;
 *  - the next item is the key's first remaining item by enqueue_seq, not
 *    the one after the head: an item of the key with a lower enqueue_seq
 *    than the others (inserted with one by hand) comes first;
 *  - without opts.next nothing is claimed (the plain ack);
 *  - a partitioned session's next items (opts.next_slots): none when the
 *    key's slot is not among the slots given, the next item when it is;
 *  - the keys come from the items (oq_item.ordering_key, as the claim
 *    returns it: the key's text, NULL without one): an item that names
 *    another key brings that key's head, not its own key's next item; an
 *    item marked keyed without its key has its key read from the database.
 */
#include <string.h>

#include "oq_test.h"
#include "sem_util.h"

#define ACK_SQL "SELECT $2::uuid AS id"

static void put(oq_db *db, const char *queue, const char *key, int n)
{
  char nb[16];
  snprintf(nb, sizeof nb, "%d", n);
  QEXEC(db,
        "INSERT INTO onceq_items (queue, ordering_key, payload)"
        " SELECT $1, $2, jsonb_build_object('i', g)"
        " FROM generate_series(1, $3::int) g ORDER BY g",
        queue, key, nb);
}

static long payload_i(oq_db *db, const char *id)
{
  return QLONG(
      db, "SELECT (payload->>'i')::int8 FROM onceq_items WHERE id = $1", id);
}

/* Ack items[0..n) in one batch, asking for next items; every ack must
 * commit. Returns the next items (*nnext of them). */
static oq_item *ack_next(oq_db *db, const oq_session *s, oq_item *items,
                         size_t n, size_t *nnext)
{
  oq_item *next = NULL;
  bool unknown = false;
  *nnext = 0;
  oq_ack_opts o = {.next = &next, .nnext = nnext, .next_unknown = &unknown};
  oq_ack_result res[16];
  ASSERT(n <= 16);
  ASSERT_OK(db, oq_ack_many_sql(db, s, items, n, ACK_SQL, &o, res));
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
  ASSERT(!unknown);
  return next;
}

static void test_next(oq_db *db, oq_session *w, oq_session *other)
{
  put(db, "nx", "a", 3);
  put(db, "nx", "b", 2); /* b's next is not ready */
  put(db, "nx", "c", 2); /* c's next is claimed by another session */
  put(db, "nx", "d", 2); /* d's next is out of attempts */
  put(db, "nxp", "p", 2);
  put(db, "nxl", "l", 2);
  QEXEC(db, "INSERT INTO onceq_items (queue, payload) VALUES ('nx', '{}')");
  QEXEC(db, "UPDATE onceq_items SET run_at = now() + interval '1 hour'"
            " WHERE ordering_key = 'b' AND payload->>'i' = '2'");
  QEXEC(db, "UPDATE onceq_items SET attempts = max_attempts"
            " WHERE ordering_key = 'd' AND payload->>'i' = '2'");
  const char *qs[3] = {"nx", "nxp", "nxl"};
  oq_item *it = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, w, qs, 3, 100, &it, &n));
  ASSERT_EQ(n, 7); /* the heads of a b c d p l, and the unkeyed item */
  QEXEC(db,
        "UPDATE onceq_items SET claim = $1::uuid, claimed_at = now()"
        " WHERE ordering_key = 'c' AND payload->>'i' = '2'",
        oq_session_id(other));
  QEXEC(db, "INSERT INTO onceq_queues (queue, paused) VALUES ('nxp', true)");
  QEXEC(db, "INSERT INTO onceq_queues (queue, max_running) VALUES ('nxl', 5)");
  size_t nn = 0;
  oq_item *next = ack_next(db, w, it, n, &nn);
  oq_items_free(it, n);
  ASSERT_EQ(nn, 1);
  ASSERT_STREQ(next[0].queue, "nx");
  ASSERT_EQ(next[0].attempt, 1);
  ASSERT(next[0].keyed);
  ASSERT(next[0].claimed_at_us > 0);
  ASSERT_EQ(payload_i(db, next[0].id), 2);
  ASSERT_EQ(QLONG(db,
                  "SELECT count(*) FROM onceq_items WHERE id = $1"
                  " AND claim = $2::uuid AND ordering_key = 'a'"
                  " AND attempts = 1 AND claimed_at IS NOT NULL",
                  next[0].id, oq_session_id(w)),
            1);
  /* nothing else of ours */
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE claim = $1::uuid",
                  oq_session_id(w)),
            1);
  /* its ack brings the third, which brings nothing */
  size_t nn2 = 0;
  oq_item *next2 = ack_next(db, w, next, nn, &nn2);
  oq_items_free(next, nn);
  ASSERT_EQ(nn2, 1);
  ASSERT_EQ(payload_i(db, next2[0].id), 3);
  size_t nn3 = 0;
  oq_item *next3 = ack_next(db, w, next2, nn2, &nn3);
  oq_items_free(next2, nn2);
  ASSERT_EQ(nn3, 0);
  oq_items_free(next3, nn3);
  printf("ok the next item of an acked head, and none where it must not be "
         "claimed (not ready, exhausted, claimed, paused, limited)\n");
}

/* The key's first remaining item by enqueue_seq, not the one after the
 * head's: an enqueue that got a lower sequence than the key's others. */
static void test_first_remaining(oq_db *db, oq_session *w)
{
  put(db, "nf", "k", 2);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "nf", 10, &it);
  ASSERT_EQ(n, 1);
  long head =
      QLONG(db, "SELECT enqueue_seq FROM onceq_items WHERE id = $1", it[0].id);
  /* a row of the key with a lower enqueue_seq than the head: committed
   * after it was claimed, as a concurrent enqueue may */
  char seq[32];
  snprintf(seq, sizeof seq, "%ld", head);
  QEXEC(db,
        "INSERT INTO onceq_items (queue, ordering_key, payload, enqueue_seq)"
        " VALUES ('nf', 'k', '{\"i\": 9}', $1::int8 - 1)",
        seq);
  size_t nn = 0;
  oq_item *next = ack_next(db, w, it, n, &nn);
  oq_items_free(it, n);
  ASSERT_EQ(nn, 1);
  ASSERT_EQ(payload_i(db, next[0].id), 9);
  ASSERT_OK(db, oq_ack(db, w, &next[0], NULL, NULL, NULL, NULL));
  oq_items_free(next, nn);
  printf("ok the next item is the key's first remaining by enqueue_seq\n");
}

/* Without opts.next the ack claims nothing. */
static void test_not_asked(oq_db *db, oq_session *w)
{
  put(db, "nn", "k", 2);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "nn", 10, &it);
  ASSERT_EQ(n, 1);
  oq_ack_result res[1];
  ASSERT_OK(db, oq_ack_many_sql(db, w, it, n, ACK_SQL, NULL, res));
  ASSERT_EQ(res[0].verdict, OQ_ACK_DONE);
  oq_items_free(it, n);
  ASSERT_EQ(QLONG(db, "SELECT count(*) FROM onceq_items WHERE claim = $1::uuid",
                  oq_session_id(w)),
            0);
  printf("ok without opts.next nothing is claimed\n");
}

/* opts.next_slots: the key's next item only from the slots given. */
static void test_slots(oq_db *db, oq_session *w)
{
  put(db, "ns", "k", 3);
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "ns", 10, &it);
  ASSERT_EQ(n, 1);
  int slot = it[0].slot;
  ASSERT_EQ(QLONG(db, "SELECT count(DISTINCT part) FROM onceq_items"
                      " WHERE queue = 'ns'"),
            1); /* a key's items share one slot */
  int elsewhere = (slot + 1) % 1024;
  oq_item *next = NULL;
  size_t nn = 0;
  oq_ack_opts o = {
      .next = &next, .nnext = &nn, .next_slots = &elsewhere, .nnext_slots = 1};
  oq_ack_result res[1];
  ASSERT_OK(db, oq_ack_many_sql(db, w, it, n, ACK_SQL, &o, res));
  ASSERT_EQ(res[0].verdict, OQ_ACK_DONE);
  oq_items_free(it, n);
  if (nn != 0)
    OQT_FAIL("the next item of a key in slot %d came back with next_slots"
             " {%d} (%zu items)",
             slot, elsewhere, nn);
  oq_items_free(next, nn);
  n = SEM_CLAIM(db, w, "ns", 10, &it);
  ASSERT_EQ(n, 1);
  int slots[2] = {elsewhere, slot};
  o = (oq_ack_opts){
      .next = &next, .nnext = &nn, .next_slots = slots, .nnext_slots = 2};
  ASSERT_OK(db, oq_ack_many_sql(db, w, it, n, ACK_SQL, &o, res));
  ASSERT_EQ(res[0].verdict, OQ_ACK_DONE);
  oq_items_free(it, n);
  ASSERT_EQ(nn, 1);
  ASSERT_EQ(payload_i(db, next[0].id), 3);
  ASSERT_EQ(next[0].slot, slot);
  ASSERT_OK(db, oq_ack(db, w, &next[0], NULL, NULL, NULL, NULL));
  oq_items_free(next, nn);
  printf("ok next_slots: no next item outside the slots given, the next one"
         " inside them\n");
}

/* The round's keys are the items' own, read from the database only for a
 * keyed item that comes without its key. */
static void test_item_keys(oq_db *db, oq_session *w)
{
  put(db, "nk", "x", 2);
  put(db, "nk", "y", 1);
  QEXEC(db, "INSERT INTO onceq_items (queue, payload) VALUES ('nk', '{}')");
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, w, "nk", 10, &it);
  ASSERT_EQ(n, 3); /* the heads of x and y, and the unkeyed item */
  size_t xi = n;
  for (size_t i = 0; i < n; i++) {
    if (!it[i].keyed) {
      ASSERT(it[i].ordering_key == NULL);
      continue;
    }
    ASSERT(it[i].ordering_key != NULL);
    ASSERT_EQ(QLONG(db,
                    "SELECT count(*) FROM onceq_items WHERE id = $1"
                    " AND ordering_key = $2",
                    it[i].id, it[i].ordering_key),
              1);
    if (strcmp(it[i].ordering_key, "x") == 0)
      xi = i;
  }
  ASSERT(xi < n);
  /* y's head is acked apart first: y has no item left */
  for (size_t i = 0; i < n; i++)
    if (i != xi)
      ASSERT_OK(db, oq_ack(db, w, &it[i], NULL, NULL, NULL, NULL));
  put(db, "nk", "z", 1); /* z: one free head, nothing claimed */
  /* x's head, naming z as its key: the ack brings z's head, and leaves
   * x's second item where it is */
  char *own = it[xi].ordering_key;
  it[xi].ordering_key = "z";
  size_t nn = 0;
  oq_item *next = ack_next(db, w, &it[xi], 1, &nn);
  it[xi].ordering_key = own;
  oq_items_free(it, n);
  if (nn != 1 || !next[0].ordering_key ||
      strcmp(next[0].ordering_key, "z") != 0)
    OQT_FAIL("an item naming key z brought %zu next item(s), the first of "
             "key %s: the keys were not the items' own",
             nn, nn && next[0].ordering_key ? next[0].ordering_key : "-");
  ASSERT_OK(db, oq_ack(db, w, &next[0], NULL, NULL, NULL, NULL));
  oq_items_free(next, nn);
  /* x's second item, marked keyed without its key: read from the
   * database, so nothing is lost when a caller builds its items */
  put(db, "nk", "x", 1);
  n = SEM_CLAIM(db, w, "nk", 10, &it);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(it[0].ordering_key, "x");
  free(it[0].ordering_key);
  it[0].ordering_key = NULL;
  next = ack_next(db, w, it, n, &nn);
  oq_items_free(it, n);
  ASSERT_EQ(nn, 1);
  ASSERT_STREQ(next[0].ordering_key, "x");
  ASSERT_OK(db, oq_ack(db, w, &next[0], NULL, NULL, NULL, NULL));
  oq_items_free(next, nn);
  printf("ok the ack takes its keys from the items (read from the database "
         "for an item without its key)\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("ack_next", 1);
  oq_db *db = oqt_connect(dsn);
  oq_session *w = SEM_LONG_SESSION(db);
  oq_session *other = SEM_LONG_SESSION(db);

  test_next(db, w, other);
  test_first_remaining(db, w);
  test_not_asked(db, w);
  test_slots(db, w);
  test_item_keys(db, w);

  ASSERT_OK(db, oq_session_end(db, other));
  ASSERT_OK(db, oq_session_end(db, w));
  oq_session_free(other);
  oq_session_free(w);
  oq_db_close(db);
  printf("PASS it_lib_ack_next (isolation: %s)\n", oqt_isolation());
  return 0;
}
