/*
 * dialect_crdb.c (unit): the SQL text libonceq chooses for CockroachDB.
 *
 * Every CockroachDB-only branch of lib/src/dialect.c (the claims, the
 * migration lock) and the CockroachDB migration variants (schema/
 * NNNN_*.crdb.sql, as embedded in the library) are asserted here against
 * their PostgreSQL counterparts (docs/design.md §3):
 *  - a statement whose text differs per engine must be a claim pair or the
 *    migration lock; any other difference fails until it gets a test;
 *  - each claim is one UPDATE ... WHERE ... ORDER BY ... LIMIT ...
 *    RETURNING (one implicit statement the server can retry), without SKIP
 *    LOCKED or a CTE, filtering, ordering, setting and returning exactly
 *    what its PostgreSQL twin does;
 *  - the migration lock is a no-op (no advisory locks on CockroachDB);
 *  - every other statement is shared text, free of PostgreSQL-only syntax;
 *  - the CockroachDB migrations have no plpgsql, triggers, LISTEN/NOTIFY or
 *    dollar quoting, end every statement at a line end (migrate.c runs them
 *    one at a time, split at ";\n"), create everything IF NOT EXISTS (no
 *    transaction wraps them), and set gc.ttlseconds on the queue tables.
 * The CockroachDB documentation each statement relies on is listed in the
 * deploy issue's note.
 */
#include "internal.h"
#include "oq_test.h"

#include <ctype.h>
#include <strings.h>

/* Case-insensitive strstr. */
static const char *find_ci(const char *hay, const char *needle)
{
  size_t n = strlen(needle);
  for (const char *p = hay; *p; p++)
    if (strncasecmp(p, needle, n) == 0)
      return p;
  return NULL;
}

/* Case-insensitive search for needle as a whole word (no identifier
 * character on either side), so the column notify_status is not NOTIFY. */
static const char *find_word_ci(const char *hay, const char *needle)
{
  size_t n = strlen(needle);
  for (const char *p = find_ci(hay, needle); p; p = find_ci(p + 1, needle)) {
    bool left = p == hay || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool right = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (left && right)
      return p;
  }
  return NULL;
}

/* hay must not contain needle (any case); _WORD: as a whole word. */
#define ASSERT_NOT_CONTAINS_CI(hay, needle)                                    \
  do {                                                                         \
    const char *oqt_f_ = find_ci((hay), (needle));                             \
    if (oqt_f_)                                                                \
      OQT_FAIL("must not contain \"%s\", found at: \"%.60s\"", (needle),       \
               oqt_f_);                                                        \
  } while (0)

#define ASSERT_NO_WORD_CI(hay, needle)                                         \
  do {                                                                         \
    const char *oqt_f_ = find_word_ci((hay), (needle));                        \
    if (oqt_f_)                                                                \
      OQT_FAIL("must not contain the word \"%s\", found at: \"%.60s\"",        \
               (needle), oqt_f_);                                              \
  } while (0)

/* Offset of needle in hay; fails the test when absent. */
static long pos_of(const char *hay, const char *needle)
{
  const char *p = strstr(hay, needle);
  if (!p)
    OQT_FAIL("\"%s\" should contain \"%s\"", hay, needle);
  return (long)(p - hay);
}

static int count_of(const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

static void test_detect(void)
{
  ASSERT_EQ(oq__dialect_detect(NULL), OQ_ENGINE_POSTGRES);
  ASSERT_EQ(oq__dialect_detect(""), OQ_ENGINE_POSTGRES);
  ASSERT_EQ(oq__dialect_detect("v24.2.5"), OQ_ENGINE_COCKROACH);
  ASSERT_EQ(oq__dialect_detect("CockroachDB CCL v24.1.5"), OQ_ENGINE_COCKROACH);
}

/* The text of sql between the first occurrence of `from` and the next
 * `to`, with every "i." table prefix removed, into out. */
static void between(const char *sql, const char *from, const char *to,
                    char *out, size_t outlen)
{
  const char *a = strstr(sql, from);
  if (!a)
    OQT_FAIL("\"%s\" should contain \"%s\"", sql, from);
  a += strlen(from);
  const char *b = to ? strstr(a, to) : a + strlen(a);
  if (!b)
    OQT_FAIL("\"%s\" should contain \"%s\" after \"%s\"", sql, to, from);
  size_t o = 0;
  for (const char *p = a; p < b && o + 1 < outlen; p++) {
    if (p[0] == 'i' && p[1] == '.' &&
        (p == a || !isalnum((unsigned char)p[-1])))
      p++;
    else
      out[o++] = *p;
  }
  out[o] = '\0';
}

/* Remove every " AS name" from s, in place. */
static void drop_aliases(char *s)
{
  char *p;
  while ((p = strstr(s, " AS ")) != NULL) {
    char *e = p + 4;
    while (isalnum((unsigned char)*e) || *e == '_')
      e++;
    memmove(p, e, strlen(e) + 1);
  }
}

/*
 * A claim pair: PostgreSQL's MATERIALIZED CTE with FOR UPDATE SKIP LOCKED
 * feeding an UPDATE ... WHERE id = ANY(ARRAY(...)) whose rows an outer
 * SELECT returns in claim order (docs/design.md §3), and CockroachDB's single
 * UPDATE ... WHERE ... ORDER BY ... LIMIT ... RETURNING, an implicit
 * statement the server may retry. Both must filter, order, limit, set and
 * return the same things (one row parser serves both engines).
 */
static void check_claim_pair(const char *pg, const char *crdb_full)
{
  /* the session lock (schema v8): the row read once, with a lock that
   * makes a reap wait, or no claim (22012); the rest of the comparison
   * is on CockroachDB's text without it */
  static const char live[] =
      "(SELECT 1 / count(*) AS live FROM (SELECT 1 FROM onceq_sessions"
      " WHERE id = $1::uuid AND heartbeated_at + expiry >= now() ";
  static const char live_crdb[] =
      " AND (SELECT 1 / count(*) AS live FROM (SELECT 1 FROM onceq_sessions"
      " WHERE id = $1::uuid AND heartbeated_at + expiry >= now()"
      " FOR SHARE) l) = 1";
  ASSERT_EQ(strncmp(pg, "WITH s AS ", 10), 0);
  ASSERT_CONTAINS(pg, live);
  ASSERT_CONTAINS(pg, " FOR KEY SHARE) l), c AS MATERIALIZED (");
  ASSERT_CONTAINS(pg, " FROM s CROSS JOIN ");
  ASSERT_EQ(count_of(crdb_full, "onceq_sessions"), 1);
  char crdb[8192];
  snprintf(crdb, sizeof crdb, "%s", crdb_full);
  char *lv = strstr(crdb, live_crdb);
  ASSERT(lv != NULL);
  memmove(lv, lv + strlen(live_crdb), strlen(lv + strlen(live_crdb)) + 1);
  ASSERT_EQ(strncmp(crdb, "UPDATE onceq_items SET ", 23), 0);
  long where = pos_of(crdb, " WHERE ");
  long order = pos_of(crdb, " ORDER BY priority DESC, run_at");
  long limit = pos_of(crdb, " LIMIT $3::int");
  long ret = pos_of(crdb, " RETURNING ");
  ASSERT(where < order);
  ASSERT(order < limit);
  ASSERT(limit < ret);
  ASSERT_EQ(count_of(crdb, "UPDATE "), 1);
  ASSERT_CONTAINS(crdb, "claim IS NULL");
  ASSERT_CONTAINS(crdb, "claim = $1::uuid");
  ASSERT_NOT_CONTAINS(crdb, ";");
  /* no SKIP LOCKED, no explicit lock, no CTE, no second table */
  ASSERT_NO_WORD_CI(crdb, "SKIP LOCKED");
  ASSERT_NO_WORD_CI(crdb, "FOR UPDATE");
  ASSERT_NO_WORD_CI(crdb, "MATERIALIZED");
  ASSERT_NO_WORD_CI(crdb, "WITH");
  ASSERT_NOT_CONTAINS(crdb, " FROM c ");

  ASSERT_CONTAINS(pg, " FOR UPDATE SKIP LOCKED)");

  char a[2048], b[2048];
  /* Both skip a paused or limited queue (onceq_queues, issue 23):
   * PostgreSQL filters its queue list before the per-queue scans,
   * CockroachDB's one-queue UPDATE ends its WHERE with the same test on the
   * row's queue. A limited queue's own claim (OQ__SQL_CLAIM_LIMITED) has
   * neither: its transaction checked the control row. */
  static const char open_crdb[] =
      " AND NOT EXISTS (SELECT 1 FROM onceq_queues ctl"
      " WHERE ctl.queue = onceq_items.queue"
      " AND (ctl.paused OR ctl.max_running IS NOT NULL"
      " OR ctl.rate_limit IS NOT NULL))";
  /* PostgreSQL's queue list also says whether each queue holds a keyed
   * item (q.keyed), which picks one of two arms per queue: min() of the
   * keyed index's second column, part (schema v11) */
  static const char keyed_q[] =
      " FROM s CROSS JOIN (SELECT q0.name, (SELECT min(k0.part) FROM"
      " onceq_items"
      " k0 WHERE k0.queue = q0.name AND k0.ordering_key IS NOT NULL"
      " AND k0.claim IS NULL)"
      " IS NOT NULL AS keyed FROM ";
  ASSERT_CONTAINS(pg, keyed_q);
  if (strstr(crdb, open_crdb)) {
    ASSERT_CONTAINS(
        pg, "(SELECT name FROM unnest($2::text[]) AS n(name)"
            " WHERE NOT EXISTS (SELECT 1 FROM onceq_queues ctl"
            " WHERE ctl.queue = n.name AND (ctl.paused OR"
            " ctl.max_running IS NOT NULL OR ctl.rate_limit IS NOT NULL)))"
            " AS q0) AS q CROSS JOIN LATERAL (");
    between(crdb, " WHERE ", open_crdb, a, sizeof a);
  } else {
    ASSERT_NOT_CONTAINS(pg, "onceq_queues");
    ASSERT_CONTAINS(pg, "unnest($2::text[]) AS q0(name)) AS q CROSS JOIN"
                        " LATERAL (");
    between(crdb, " WHERE ", " ORDER BY ", a, sizeof a);
  }
  /* the arm of a queue without keyed items: the walk, with a NULL test
   * for KEY_HEAD (no keyed row of the queue in the snapshot; in coalesce,
   * so stale statistics cannot cost it at one row: dialect.c, NO_KEY) */
  between(pg, " FROM onceq_items WHERE NOT q.keyed AND ", " ORDER BY ", b,
          sizeof b);
  static const char no_key[] = " AND coalesce(ordering_key IS NULL, false)";
  size_t bl = strlen(b);
  ASSERT(bl > strlen(no_key) && strcmp(b + bl - strlen(no_key), no_key) == 0);
  b[bl - strlen(no_key)] = '\0';
  char ready_pg[2048];
  snprintf(ready_pg, sizeof ready_pg, "%s", b);
  /* CockroachDB's predicate is the same one with KEY_HEAD after it */
  static const char key_head[] = " AND (onceq_items.ordering_key IS NULL OR";
  {
    char *k = strstr(a, key_head);
    ASSERT(k != NULL);
    ASSERT_CONTAINS(k, " AND k.enqueue_seq < onceq_items.enqueue_seq)))");
    *k = '\0';
  }
  /* the keyed arm: the same predicate, checked again on every candidate
   * it locks (its claim test as `(claim IS NULL) IS TRUE`: it finds them
   * by id, never through the ready index: dialect.c, BY_ID_UNCLAIMED), on the
   * loose scan's heads (h) and on the front walk (f), which keep KEY_HEAD's
   * meaning: no claimed item of the key (a hashed NOT IN of the queue's claimed
   * keys, read once into busy: schema v9) and no earlier item (of the part a
   * key's items share: schema v11; the front walk asks it as "the key's first",
   * a subplan per row, on the one row per key of its window f0 that can pass
   * it); the loose scan only after a full window */
  ASSERT(strncmp(ready_pg, "claim IS NULL AND ", 18) == 0);
  char want[8192];
  snprintf(want, sizeof want,
           " FROM onceq_items WHERE q.keyed AND (claim IS NULL) IS TRUE AND %s"
           " AND id = ANY (ARRAY(WITH"
           " busy AS MATERIALIZED (SELECT k.ordering_key FROM onceq_items k"
           " WHERE k.claim IS NOT NULL AND k.queue = q.name AND"
           " k.ordering_key IS NOT NULL), f0 AS MATERIALIZED (SELECT id,"
           " queue, part, ordering_key, enqueue_seq FROM onceq_items WHERE %s"
           " ORDER BY priority DESC, run_at LIMIT 2 * $3::int),"
           " f AS MATERIALIZED (SELECT f0.id FROM f0 WHERE f0.ordering_key"
           " IS NOT NULL AND f0.ordering_key"
           " NOT IN (SELECT b.ordering_key FROM busy b) AND"
           " ((f0.ordering_key, f0.enqueue_seq) IN (SELECT m.ordering_key,"
           " min(m.enqueue_seq) FROM f0 m WHERE m.ordering_key IS NOT NULL"
           " GROUP BY m.ordering_key)) IS TRUE AND f0.enqueue_seq ="
           " (SELECT k.enqueue_seq FROM onceq_items k WHERE k.queue = f0.queue"
           " AND k.part = f0.part AND k.ordering_key = f0.ordering_key"
           " AND k.ordering_key IS NOT NULL AND k.claim IS NULL"
           " ORDER BY k.enqueue_seq LIMIT 1))"
           " SELECT f.id FROM f"
           " UNION ALL SELECT kh.id FROM (WITH RECURSIVE h AS (",
           ready_pg + strlen("claim IS NULL AND "), ready_pg);
  ASSERT_CONTAINS(pg, want);
  snprintf(want, sizeof want,
           " SELECT h.id FROM h WHERE %s AND h.ordering_key NOT IN (SELECT"
           " b.ordering_key FROM busy b) LIMIT $3::int) kh"
           " WHERE (SELECT count(*) FROM f) < $3::int"
           " AND (SELECT count(*) FROM f0) >= 2 * $3::int",
           ready_pg);
  ASSERT_CONTAINS(pg, want);
  snprintf(want, sizeof want,
           " UNION ALL SELECT u.id FROM (SELECT id FROM onceq_items WHERE %s"
           " AND coalesce(ordering_key IS NULL, false) ORDER BY priority DESC,"
           " run_at LIMIT $3::int FOR UPDATE SKIP LOCKED) u)) ORDER BY priority"
           " DESC, run_at LIMIT $3::int FOR UPDATE SKIP LOCKED) k) x",
           ready_pg);
  ASSERT_CONTAINS(pg, want);
  /* PostgreSQL walks one queue at a time (LATERAL over unnest($2), so the
   * ready index is read in order); the predicate is otherwise the same */
  {
    char *q = strstr(b, "queue = q.name");
    if (q) {
      char tail[2048];
      snprintf(tail, sizeof tail, "%s", q + strlen("queue = q.name"));
      snprintf(q, sizeof b - (size_t)(q - b), "queue = ANY($2::text[])%s",
               tail);
    }
  }
  ASSERT_STREQ(a, b); /* the same ready predicate */
  between(crdb, " ORDER BY ", " RETURNING ", a, sizeof a);
  between(pg, " ORDER BY ", " FOR UPDATE", b, sizeof b);
  ASSERT_STREQ(a, b); /* the same order and limit */
  between(crdb, "UPDATE onceq_items SET ", " WHERE ", a, sizeof a);
  between(pg, "UPDATE onceq_items i SET ", " WHERE i.id = ANY ", b, sizeof b);
  ASSERT_STREQ(a, b); /* the same claim columns */
  /* PostgreSQL names its columns (the outer SELECT sorts them back into
   * claim order by run_at): without the names, the same list */
  between(crdb, " RETURNING ", NULL, a, sizeof a);
  between(pg, " RETURNING ", ", i.run_at)", b, sizeof b);
  drop_aliases(b);
  ASSERT_STREQ(a, b); /* the same columns, in the same order */
  /* and the rows the client reads are the outer SELECT's: exactly those
   * columns, by their aliases, in that order */
  between(pg, ", i.run_at) SELECT ", " FROM u ", b, sizeof b);
  ASSERT_STREQ(b, "id, queue, payload, attempts, max_attempts, priority, "
                  "created_us, claimed_us, part, ordering_key");
  between(pg, " RETURNING ", ", i.run_at)", a, sizeof a);
  ASSERT_CONTAINS(a, "::text AS id, queue, payload::text AS payload, "
                     "attempts, max_attempts, priority,");
  ASSERT_CONTAINS(a, "::int8 AS created_us, (");
  ASSERT_CONTAINS(a, "::int8 AS claimed_us, part");
}

static bool is_migrate_lock(int s)
{
  return s == OQ__SQL_MIGRATE_LOCK || s == OQ__SQL_MIGRATE_UNLOCK;
}

/* The orphan sweep: PostgreSQL finds the distinct claims by a loose scan,
 * CockroachDB by DISTINCT; both release only a claim whose session row is
 * gone, rechecked per row by the UPDATE's join. */
static void check_orphans_pair(const char *pg, const char *crdb)
{
  const char *both[] = {
      "UPDATE onceq_items i SET claim = NULL FROM (",
      "NOT EXISTS (SELECT 1 FROM onceq_sessions s WHERE s.id = ",
      ")) o WHERE i.claim = o.c"};
  for (size_t k = 0; k < sizeof both / sizeof both[0]; k++) {
    ASSERT_CONTAINS(pg, both[k]);
    ASSERT_CONTAINS(crdb, both[k]);
  }
  ASSERT_CONTAINS(pg, "WITH RECURSIVE c AS (");
  ASSERT(strstr(crdb, "RECURSIVE") == NULL);
}

/* The batched ack's next items are PostgreSQL only (docs/design.md 5a):
 * ack_many.c never sends the CockroachDB text, which claims nothing should
 * it be sent; the PostgreSQL text sets what the claim sets and keeps the
 * claim's session lock, its queue-control test and the key-head probe. */
static void check_ack_next(const char *pg, const char *crdb)
{
  ASSERT_STREQ(crdb, "SELECT NULL WHERE false");
  ASSERT_CONTAINS(pg, "FROM onceq_sessions WHERE id = $1::uuid"
                      " AND heartbeated_at + expiry >= now() FOR KEY SHARE");
  ASSERT_CONTAINS(pg, "(ctl.paused OR ctl.max_running IS NOT"
                      " NULL OR ctl.rate_limit IS NOT NULL)");
  ASSERT_CONTAINS(pg, "ORDER BY i.enqueue_seq LIMIT 1");
  /* no claimed-key probe (schema v9: the acked item's passed check is
   * what says its key has nothing else claimed) */
  ASSERT(strstr(pg, "k.claim IS NOT NULL") == NULL);
  ASSERT_CONTAINS(pg, "WHERE f.claim IS NULL AND f.run_at <= now()");
  ASSERT_CONTAINS(pg, "FOR UPDATE SKIP LOCKED");
  ASSERT_CONTAINS(pg, " SET claim = $1::uuid, claimed_at = now(),"
                      " attempts = i.attempts + 1 WHERE ");
  /* the columns a claim returns, in its order */
  ASSERT_CONTAINS(
      pg, " SELECT id, queue, payload, attempts, max_attempts,"
          " priority, created_us, claimed_us, part, ordering_key FROM u");
  const char *claim = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM);
  ASSERT_CONTAINS(claim, " SET claim = $1::uuid, claimed_at = now(),"
                         " attempts = i.attempts + 1 WHERE ");
}

/*
 * The claim a PostgreSQL claim starts with (dialect.c, CLAIM_OPEN_PG) is the
 * keyed claim it pairs with (CLAIM_KEYED_PG, checked against CockroachDB's
 * above) without the keyed arm: the same session lock, queue list, walk and
 * tail, and for each queue holding keyed items a row with no id, which
 * claim.c claims under the queue's key lock.
 */
static void check_open_claim(const char *open, const char *keyed)
{
  char a[4096], b[4200];
  ASSERT_NOT_CONTAINS(open, "busy");
  ASSERT_NOT_CONTAINS(open, "WITH RECURSIVE");
  between(open, "WITH s AS ", ", q AS MATERIALIZED (", a, sizeof a);
  between(keyed, "WITH s AS ", ", c AS MATERIALIZED (", b, sizeof b);
  ASSERT_STREQ(a, b); /* the session lock */
  /* the queue list, keyed flag included, after the session lock */
  between(open, "q AS MATERIALIZED (SELECT q0.name, ", " FROM s CROSS JOIN ", a,
          sizeof a);
  snprintf(b, sizeof b, " FROM s CROSS JOIN (SELECT q0.name, %s FROM ", a);
  ASSERT_CONTAINS(keyed, b);
  /* the walk: the keyed claim's arm for a queue without keyed items */
  between(open, " CROSS JOIN LATERAL (", ") x ORDER BY ", a, sizeof a);
  between(keyed, " CROSS JOIN LATERAL (SELECT * FROM (", ") p UNION ALL ", b,
          sizeof b);
  ASSERT_STREQ(a, b);
  /* the order, the limit, the byte budget and the UPDATE */
  between(open, ") x ORDER BY ", " SELECT id, queue, ", a, sizeof a);
  between(keyed, ") x ORDER BY ", " SELECT id, queue, ", b, sizeof b);
  ASSERT_STREQ(a, b);
  /* the items in claim order, then the keyed queues: the keyed claim's
   * columns, from u and the queue list */
  between(keyed, " SELECT id, queue, ", " FROM u ", a, sizeof a);
  between(open, " SELECT id, queue, ", " FROM (SELECT *, ", b, sizeof b);
  ASSERT_STREQ(a, b);
  between(open, " FROM (SELECT *, ", NULL, a, sizeof a);
  ASSERT_STREQ(a, "false AS marker FROM u UNION ALL SELECT NULL, q.name,"
                  " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
                  " true FROM q WHERE q.keyed) r ORDER BY marker,"
                  " priority DESC, run_at");
}

/* A PostgreSQL keyed claim's loose scan of the key heads walks the slots
 * [lo, hi) of onceq_items_key_order (queue, part, ordering_key,
 * enqueue_seq; schema v11): every slot for a claim, its own run for a
 * partitioned one ($4, $5); unclaimed rows, the index's (v12). */
static void check_key_heads(const char *keyed, const char *lo, const char *hi)
{
  char want[512];
  snprintf(want, sizeof want,
           " AND i.ordering_key IS NOT NULL AND i.claim IS NULL"
           " AND i.part >= %s AND i.part < %s"
           " ORDER BY i.part, i.ordering_key, i.enqueue_seq LIMIT 1)",
           lo, hi);
  ASSERT_CONTAINS(keyed, want);
  snprintf(want, sizeof want,
           " AND i.claim IS NULL"
           " AND (i.part, i.ordering_key) > (h.part, h.ordering_key)"
           " AND i.part < %s"
           " ORDER BY i.part, i.ordering_key, i.enqueue_seq LIMIT 1) nx)",
           hi);
  ASSERT_CONTAINS(keyed, want);
}

/* A keyed queue's key lock: a transaction-level advisory lock on
 * PostgreSQL, with the claim's plan settings; never sent to CockroachDB. */
static void check_key_lock(const char *pg, const char *crdb)
{
  ASSERT_STREQ(crdb, "SELECT NULL WHERE false");
  ASSERT_EQ(strncmp(pg, "SELECT (SELECT count(*) FROM (SELECT", 36), 0);
  ASSERT_CONTAINS(pg, "pg_advisory_xact_lock(1869505280 + g.s,"
                      " hashtext($2::text)) FROM generate_series($3::int,"
                      " $4::int) AS g(s) WHERE current_setting("
                      "'transaction_isolation') = 'read committed') l)");
  /* the claim's settings (db_tx.c, OQ__PLAN_SETTINGS), unless $1 is NULL */
  ASSERT_CONTAINS(pg, "set_config('jit', CASE WHEN $1::text IS NULL THEN"
                      " current_setting('jit') ELSE 'off' END, true)");
  ASSERT_CONTAINS(pg, "set_config('plan_cache_mode', CASE WHEN $1::text IS"
                      " NULL THEN current_setting('plan_cache_mode') ELSE"
                      " 'force_generic_plan' END, true)");
  ASSERT_CONTAINS(pg, "set_config('enable_seqscan', CASE WHEN $1::text IS"
                      " NULL THEN current_setting('enable_seqscan') ELSE"
                      " 'off' END, true)");
  ASSERT_CONTAINS(pg, "set_config('enable_bitmapscan', CASE WHEN $1::text IS"
                      " NULL THEN current_setting('enable_bitmapscan') ELSE"
                      " 'off' END, true)");
  ASSERT_CONTAINS(pg, "set_config('synchronous_commit', CASE WHEN $1::text ="
                      " 'async' THEN 'off' ELSE");
  ASSERT_STREQ(OQ__PLAN_SETTINGS,
               "set_config('jit', 'off', true),"
               " set_config('plan_cache_mode', 'force_generic_plan', true),"
               " set_config('enable_seqscan', 'off', true),"
               " set_config('enable_bitmapscan', 'off', true)");
}

/* oq_enqueue_many's ids are each engine's DEFAULT for onceq_items.id
 * (schema v10): time-ordered on PostgreSQL, random on CockroachDB, where
 * ordered keys would make one range take every enqueue; the rest of the
 * text is one. */
static void check_enqueue_many(const char *pg, const char *crdb)
{
  ASSERT_CONTAINS(pg, " SELECT onceq_item_id() AS id, t.ord, t.x");
  ASSERT_CONTAINS(crdb, " SELECT gen_random_uuid() AS id, t.ord, t.x");
  const char *pt = strstr(pg, " AS id, t.ord");
  const char *ct = strstr(crdb, " AS id, t.ord");
  ASSERT_STREQ(pt, ct);
  ASSERT_EQ(strncmp(pg, crdb, (size_t)(strstr(pg, "onceq_item_id") - pg)), 0);
}

/* Every statement whose text differs per engine is a claim pair or the
 * migration lock; anything else that differs is a new CockroachDB-only
 * branch without a test here. */
static void test_branches(void)
{
  int claims = 0, opens = 0;
  for (int s = 0; s < OQ__SQL__COUNT; s++) {
    const char *crdb = oq__sql(OQ_ENGINE_COCKROACH, (oq__stmt)s);
    const char *pg = oq__sql(OQ_ENGINE_POSTGRES, (oq__stmt)s);
    if (strcmp(crdb, pg) == 0 || is_migrate_lock(s))
      continue;
    if (s == OQ__SQL_RELEASE_ORPHANS) {
      check_orphans_pair(pg, crdb);
      continue;
    }
    if (s == OQ__SQL_ACK_NEXT) {
      check_ack_next(pg, crdb);
      continue;
    }
    if (s == OQ__SQL_KEY_LOCK) {
      check_key_lock(pg, crdb);
      continue;
    }
    if (s == OQ__SQL_ENQUEUE_MANY) {
      check_enqueue_many(pg, crdb);
      continue;
    }
    if (s == OQ__SQL_CLAIM || s == OQ__SQL_CLAIM_PARTS) {
      const char *keyed = oq__sql(
          OQ_ENGINE_POSTGRES,
          s == OQ__SQL_CLAIM ? OQ__SQL_CLAIM_KEYED : OQ__SQL_CLAIM_PARTS_KEYED);
      check_open_claim(pg, keyed);
      if (s == OQ__SQL_CLAIM)
        check_key_heads(keyed, "0", "1024");
      else
        check_key_heads(keyed, "$4::int4", "$5::int4");
      opens++;
      continue;
    }
    if (strstr(pg, "SKIP LOCKED") && strncmp(crdb, "UPDATE ", 7) == 0) {
      check_claim_pair(pg, crdb);
      claims++;
      continue;
    }
    OQT_FAIL("statement %d differs per engine but has no test here:\n"
             "  pg:   %s\n  crdb: %s",
             s, pg, crdb);
  }
  ASSERT(claims >= 3); /* keyed, partitioned keyed, limited */
  ASSERT_EQ(opens, 2);
  /* the plain claim is one of them */
  const char *crdb = oq__sql(OQ_ENGINE_COCKROACH, OQ__SQL_CLAIM);
  ASSERT(strcmp(crdb, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM)) != 0);
  ASSERT_CONTAINS(crdb, " WHERE claim IS NULL AND queue = ANY($2::text[])"
                        " AND run_at <= now() AND attempts < max_attempts"
                        " AND (onceq_items.ordering_key IS NULL OR");
  ASSERT_CONTAINS(crdb, " AND k.enqueue_seq < onceq_items.enqueue_seq)))"
                        " AND NOT EXISTS (SELECT 1 FROM onceq_queues ctl"
                        " WHERE ctl.queue = onceq_items.queue"
                        " AND (ctl.paused OR ctl.max_running IS NOT NULL"
                        " OR ctl.rate_limit IS NOT NULL))"
                        " AND (SELECT 1 / count(*) AS live FROM (SELECT 1"
                        " FROM onceq_sessions WHERE id = $1::uuid"
                        " AND heartbeated_at + expiry >= now() FOR SHARE)"
                        " l) = 1"
                        " ORDER BY priority DESC, run_at LIMIT $3::int"
                        " RETURNING ");
}

static void test_migrate_lock(void)
{
  const char *lock = oq__sql(OQ_ENGINE_COCKROACH, OQ__SQL_MIGRATE_LOCK);
  const char *unlock = oq__sql(OQ_ENGINE_COCKROACH, OQ__SQL_MIGRATE_UNLOCK);
  /* a no-op: CockroachDB has no advisory locks */
  ASSERT_STREQ(lock, "SELECT 1");
  ASSERT_STREQ(unlock, "SELECT 1");
  const char *pg_lock = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_MIGRATE_LOCK);
  const char *pg_unlock = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_MIGRATE_UNLOCK);
  ASSERT_CONTAINS(pg_lock, "pg_advisory_lock(");
  ASSERT_CONTAINS(pg_unlock, "pg_advisory_unlock(");
  /* the same key in both */
  ASSERT_STREQ(strchr(pg_lock, '('), strchr(pg_unlock, '('));
}

/* Everything but the claims and the migration lock is one text for both
 * engines, so it must be free of what only PostgreSQL has. */
static void test_shared(void)
{
  int shared = 0;
  for (int s = 0; s < OQ__SQL__COUNT; s++) {
    const char *crdb = oq__sql(OQ_ENGINE_COCKROACH, (oq__stmt)s);
    const char *pg = oq__sql(OQ_ENGINE_POSTGRES, (oq__stmt)s);
    if (strcmp(crdb, pg) != 0) /* test_branches covers these */
      continue;
    shared++;
    ASSERT_NOT_CONTAINS(crdb, "onceq: unknown statement");
    ASSERT_NOT_CONTAINS_CI(crdb, "pg_advisory");
    ASSERT_NOT_CONTAINS_CI(crdb, "pg_notify");
    ASSERT_NO_WORD_CI(crdb, "LISTEN");
    ASSERT_NO_WORD_CI(crdb, "NOTIFY");
    ASSERT_NO_WORD_CI(crdb, "SKIP LOCKED");
    /* oq_enqueue_many's MATERIALIZED CTE fixes each element's id before
     * the insert; CockroachDB accepts the hint (docs "Common Table
     * Expressions": MATERIALIZED / NOT MATERIALIZED), and `onceq push`
     * sent this text to both engines before it moved into the library */
    if (s != OQ__SQL_ENQUEUE_MANY)
      ASSERT_NO_WORD_CI(crdb, "MATERIALIZED");
    ASSERT_NOT_CONTAINS_CI(crdb, "::regclass");
  }
  ASSERT(shared >= 10);
  /* the data-modifying CTEs keep their WITH at the top level */
  const int ctes[] = {OQ__SQL_FAIL_DEAD, OQ__SQL_REAP_EXHAUSTED};
  for (size_t i = 0; i < sizeof ctes / sizeof ctes[0]; i++) {
    const char *sql = oq__sql(OQ_ENGINE_COCKROACH, (oq__stmt)ctes[i]);
    ASSERT_EQ(strncmp(sql, "WITH d AS (DELETE FROM onceq_items ", 35), 0);
    ASSERT_CONTAINS(sql, " RETURNING ");
    ASSERT_CONTAINS(sql, ") INSERT INTO ");
  }
}

/* sql without its "--" comments (no string literal in our migrations holds
 * "--"); the caller frees it. */
static char *strip_comments(const char *sql)
{
  char *out = malloc(strlen(sql) + 1);
  ASSERT(out != NULL);
  size_t o = 0;
  for (const char *p = sql; *p; p++) {
    if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n')
        p++;
      if (!*p)
        break;
    }
    out[o++] = *p;
  }
  out[o] = '\0';
  return out;
}

/* Every ";" ends its line: migrate.c's oq__migrate_run_statements() splits
 * there. */
static void assert_statements_end_lines(const char *sql)
{
  for (const char *p = strchr(sql, ';'); p; p = strchr(p + 1, ';'))
    if (p[1] != '\n' && p[1] != '\0')
      OQT_FAIL("\";\" inside a line would split a statement: \"%.60s\"",
               p > sql + 20 ? p - 20 : sql);
}

/* Every CREATE TABLE / CREATE INDEX says IF NOT EXISTS: the CockroachDB
 * runner applies statements one by one, outside a transaction, so a
 * half-applied version must be safe to run again. */
static void assert_idempotent_creates(const char *sql)
{
  const char *kinds[] = {"CREATE TABLE ", "CREATE INDEX ",
                         "CREATE UNIQUE INDEX "};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    for (const char *p = strstr(sql, kinds[k]); p; p = strstr(p + 1, kinds[k]))
      if (strncmp(p + strlen(kinds[k]), "IF NOT EXISTS ", 14) != 0)
        OQT_FAIL("not idempotent: \"%.60s\"", p);
}

static void test_migrations(void)
{
  ASSERT(oq__migration_count >= 1);
  for (int v = 1; v <= oq__migration_count; v++) {
    const oq__migration *m = &oq__migrations[v - 1];
    ASSERT_EQ(m->version, v);
    ASSERT(m->crdb_sql != NULL && *m->crdb_sql);
    char *sql = strip_comments(m->crdb_sql);
    ASSERT_NO_WORD_CI(sql, "plpgsql");
    ASSERT_NO_WORD_CI(sql, "TRIGGER");
    ASSERT_NOT_CONTAINS_CI(sql, "CREATE FUNCTION");
    ASSERT_NOT_CONTAINS_CI(sql, "OR REPLACE FUNCTION");
    ASSERT_NOT_CONTAINS_CI(sql, "EXECUTE FUNCTION");
    ASSERT_NO_WORD_CI(sql, "LISTEN");
    ASSERT_NO_WORD_CI(sql, "NOTIFY");
    ASSERT_NOT_CONTAINS_CI(sql, "pg_advisory");
    ASSERT_NOT_CONTAINS(sql, "$$");
    ASSERT_NOT_CONTAINS_CI(sql, "NEW TABLE AS");
    assert_statements_end_lines(sql);
    assert_idempotent_creates(sql);
    free(sql);
  }

  const oq__migration *m1 = &oq__migrations[0];
  ASSERT(strcmp(m1->crdb_sql, m1->pg_sql) != 0); /* a variant exists */
  const char *c = m1->crdb_sql;
  ASSERT_CONTAINS(c, "ALTER TABLE onceq_items CONFIGURE ZONE USING "
                     "gc.ttlseconds = ");
  ASSERT_CONTAINS(c, "ALTER TABLE onceq_sessions CONFIGURE ZONE USING "
                     "gc.ttlseconds = ");
  /* the claim's order, unclaimed rows only, covering what it filters on */
  ASSERT_CONTAINS(c, "ON onceq_items (queue, priority DESC, run_at)\n"
                     "  STORING (attempts, max_attempts) WHERE claim IS NULL");
  ASSERT_CONTAINS(c, "claim        UUID REFERENCES onceq_sessions (id) "
                     "ON DELETE SET NULL");
  ASSERT_CONTAINS(c, "ON onceq_items (claim) WHERE claim IS NOT NULL");
  /* CockroachDB applies only the first FK action on a column: one FK on
   * claim, none elsewhere on onceq_items (docs/design.md §2). */
  ASSERT_EQ(count_of(c, "REFERENCES onceq_sessions"), 2); /* +parts */
  ASSERT_CONTAINS(c, "session_id UUID NOT NULL REFERENCES onceq_sessions "
                     "(id) ON DELETE CASCADE");

  /* v2: the lease table churns on failover; short MVCC history too */
  ASSERT(oq__migration_count >= 2);
  ASSERT_CONTAINS(oq__migrations[1].crdb_sql,
                  "ALTER TABLE onceq_leases CONFIGURE ZONE USING "
                  "gc.ttlseconds = ");
  ASSERT_NOT_CONTAINS(oq__migrations[1].pg_sql, "CONFIGURE ZONE");

  /* v5: enqueue_seq from a sequence; the default is set after the column
   * is added (ADD COLUMN ... DEFAULT nextval() cannot backfill a table
   * with rows on CockroachDB: cockroachdb/cockroach#42508) */
  ASSERT(oq__migration_count >= 5);
  char *c5 = strip_comments(oq__migrations[4].crdb_sql);
  ASSERT_CONTAINS(c5, "ADD COLUMN IF NOT EXISTS enqueue_seq INT8;\n");
  ASSERT_CONTAINS(c5, "ALTER COLUMN enqueue_seq SET DEFAULT "
                      "nextval('onceq_items_enqueue_seq');");
  ASSERT_NOT_CONTAINS_CI(c5, "unique_rowid()");
  ASSERT_NOT_CONTAINS_CI(c5, "INT8 DEFAULT nextval");
  free(c5);

  /* the PostgreSQL text is the one with the NOTIFY trigger */
  ASSERT_CONTAINS(m1->pg_sql, "LANGUAGE plpgsql");
  ASSERT_CONTAINS(m1->pg_sql, "CREATE TRIGGER onceq_items_notify");
  ASSERT_NOT_CONTAINS(m1->pg_sql, "CONFIGURE ZONE");
}

int main(void)
{
  test_detect();
  test_branches();
  test_migrate_lock();
  test_shared();
  test_migrations();
  printf("dialect_crdb: ok\n");
  return 0;
}
