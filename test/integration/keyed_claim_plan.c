/*
 * it_lib_keyed_claim_plan: a keyed claim's "no earlier item of the key"
 * probe stays one descent per candidate on PostgreSQL whatever the
 * statistics say, and the claim takes each key's first item in that state.
 *
 * The state that misled the planner: onceq_items analyzed while it held
 * only items without a key (ordering_key all NULL in the statistics), then
 * keyed items enqueued, with no ANALYZE since (autovacuum off for the
 * table here; in a live database autovacuum may take minutes, or never
 * come for a large table). Written as NOT EXISTS, the probe became an
 * anti-join that the claim's generic plan ran as a nested loop scanning
 * the whole key index for each candidate (lib/src/dialect.c, KEY_FRONT).
 * The work a plan does is counted in buffer reads (EXPLAIN ANALYZE's
 * "shared hit" of the top node), which does not depend on the machine's
 * speed. A control first runs the statement with the probe written the
 * old way: it must read more than the bound, or the state no longer
 * misleads the planner and the test would prove nothing, so it fails.
 * Each EXPLAIN ANALYZE runs in a transaction that is rolled back. In the
 * same state the claim probes one row per key of its front walk's window,
 * and with every key busy it skips the loose scan when its window held the
 * whole queue, each counted in rows read against the claim without it.
 * The same, counting rows read instead of buffers, for the unkeyed claim
 * after all-keyed statistics and for the ack's next-item statement after
 * all-claimed statistics (their sections below).
 */
#include "internal.h"
#include "oq_test.h"
#include "sem_util.h"

#define QUEUE "keyed_plan"
/* The rows the statistics are taken from, deleted before the checks, are
 * in a queue of their own: their index entries stay until a VACUUM (and
 * are not killed while any snapshot might still see them), so in the
 * queue a claim reads they would add a heap visit each to every plan,
 * good or bad. */
#define STATS_QUEUE "stats_only"
#define KEYS 400
#define PER_KEY 10
#define CLAIM_MAX 1000
/* buffer reads per keyed row in the table a claim may do: the fixed
 * statement reads about 5, the old one hundreds */
#define HITS_PER_ROW 25

/* the probe as it was written before, and as it is now */
#define OLD_PROBE                                                              \
  "NOT EXISTS (SELECT 1 FROM onceq_items k WHERE k.queue = f0.queue"           \
  " AND k.part = f0.part AND k.ordering_key = f0.ordering_key"                 \
  " AND k.ordering_key IS NOT NULL AND k.claim IS NULL"                        \
  " AND k.enqueue_seq < f0.enqueue_seq)"
#define NEW_PROBE                                                              \
  "f0.enqueue_seq = (SELECT k.enqueue_seq FROM onceq_items k"                  \
  " WHERE k.queue = f0.queue AND k.part = f0.part"                             \
  " AND k.ordering_key = f0.ordering_key AND k.ordering_key IS NOT NULL"       \
  " AND k.claim IS NULL ORDER BY k.enqueue_seq LIMIT 1)"

/* The control is the claim as it was when the probe was NOT EXISTS: the
 * front walk's window f0 a subquery of f, not a CTE of its own, no filter
 * keeping one candidate per key (ONE_PER_KEY), and a loose scan whenever f
 * is short (no FULL_WINDOW, which reads f0). Read through a CTE,
 * the window does not mislead the planner into the anti-join's nested
 * loop: the control would read too little to prove anything. */
#define ONE_PER_KEY                                                            \
  " AND ((f0.ordering_key, f0.enqueue_seq) IN (SELECT m.ordering_key,"         \
  " min(m.enqueue_seq) FROM f0 m WHERE m.ordering_key IS NOT NULL"             \
  " GROUP BY m.ordering_key)) IS TRUE"
/* KEY_CANDIDATES's loose scan only after a full window, which the
 * control leaves out too */
#define FULL_WINDOW " AND (SELECT count(*) FROM f0) >= 2 * $3::int"
#define WINDOW_CTE " f0 AS MATERIALIZED ("
#define WINDOW_END " LIMIT 2 * $3::int),"
#define FRONT_FROM "SELECT f0.id FROM f0 WHERE"

/* text with its window CTE f0 moved back into f as a subquery */
static char *window_inlined(const char *text)
{
  const char *a = strstr(text, WINDOW_CTE);
  const char *b = a ? strstr(a, WINDOW_END) : NULL;
  if (!b)
    OQT_FAIL("the keyed claim no longer has its window CTE f0");
  const char *w = a + strlen(WINDOW_CTE); /* the window's SELECT ... */
  int wlen = (int)(b + strlen(WINDOW_END) - 2 - w); /* ... up to "::int" */
  size_t len = strlen(text) + 1;
  char *cut = malloc(len);
  char *from = malloc((size_t)wlen + 64);
  if (!cut || !from)
    OQT_FAIL("out of memory");
  snprintf(cut, len, "%.*s%s", (int)(a - text), text, b + strlen(WINDOW_END));
  snprintf(from, (size_t)wlen + 64, "SELECT f0.id FROM (%.*s) f0 WHERE", wlen,
           w);
  char *inlined = SEM_AS_BEFORE(cut, FRONT_FROM, from);
  free(cut);
  free(from);
  return inlined;
}

/* The buffer reads of one run of `text` (a claim: $1 session, $2 queues,
 * $3 count, $4 byte budget) in its generic plan, as the library's claims
 * run (plan_cache_mode), rolled back: its top node's "shared hit", the
 * plan's first; and per row of the `rows` in the table. */
static long claim_hits(oq_db *db, const char *text, const char *sid,
                       const char *queue, int count, int rows, const char *name,
                       long *rows_read, char **plan_out)
{
  char args[160];
  snprintf(args, sizeof args, "'%s', '{%s}', %d, 67108864", sid, queue, count);
  char *plan = SEM_GENERIC_RUN(db, text, args, name);
  long hits = sem_plan_buffers(plan);
  long seen = sem_plan_rows_read(plan);
  if (plan_out)
    *plan_out = plan;
  else
    free(plan);
  if (hits < 0)
    OQT_FAIL("%s: no buffer counts in its plan (above)", name);
  printf("  %s: %ld buffer reads, %.2f per row in the table; %ld rows read\n",
         name, hits, (double)hits / rows, seen);
  if (rows_read)
    *rows_read = seen;
  return hits;
}

/* The actual rows of CTE f's node (the line after its label), -1 if
 * none (never executed). */
static double cte_f_rows(const char *plan)
{
  static const char label[] = "CTE f\n";
  const char *at = plan ? strstr(plan, label) : NULL;
  return at ? sem_plan_node_rows(at + strlen(label), "->") : -1;
}

/* How many distinct hashed subplans a plan names ("hashed SubPlan N",
 * once or per column, as PostgreSQL 17 and later print them). */
static int hashed_subplans(const char *plan)
{
  long seen[64];
  int n = 0;
  static const char tag[] = "hashed SubPlan ";
  for (const char *p = plan; p && (p = strstr(p, tag)); p += strlen(tag)) {
    long k = strtol(p + strlen(tag), NULL, 10);
    bool dup = false;
    for (int i = 0; i < n && !dup; i++)
      dup = seen[i] == k;
    if (!dup && n < 64)
      seen[n++] = k;
  }
  return n;
}

/* The keyed claim with the probe written as NOT EXISTS must still read
 * past the bound in this state, and the library's must not. */
static void check_plans(oq_db *db, const char *sid)
{
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_KEYED);
  char *inlined = window_inlined(text);
  char *probe = SEM_AS_BEFORE(inlined, NEW_PROBE, OLD_PROBE);
  char *one = SEM_AS_BEFORE(probe, ONE_PER_KEY, "");
  char *old = SEM_AS_BEFORE(one, FULL_WINDOW, "");
  free(inlined);
  free(probe);
  free(one);
  long bound = (long)HITS_PER_ROW * KEYS * PER_KEY;
  long was = claim_hits(db, old, sid, QUEUE, CLAIM_MAX, KEYS * PER_KEY,
                        "control: the probe as NOT EXISTS", NULL, NULL);
  free(old);
  SEM_CONTROL_PAST(was, bound, "buffers");
  long per_key = 0, every = 0;
  char *plan = NULL, *every_plan = NULL;
  long now = claim_hits(db, text, sid, QUEUE, CLAIM_MAX, KEYS * PER_KEY,
                        "the keyed claim", &per_key, &plan);
  SEM_WITHIN("the keyed claim", now, bound, "buffers",
             "its probe is not one descent per candidate");
  /* One probe per key of the window: its 2 x CLAIM_MAX keyed rows hold
   * KEYS keys, and each probe reads one index row, so the filter must save
   * the rest. Counted against the claim without it. */
  char *each = SEM_AS_BEFORE(text, ONE_PER_KEY, "");
  claim_hits(db, each, sid, QUEUE, CLAIM_MAX, KEYS * PER_KEY,
             "control: a probe for every keyed row of the window", &every,
             &every_plan);
  free(each);
  if (every - per_key < 2 * CLAIM_MAX - KEYS)
    OQT_FAIL("the keyed claim read %ld rows, %ld without its one-per-key "
             "filter: it should save the probes of %d rows",
             per_key, every, 2 * CLAIM_MAX - KEYS);
  printf("ok the front walk probes one row per key of its window: %ld rows "
         "read, %ld with a probe per row\n",
         per_key, every);
  /* the same candidates: f's rows with the filter and without it */
  double f_now = cte_f_rows(plan);
  double f_was = cte_f_rows(every_plan);
  if (f_now != KEYS || f_now != f_was)
    OQT_FAIL("the front walk found %.0f candidates, %.0f without its "
             "one-per-key filter (plans above)",
             f_now, f_was);
  /* and the filter is a hashed subplan: a plain one would scan the window
   * again for each of its rows, which neither count shows (a CTE scan
   * reads no buffer and no table row) */
  int h_now = hashed_subplans(plan), h_was = hashed_subplans(every_plan);
  if (h_now != h_was + 1)
    OQT_FAIL("the keyed claim's plan has %d hashed subplans, %d without the "
             "one-per-key filter: the filter is not one (plans above)",
             h_now, h_was);
  free(plan);
  free(every_plan);
  printf("ok the front walk keeps its %.0f candidates, and the filter is a "
         "hashed subplan\n",
         f_now);
}

/* With every key busy and a window that holds every ready row of the
 * queue, the claim finds nothing without a descent per key: counted in
 * rows read against the claim whose loose scan walks the keys anyway. */
static void check_whole_window(oq_db *db, const char *sid)
{
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_KEYED);
  char *walks = SEM_AS_BEFORE(text, FULL_WINDOW, "");
  int count = KEYS * PER_KEY; /* a window of twice the queue */
  long was = 0, now = 0;
  claim_hits(db, walks, sid, QUEUE, count, KEYS * PER_KEY,
             "control: the loose scan after a window of the whole queue", &was,
             NULL);
  free(walks);
  claim_hits(db, text, sid, QUEUE, count, KEYS * PER_KEY,
             "the keyed claim, every key busy", &now, NULL);
  if (was - now < KEYS)
    OQT_FAIL("the keyed claim read %ld rows, %ld with the loose scan: a "
             "window of the whole queue should save its %d keys' descents",
             now, was, KEYS);
  printf("ok a window of the whole queue skips the loose scan: %ld rows "
         "read, %ld with it\n",
         now, was);
}

/* Each claimed item is its key's first: the lowest enqueue_seq of the key
 * among all the key's items (none acknowledged yet). */
static void check_heads(oq_db *admin, const oq_item *items, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    long first =
        QLONG(admin,
              "SELECT count(*) FROM onceq_items i WHERE i.id ="
              " $1::uuid AND i.enqueue_seq = (SELECT min(k.enqueue_seq)"
              " FROM onceq_items k WHERE k.queue = i.queue"
              " AND k.ordering_key = i.ordering_key)",
              items[i].id);
    if (first != 1)
      OQT_FAIL("claimed %s of key %s is not its key's first item", items[i].id,
               items[i].ordering_key ? items[i].ordering_key : "(none)");
  }
}

/* The unkeyed claim (OQ__SQL_CLAIM) of UNKEYED_CLAIM items after
 * statistics taken while every item had a key: with the walk's NULL test
 * written plainly, `ordering_key IS NULL` was costed at one row and the
 * claim sorted the whole queue; as NO_KEY (dialect.c) it walks the ready
 * index in claim order. A control with the plain test, as above. */
#define UNKEYED_QUEUE "unkeyed_plan"
#define UNKEYED_ROWS 20000
#define UNKEYED_CLAIM 10
/* rows read: about 10 walking, 40,000 sorting (every row of the table) */
#define UNKEYED_BOUND 5000
#define NO_KEY_NOW "coalesce(ordering_key IS NULL, false)"
#define NO_KEY_OLD "ordering_key IS NULL"

static void check_unkeyed_plan(oq_db *db, const char *sid)
{
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM);
  char *old = SEM_AS_BEFORE(text, NO_KEY_NOW, NO_KEY_OLD);
  long was = 0, now = 0;
  claim_hits(db, old, sid, UNKEYED_QUEUE, UNKEYED_CLAIM, UNKEYED_ROWS,
             "control: the walk's plain NULL test", &was, NULL);
  free(old);
  SEM_CONTROL_PAST(was, UNKEYED_BOUND, "rows");
  claim_hits(db, text, sid, UNKEYED_QUEUE, UNKEYED_CLAIM, UNKEYED_ROWS,
             "the claim", &now, NULL);
  SEM_WITHIN("the unkeyed claim", now, UNKEYED_BOUND, "rows",
             "it does not walk the queue in claim order");
}

/* The ack's next-item statement (OQ__SQL_ACK_NEXT) after statistics taken
 * while every item was claimed, the items released since: the planner then
 * costs the ready index (claim IS NULL) at no rows, and with its test
 * written `claim IS NULL` the statement walked that index, filtering every
 * ready row against the heads' ctids, instead of finding the heads by ctid
 * (BY_ID_UNCLAIMED in dialect.c; docs/benchmarks.md, "Plans that
 * statistics cannot spoil", state e). Rows read, with a control. */
#define NEXT_QUEUE "next_plan"
#define NEXT_KEYS 2000
#define NEXT_PER_KEY 10
#define NEXT_ASKED 200
/* rows read: about 2 per key asked this way, every ready row the old way */
#define NEXT_BOUND 5000
#define NEXT_NOW "(claim IS NULL) IS TRUE AND run_at <= now()"
#define NEXT_OLD "claim IS NULL AND run_at <= now()"

static long next_rows(oq_db *db, const char *text, const char *sid,
                      const char *name)
{
  /* the acknowledged items' queues and keys, as ack_many passes them */
  char queues[NEXT_ASKED * 16], keys[NEXT_ASKED * 16];
  size_t qa = 0, ka = 0;
  for (int k = 1; k <= NEXT_ASKED; k++) {
    qa += (size_t)snprintf(queues + qa, sizeof queues - qa, "%s%s",
                           k > 1 ? "," : "", NEXT_QUEUE);
    ka += (size_t)snprintf(keys + ka, sizeof keys - ka, "%snk-%d",
                           k > 1 ? "," : "", k);
  }
  char args[sizeof queues + sizeof keys + 128];
  snprintf(args, sizeof args, "'%s', '{%s}', '{%s}', NULL", sid, queues, keys);
  char *plan = SEM_GENERIC_RUN(db, text, args, name);
  long seen = sem_plan_rows_read(plan);
  double claimed = sem_plan_node_rows(plan, "Update on onceq_items");
  free(plan);
  printf("  %s: %ld rows read, %.0f claimed\n", name, seen, claimed);
  /* each key asked has its head unclaimed and ready: a statement that
   * claims fewer would read less for the wrong reason */
  if (claimed != NEXT_ASKED)
    OQT_FAIL("%s: its plan (above) claimed %.0f items, not the %d keys' next",
             name, claimed, NEXT_ASKED);
  return seen;
}

static void check_next_plan(oq_db *admin, const char *sid)
{
  oqt_exec(admin, "DELETE FROM onceq_items");
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key)"
           " SELECT '%s', jsonb_build_object('n', g), 'nk-' || (g %% %d)"
           " FROM generate_series(1, %d) AS g",
           NEXT_QUEUE, NEXT_KEYS, NEXT_KEYS * NEXT_PER_KEY);
  oqt_exec(admin, sql);
  /* analyzed while every item was claimed, then all released */
  QEXEC(admin, "UPDATE onceq_items SET claim = $1::uuid, claimed_at = now()",
        sid);
  oqt_exec(admin, "ANALYZE onceq_items");
  oqt_exec(admin, "UPDATE onceq_items SET claim = NULL, claimed_at = NULL");
  const char *text = oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_ACK_NEXT);
  char *old = SEM_AS_BEFORE(text, NEXT_NOW, NEXT_OLD);
  long was = next_rows(admin, old, sid, "control: the next item's plain test");
  free(old);
  SEM_CONTROL_PAST(was, NEXT_BOUND, "rows");
  long now = next_rows(admin, text, sid, "the next-item statement");
  SEM_WITHIN("the next-item statement", now, NEXT_BOUND, "rows",
             "it does not find the keys' heads by ctid");
}

int main(void)
{
  const char *dsn = oqt_fresh_db("keyed_claim_plan", 1);
  oq_db *admin = oqt_connect(dsn);
  oq_db *dbc = oqt_connect(oqt_worker_dsn(dsn));
  bool pg = oq_db_engine(admin) == OQ_ENGINE_POSTGRES;
  /* statistics taken while the table held only items without a key */
  oqt_enqueue_n(admin, STATS_QUEUE, 2000);
  if (pg)
    oqt_exec(admin, "ALTER TABLE onceq_items SET (autovacuum_enabled = off)");
  oqt_exec(admin, "ANALYZE onceq_items");
  oqt_exec(admin, "DELETE FROM onceq_items");
  /* then keyed items, as users enqueue them: a plain INSERT, key g % KEYS,
   * so a key's items are spread through the enqueue order */
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key)"
           " SELECT '%s', jsonb_build_object('n', g), 'key-' || (g %% %d)"
           " FROM generate_series(1, %d) AS g",
           QUEUE, KEYS, KEYS * PER_KEY);
  oqt_exec(admin, sql);
  oq_session *s = SEM_LONG_SESSION(dbc);

  if (pg)
    check_plans(admin, oq_session_id(s));
  else
    printf("SKIP: the plans are checked on PostgreSQL only\n");

  /* the library's claims in that state: one item per key, each its key's
   * first; then nothing (every key busy); an ack frees its key's next */
  oq_item *heads = NULL;
  size_t n = SEM_CLAIM(dbc, s, QUEUE, CLAIM_MAX, &heads);
  ASSERT_EQ(n, KEYS);
  check_heads(admin, heads, n);
  ASSERT_EQ(oqt_scalar(admin, "SELECT count(DISTINCT ordering_key) FROM"
                              " onceq_items WHERE claim IS NOT NULL"),
            KEYS);
  oq_item *none = NULL;
  ASSERT_EQ(SEM_CLAIM(dbc, s, QUEUE, CLAIM_MAX, &none), 0);
  oq_items_free(none, 0);
  if (pg)
    check_whole_window(admin, oq_session_id(s));
  bool rec = false;
  ASSERT_OK(dbc, oq_ack(dbc, s, &heads[0], NULL, NULL, NULL, &rec));
  oq_item *next = NULL;
  ASSERT_EQ(SEM_CLAIM(dbc, s, QUEUE, CLAIM_MAX, &next), 1);
  ASSERT_STREQ(next[0].ordering_key, heads[0].ordering_key);
  check_heads(admin, next, 1);
  printf("ok in that state the claims take one item per key, each its "
         "key's first, and an ack frees its key's next\n");

  /* statistics taken while every item had a key (they stay, in a queue
   * of their own), then unkeyed items in the queue claimed from */
  oqt_exec(admin, "DELETE FROM onceq_items");
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload, ordering_key)"
           " SELECT '%s', jsonb_build_object('n', g), 'key-' || (g %% 1000)"
           " FROM generate_series(1, %d) AS g",
           STATS_QUEUE, UNKEYED_ROWS);
  oqt_exec(admin, sql);
  oqt_exec(admin, "ANALYZE onceq_items");
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_items (queue, payload)"
           " SELECT '%s', jsonb_build_object('n', g)"
           " FROM generate_series(1, %d) AS g",
           UNKEYED_QUEUE, UNKEYED_ROWS);
  oqt_exec(admin, sql);
  if (pg)
    check_unkeyed_plan(admin, oq_session_id(s));
  oq_item *plain = NULL;
  ASSERT_EQ(SEM_CLAIM(dbc, s, UNKEYED_QUEUE, UNKEYED_CLAIM, &plain),
            UNKEYED_CLAIM);
  for (int i = 0; i < UNKEYED_CLAIM; i++)
    ASSERT(!plain[i].keyed);
  printf("ok and the library's claim takes %d of them\n", UNKEYED_CLAIM);
  oq_items_free(plain, UNKEYED_CLAIM);
  if (pg)
    check_next_plan(admin, oq_session_id(s));
  oq_items_free(next, 1);
  oq_items_free(heads, n);
  oq_session_free(s);
  oq_db_close(dbc);
  oq_db_close(admin);
  return 0;
}
