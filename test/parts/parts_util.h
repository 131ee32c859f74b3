/*
 * parts_util.h: helpers shared by the partition tests (test/parts/parts_*.c):
 * a "member" (a session with its own connection, heartbeat thread and
 * oq_parts state, driven round by round from the test), parameterised
 * one-value queries, and the ownership invariants every test samples.
 *
 * Header-only and static inline, so each test stays one executable.
 */
#ifndef OQ_PARTS_UTIL_H
#define OQ_PARTS_UTIL_H

#include <stdbool.h>

#include "oq_test.h"

#define PU_INTERVAL_MS 200
/* Well above the 1600 ms minimum for 200 ms: a member must stay live
 * through a stall of a few seconds on a loaded machine (CI), or the
 * reaper frees its claims and its acks fail. Costs one expiry of waiting
 * in the killed-member phase of parts_assign and 2 expiries in
 * parts_rules (C). */
#define PU_EXPIRY_MS 5000

static inline oq_err pu_first_long(void *ud, int ncols, const char *const *vals)
{
  long *out = ud;
  if (ncols > 0 && vals[0])
    *out = strtol(vals[0], NULL, 10);
  return OQ_OK;
}

/* First column of the first row as a long, with text parameters. */
#define PU_LONG(db, sql, n, params)                                            \
  pu_long_at(__FILE__, __LINE__, (db), (sql), (n), (params))
static inline long pu_long_at(const char *file, int line, oq_db *db,
                              const char *sql, int n, const char *const *params)
{
  long v = 0;
  oq_err e = oq_db_query(db, sql, n, params, pu_first_long, &v);
  if (e != OQ_OK) {
    fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", file, line, sql,
            oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return v;
}

/* One session taking part in the assignment, driven by the test. */
typedef struct pu_member {
  const char *name;
  oq_db *db;
  oq_session *s;
  oq_heartbeat *hb;
  oq_parts *parts;
  oq_item *held; /* claimed, not yet acknowledged */
  size_t nheld;
  bool alive; /* the test still drives it */
  long claimed;
} pu_member;

static inline void pu_member_open(pu_member *m, const char *name,
                                  const char *dsn, int orphan_after_ms)
{
  char err[OQ_ERRBUF_SIZE];
  memset(m, 0, sizeof *m);
  m->name = name;
  m->db = oqt_connect(dsn);
  oq_session_opts so = {.heartbeat_interval_ms = PU_INTERVAL_MS,
                        .expiry_ms = PU_EXPIRY_MS};
  ASSERT_OK(m->db, oq_session_open(m->db, &so, &m->s));
  oq_db_opts dbo = {.conninfo = dsn, .application_name = "onceq-test-hb"};
  oq_err e =
      oq_heartbeat_start(&dbo, m->s, NULL, NULL, &m->hb, err, sizeof err);
  if (e != OQ_OK)
    OQT_FAIL("heartbeat %s: %s", name, err);
  oq_parts_opts po = {.orphan_after_ms = orphan_after_ms};
  ASSERT_OK(NULL, oq_parts_new(&po, &m->parts));
  m->alive = true;
}

/* Acknowledge everything m holds (every ack must land). */
static inline void pu_member_ack(pu_member *m)
{
  if (m->nheld == 0)
    return;
  const char **ids = calloc(m->nheld, sizeof *ids);
  bool *acked = calloc(m->nheld, sizeof *acked);
  ASSERT(ids && acked);
  for (size_t i = 0; i < m->nheld; i++)
    ids[i] = m->held[i].id;
  size_t n = 0;
  ASSERT_OK(m->db, oq_ack_batch(m->db, m->s, ids, m->nheld, acked, &n, NULL));
  ASSERT_EQ(n, m->nheld);
  free(ids);
  free(acked);
  oq_items_free(m->held, m->nheld);
  m->held = NULL;
  m->nheld = 0;
}

/* Claim up to max from m's parts into m->held (which must be empty). Every
 * item must lie in a part m's last round left claimable, unless
 * orphans_ok. */
static inline void pu_member_claim(pu_member *m, int max, bool orphans_ok)
{
  static const char *const q[1] = {"default"};
  ASSERT_EQ(m->nheld, 0);
  ASSERT_OK(m->db, oq_parts_claim(m->db, m->s, m->parts, q, 1, max, &m->held,
                                  &m->nheld));
  oq_parts_status st;
  oq_parts_status_get(m->parts, &st);
  for (size_t i = 0; i < m->nheld && !orphans_ok; i++) {
    int part = oq_parts_of_slot(m->held[i].slot, st.partitions);
    if (!oq_parts_claimable(m->parts, part))
      OQT_FAIL("%s claimed item %s in part %d (slot %d), outside its "
               "claimable parts (block [%d,%d))",
               m->name, m->held[i].id, part, m->held[i].slot, st.block_lo,
               st.block_hi);
  }
  m->claimed += (long)m->nheld;
}

/* Stop the heartbeat and free (the session row is left as it is). */
static inline void pu_member_close(pu_member *m)
{
  oq_heartbeat_stop(m->hb);
  oq_items_free(m->held, m->nheld);
  oq_parts_free(m->parts);
  oq_session_free(m->s);
  oq_db_close(m->db);
  memset(m, 0, sizeof *m);
}

/*
 * The invariants sampled after every step:
 *  - no part has two ownership rows (the primary key makes it impossible;
 *    checked anyway, it is what `onceq parts` shows);
 *  - every claimed item lies in a part owned by the session that claims
 *    it: a part changes hands only after its owner's items there are
 *    finished or released, so no two sessions ever work one part at once.
 * P is the partition count in effect (constant while sampling).
 */
static inline void pu_check_invariants(oq_db *db, int partitions,
                                       const char *when)
{
  char p[16];
  snprintf(p, sizeof p, "%d", partitions);
  const char *params[1] = {p};
  long twice =
      PU_LONG(db,
              "SELECT count(*) FROM (SELECT part FROM onceq_session_parts"
              " GROUP BY part HAVING count(*) > 1) x",
              0, NULL);
  if (twice != 0)
    OQT_FAIL("%s: %ld part(s) owned twice", when, twice);
  long stray = PU_LONG(
      db,
      "SELECT count(*) FROM onceq_items i LEFT JOIN onceq_session_parts sp"
      " ON sp.part = i.part * $1::int / 1024"
      " WHERE i.claim IS NOT NULL AND sp.session_id IS DISTINCT FROM i.claim",
      1, params);
  if (stray != 0)
    OQT_FAIL("%s: %ld claimed item(s) lie in a part their session does not "
             "own",
             when, stray);
  long shared = PU_LONG(
      db,
      "SELECT count(*) FROM (SELECT part * $1::int / 1024 FROM onceq_items"
      " WHERE claim IS NOT NULL GROUP BY 1 HAVING count(DISTINCT claim) > 1)"
      " x",
      1, params);
  if (shared != 0)
    OQT_FAIL("%s: %ld part(s) have items in flight in two sessions", when,
             shared);
}

/*
 * Ownership rows that differ from the blocks the live members should have:
 * member i of k (by id) owns [i*P/k, (i+1)*P/k). 0 means converged.
 */
static inline long pu_mismatch(oq_db *db, int partitions)
{
  char p[16];
  snprintf(p, sizeof p, "%d", partitions);
  const char *params[1] = {p};
  return PU_LONG(
      db,
      "WITH m AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS i,"
      " count(*) OVER () AS k FROM onceq_sessions WHERE partitioned"
      " AND heartbeated_at + expiry >= now()),"
      " want AS (SELECT g AS part, m.id FROM generate_series(0, $1::int - 1)"
      " g JOIN m ON g >= m.i * $1::int / m.k AND g < (m.i + 1) * $1::int / m.k)"
      " SELECT (SELECT count(*) FROM want w LEFT JOIN onceq_session_parts sp"
      " ON sp.part = w.part WHERE sp.session_id IS DISTINCT FROM w.id)"
      " + (SELECT count(*) FROM onceq_session_parts sp LEFT JOIN want w"
      " ON w.part = sp.part WHERE w.part IS NULL)",
      1, params);
}

/* Keep at least low ready items in the default queue. */
static inline void pu_top_up(oq_db *db, long low, int add)
{
  long ready = PU_LONG(
      db, "SELECT count(*) FROM onceq_items WHERE claim IS NULL", 0, NULL);
  if (ready >= low)
    return;
  char n[16];
  snprintf(n, sizeof n, "%d", add);
  const char *params[1] = {n};
  ASSERT_OK(db, oq_db_exec(db,
                           "INSERT INTO onceq_items (payload) SELECT"
                           " jsonb_build_object('n', g) FROM"
                           " generate_series(1, $1::int) g",
                           1, params, NULL));
}

#endif
