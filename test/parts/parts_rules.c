/*
 * parts_rules.c: the assignment rules one at a time, deterministically:
 *  A. drain before give-up: a part leaving a block while its owner has an
 *     item of it in flight stays owned (and is claimed by nobody) until
 *     that item is acknowledged; then it changes hands;
 *  B. orphans: an item in a part whose owner is not live is claimed by a
 *     member only once it has been ready longer than orphan_after_ms (and
 *     never with orphans off); once the dead owner is reaped the part is
 *     taken over normally;
 *  C. more sessions than parts: the extra session owns nothing, claims
 *     nothing, and stays alive;
 *  D. P changes while items are in flight: the members adopt it and the
 *     rows converge to the new blocks; no row is left >= P;
 *  E. mixed fleet: a session using oq_claim claims in any part (the item's
 *     slot is reported), and oq_parts_leave hands a member's parts over.
 */
#include "oq_test.h"
#include "parts_util.h"

static oq_db *admin;
static const char *const QUEUE[1] = {"default"};

/* Insert n items with slot `slot`, ready since age_ms ago. */
static void put(int n, int slot, int age_ms)
{
  char a[16], b[16], c[16];
  snprintf(a, sizeof a, "%d", n);
  snprintf(b, sizeof b, "%d", slot);
  snprintf(c, sizeof c, "%d", age_ms);
  const char *p[3] = {a, b, c};
  ASSERT_OK(admin, oq_db_exec(admin,
                              "INSERT INTO onceq_items (payload, part, run_at)"
                              " SELECT jsonb_build_object('n', g), $2::int,"
                              " now() - $3::int * interval '1 millisecond'"
                              " FROM generate_series(1, $1::int) g",
                              3, p, NULL));
}

static void rebalance(pu_member *x)
{
  ASSERT_OK(x->db, oq_parts_rebalance(x->db, x->s, x->parts));
}

static oq_parts_status status(const pu_member *x)
{
  oq_parts_status st;
  oq_parts_status_get(x->parts, &st);
  return st;
}

static long owned_by(const pu_member *x, int part)
{
  char p[16];
  snprintf(p, sizeof p, "%d", part);
  const char *params[2] = {oq_session_id(x->s), p};
  return PU_LONG(admin,
                 "SELECT count(*) FROM onceq_session_parts WHERE"
                 " session_id = $1::uuid AND part = $2::int",
                 2, params);
}

static void end_member(pu_member *x)
{
  pu_member_ack(x);
  ASSERT_OK(x->db, oq_session_end(x->db, x->s));
  pu_member_close(x);
}

/* The first slot of part `part` when there are p parts. */
static int slot_of(int part, int p)
{
  int lo, hi;
  oq_parts_slots(part, part + 1, p, &lo, &hi);
  return lo;
}

static void section_a_drain(const char *dsn)
{
  pu_member a, b;
  ASSERT_OK(admin, oq_parts_set(admin, 4));
  pu_member_open(&a, "A", dsn, -1);
  pu_member_open(&b, "B", dsn, -1); /* not a member before its first round */
  rebalance(&a);
  ASSERT_EQ(status(&a).claimable, 4); /* alone: every part */
  /* the part that will move from A to B: the first of B's future block */
  bool b_first = strcmp(oq_session_id(b.s), oq_session_id(a.s)) < 0;
  int lo, hi;
  oq_parts_block(b_first ? 0 : 1, 2, 4, &lo, &hi);
  int x = lo;
  put(1, slot_of(x, 4), 0);
  pu_member_claim(&a, 10, false);
  ASSERT_EQ(a.nheld, 1); /* A holds an item of part x */

  rebalance(&b); /* B joins: its block is owned by A */
  ASSERT_EQ(status(&b).claimable, 0);
  rebalance(&a); /* A gives up B's block except x, which is in flight */
  ASSERT_EQ(status(&a).draining, 1);
  ASSERT_EQ(status(&a).claimable, 2);
  ASSERT(!oq_parts_claimable(a.parts, x));
  ASSERT_EQ(owned_by(&a, x), 1);
  rebalance(&b);
  ASSERT_EQ(status(&b).claimable, 1);
  ASSERT(!oq_parts_claimable(b.parts, x));
  pu_check_invariants(admin, 4, "A draining x");

  /* a new item in x: nobody may claim it while x drains */
  put(1, slot_of(x, 4) + 1, 0);
  oq_item *it = NULL;
  size_t n = 0;
  ASSERT_OK(b.db, oq_parts_claim(b.db, b.s, b.parts, QUEUE, 1, 10, &it, &n));
  ASSERT_EQ(n, 0);
  oq_items_free(it, n);
  rebalance(&a); /* still in flight: still owned */
  ASSERT_EQ(owned_by(&a, x), 1);
  ASSERT_OK(a.db, oq_parts_claim(a.db, a.s, a.parts, QUEUE, 1, 10, &it, &n));
  ASSERT_EQ(n, 0); /* A stopped claiming in x at once */
  oq_items_free(it, n);

  pu_member_ack(&a); /* drained */
  rebalance(&a);
  ASSERT_EQ(status(&a).draining, 0);
  ASSERT_EQ(owned_by(&a, x), 0);
  ASSERT(status(&a).stable);
  rebalance(&b);
  ASSERT_EQ(owned_by(&b, x), 1);
  ASSERT(status(&b).stable);
  pu_member_claim(&b, 10, false);
  ASSERT_EQ(b.nheld, 1); /* B now works x */
  ASSERT_EQ(oq_parts_of_slot(b.held[0].slot, 4), x);
  pu_check_invariants(admin, 4, "x handed over");
  ASSERT_EQ(pu_mismatch(admin, 4), 0);
  end_member(&a);
  end_member(&b);
  printf("A: drain before give-up: ok (part %d)\n", x);
}

static void section_b_orphans(const char *dsn)
{
  ASSERT_OK(admin, oq_parts_set(admin, 4));
  /* a dead member (expired, not reaped yet) owning part 2 */
  ASSERT_OK(admin,
            oq_db_exec(admin,
                       "INSERT INTO onceq_sessions (id, expiry, heartbeated_at,"
                       " partitioned, hostname) VALUES"
                       " ('00000000-0000-4000-8000-00000000dead', '1 second',"
                       " now() - interval '1 hour', true, 'dead')",
                       0, NULL, NULL));
  ASSERT_OK(admin, oq_db_exec(admin,
                              "INSERT INTO onceq_session_parts VALUES (2,"
                              " '00000000-0000-4000-8000-00000000dead')",
                              0, NULL, NULL));
  put(10, slot_of(0, 4), 0);         /* A's own part */
  put(10, slot_of(2, 4), 10 * 1000); /* orphan part, ready 10 s */
  put(10, slot_of(2, 4) + 1, 0);     /* orphan part, just ready */

  pu_member a;
  pu_member_open(&a, "A", dsn, -1); /* orphans off */
  rebalance(&a);
  oq_parts_status st = status(&a);
  ASSERT_EQ(st.claimable, 3);
  ASSERT_EQ(st.orphans, 1);
  pu_member_claim(&a, 100, false);
  ASSERT_EQ(a.nheld, 10); /* only its own */
  for (size_t i = 0; i < a.nheld; i++)
    ASSERT_EQ(oq_parts_of_slot(a.held[i].slot, 4), 0);
  pu_member_ack(&a);

  /* the same session with orphan claims after 5 s */
  oq_parts_free(a.parts);
  oq_parts_opts po = {.orphan_after_ms = 5000};
  ASSERT_OK(NULL, oq_parts_new(&po, &a.parts));
  rebalance(&a);
  ASSERT_EQ(status(&a).orphans, 1);
  pu_member_claim(&a, 100, true);
  ASSERT_EQ(a.nheld, 10); /* the 10 old ones, not the 10 fresh */
  for (size_t i = 0; i < a.nheld; i++)
    ASSERT_EQ(a.held[i].slot, slot_of(2, 4)); /* the old ones' slot */
  ASSERT_EQ(PU_LONG(admin,
                    "SELECT count(*) FROM onceq_items WHERE claim IS NULL", 0,
                    NULL),
            10); /* the fresh ones wait */
  pu_member_ack(&a);

  /* the dead owner is reaped: the part is taken over normally */
  int reaped = 0;
  ASSERT_OK(admin, oq_reap(admin, &reaped, NULL));
  ASSERT_EQ(reaped, 1);
  rebalance(&a);
  ASSERT(status(&a).stable);
  ASSERT_EQ(status(&a).claimable, 4);
  ASSERT_EQ(status(&a).orphans, 0);
  pu_member_claim(&a, 100, false);
  ASSERT_EQ(a.nheld, 10); /* the fresh ones, now in an owned part */
  end_member(&a);
  ASSERT_EQ(PU_LONG(admin, "SELECT count(*) FROM onceq_items", 0, NULL), 0);
  printf("B: orphans: ok\n");
}

static int converge(pu_member *ms, int n, int p, const char *what)
{
  for (int r = 1; r <= 12; r++) {
    bool stable = true;
    for (int i = 0; i < n; i++) {
      rebalance(&ms[i]);
      pu_member_ack(&ms[i]);
      pu_member_claim(&ms[i], 4, false);
    }
    for (int i = 0; i < n; i++)
      stable =
          stable && status(&ms[i]).stable && status(&ms[i]).partitions == p;
    if (stable && pu_mismatch(admin, p) == 0) {
      printf("%s: converged in %d round(s)\n", what, r);
      return r;
    }
    oqt_sleep_ms(50);
  }
  OQT_FAIL("%s: not converged in 12 rounds (mismatch %ld)", what,
           pu_mismatch(admin, p));
  return -1;
}

static void section_cd_more_sessions_and_resize(const char *dsn)
{
  pu_member ms[3];
  ASSERT_OK(admin, oq_parts_set(admin, 2));
  pu_member_open(&ms[0], "A", dsn, -1);
  pu_member_open(&ms[1], "B", dsn, -1);
  pu_member_open(&ms[2], "C", dsn, -1);
  put(300, 0, 0);
  put(300, 1023, 0);
  converge(ms, 3, 2, "k=3 > P=2");
  int idle = -1;
  for (int i = 0; i < 3; i++) {
    oq_parts_status st = status(&ms[i]);
    ASSERT_EQ(st.members, 3);
    ASSERT(st.index >= 0);
    if (st.block_lo == st.block_hi) {
      ASSERT_EQ(idle, -1);
      idle = i;
      ASSERT_EQ(st.owned, 0);
    } else {
      ASSERT_EQ(st.claimable, 1);
    }
  }
  ASSERT(idle >= 0);
  pu_member_ack(&ms[idle]);
  pu_member_claim(&ms[idle], 10, false);
  ASSERT_EQ(ms[idle].nheld, 0); /* idle while items are ready */
  ASSERT(PU_LONG(admin, "SELECT count(*) FROM onceq_items WHERE claim IS NULL",
                 0, NULL) > 0);
  oqt_sleep_ms(2 * PU_EXPIRY_MS); /* it stays alive: its heartbeat lands */
  const char *id[1] = {oq_session_id(ms[idle].s)};
  ASSERT_EQ(PU_LONG(admin,
                    "SELECT count(*) FROM onceq_sessions WHERE id = $1::uuid"
                    " AND heartbeated_at + expiry >= now()",
                    1, id),
            1);
  printf("C: k > P: %s idle and alive: ok\n", ms[idle].name);

  /* D: change P with items in flight (each member holds up to 4) */
  ASSERT_OK(admin, oq_parts_set(admin, 3));
  converge(ms, 3, 3, "P 2 -> 3");
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(status(&ms[i]).claimable, 1);
  ASSERT_OK(admin, oq_parts_set(admin, 7));
  converge(ms, 3, 7, "P 3 -> 7");
  ASSERT_OK(admin, oq_parts_set(admin, 1));
  converge(ms, 3, 1, "P 7 -> 1");
  ASSERT_EQ(PU_LONG(admin, "SELECT count(*) FROM onceq_session_parts", 0, NULL),
            1);
  ASSERT_OK(admin, oq_parts_set(admin, 1024));
  converge(ms, 3, 1024, "P 1 -> 1024");
  ASSERT_EQ(PU_LONG(admin, "SELECT count(*) FROM onceq_session_parts", 0, NULL),
            1024);
  for (int i = 0; i < 3; i++)
    pu_member_ack(&ms[i]);
  pu_check_invariants(admin, 1024, "after resizes");
  printf("D: P changes: ok\n");

  /* E: a session using oq_claim takes items from any part */
  put(50, 0, 0);
  put(50, 1023, 0);
  oq_session *u = NULL;
  oq_session_opts so = {.expiry_ms = 60000};
  ASSERT_OK(admin, oq_session_open(admin, &so, &u));
  oq_item *it = NULL;
  size_t n = 0;
  ASSERT_OK(admin, oq_claim(admin, u, QUEUE, 1, 1000, &it, &n));
  ASSERT(n > 0);
  int lowslot = 0, highslot = 0;
  for (size_t i = 0; i < n; i++) {
    const char *p[1] = {it[i].id};
    ASSERT_EQ(PU_LONG(admin, "SELECT part FROM onceq_items WHERE id = $1::uuid",
                      1, p),
              it[i].slot);
    lowslot += it[i].slot == 0;
    highslot += it[i].slot == 1023;
  }
  ASSERT(lowslot > 0 && highslot > 0); /* parts owned by different members */
  oq_items_free(it, n);
  ASSERT_OK(admin, oq_session_end(admin, u));
  oq_session_free(u);

  /* oq_parts_leave: the rows go, the others take the parts over */
  ASSERT_OK(ms[0].db, oq_parts_leave(ms[0].db, ms[0].s, ms[0].parts));
  const char *a0[1] = {oq_session_id(ms[0].s)};
  ASSERT_EQ(PU_LONG(admin,
                    "SELECT count(*) FROM onceq_session_parts WHERE"
                    " session_id = $1::uuid",
                    1, a0),
            0);
  ASSERT_EQ(PU_LONG(admin,
                    "SELECT count(*) FROM onceq_sessions WHERE id = $1::uuid"
                    " AND partitioned",
                    1, a0),
            0);
  converge(&ms[1], 2, 1024, "after A left");
  for (int i = 0; i < 3; i++)
    end_member(&ms[i]);
  printf("E: mixed fleet and leave: ok\n");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("parts_rules", 1);
  admin = oqt_connect(dsn);
  section_a_drain(dsn);
  section_b_orphans(dsn);
  section_cd_more_sessions_and_resize(dsn);
  ASSERT_EQ(PU_LONG(admin, "SELECT count(*) FROM onceq_session_parts", 0, NULL),
            0);
  oq_db_close(admin);
  printf("PASS it_lib_parts_rules\n");
  return 0;
}
