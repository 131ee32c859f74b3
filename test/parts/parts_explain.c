/*
 * parts_explain.c: on PostgreSQL, the partitioned claim (the exact text
 * the library sends, dialect.c) is an index range scan: EXPLAIN shows the
 * partial index onceq_items_ready (queue, priority DESC, run_at,
 * enqueue_seq, part)
 * WHERE claim IS NULL used with a range condition on part, for a block of
 * 4 of 12 parts over 20,000 ready items, read in claim order (no Sort
 * right above it). A keyed queue's partitioned claim walks the key heads
 * of its own slots only: the loose scan of onceq_items_key_order (queue,
 * part, ordering_key, enqueue_seq; schema v11) has the slot range in its
 * Index Cond. Prints the claims' plans.
 */
#include "internal.h"
#include "oq_test.h"

typedef struct plan {
  char text[32768];
  size_t len;
} plan;

static oq_err plan_line(void *ud, int ncols, const char *const *vals)
{
  plan *p = ud;
  if (ncols > 0 && vals[0] && p->len < sizeof p->text - 1)
    p->len += (size_t)snprintf(p->text + p->len, sizeof p->text - p->len,
                               "%s\n", vals[0]);
  return OQ_OK;
}

/* EXPLAIN sql with its parameters (a custom plan for these values). */
static void explain(oq_db *db, const char *sql, int n, const char *const *pv,
                    plan *out)
{
  char buf[16384];
  int len = snprintf(buf, sizeof buf, "EXPLAIN %s", sql);
  if (len < 0 || (size_t)len >= sizeof buf)
    OQT_FAIL("the claim (%zu bytes) does not fit the EXPLAIN buffer",
             strlen(sql));
  out->len = 0;
  out->text[0] = '\0';
  ASSERT_OK(db, oq_db_query(db, buf, n, pv, plan_line, out));
}

/* The line of the plan that names the index, and its Index Cond. */
static void check_range_scan(const plan *p)
{
  const char *idx = strstr(p->text, "onceq_items_ready");
  if (!idx)
    OQT_FAIL("the partitioned claim does not use onceq_items_ready:\n%s",
             p->text);
  ASSERT(strstr(p->text, "Index Scan") || strstr(p->text, "Bitmap Index Scan"));
  const char *cond = strstr(idx, "Index Cond:");
  if (!cond)
    OQT_FAIL("no Index Cond on onceq_items_ready:\n%s", p->text);
  const char *eol = strchr(cond, '\n');
  char line[1024];
  size_t len = eol ? (size_t)(eol - cond) : strlen(cond);
  if (len >= sizeof line)
    len = sizeof line - 1;
  memcpy(line, cond, len);
  line[len] = '\0';
  ASSERT_CONTAINS(line, "part >= 342");
  ASSERT_CONTAINS(line, "part < 683");
  ASSERT_NOT_CONTAINS(p->text, "Seq Scan on onceq_items ");
  /* walked in claim order: the index scan is not under a Sort of the
   * part's rows (the queue here has no keyed item, so this is the arm that
   * runs; the keyed arm sorts only its few candidates) */
  const char *line_start = idx;
  while (line_start > p->text && line_start[-1] != '\n')
    line_start--;
  const char *prev = line_start > p->text ? line_start - 1 : p->text;
  while (prev > p->text && prev[-1] != '\n')
    prev--;
  char above[1024];
  size_t alen = (size_t)(line_start - prev);
  if (alen >= sizeof above)
    alen = sizeof above - 1;
  memcpy(above, prev, alen);
  above[alen] = '\0';
  ASSERT_NOT_CONTAINS(above, "Sort");
}

/* The plan line after the first one that contains `node` (the node's
 * Index Cond when it has one), into out. */
static void cond_after(const plan *p, const char *node, char *out, size_t len)
{
  const char *at = strstr(p->text, node);
  if (!at)
    OQT_FAIL("no \"%s\" in the plan:\n%s", node, p->text);
  const char *next = strchr(at, '\n');
  if (!next)
    OQT_FAIL("nothing after \"%s\":\n%s", node, p->text);
  next++;
  const char *eol = strchr(next, '\n');
  size_t n = eol ? (size_t)(eol - next) : strlen(next);
  if (n >= len)
    n = len - 1;
  memcpy(out, next, n);
  out[n] = '\0';
}

int main(void)
{
  const char *dsn = oqt_fresh_db("parts_explain", 1);
  oq_db *db = oqt_connect(dsn);
  if (oq_db_engine(db) != OQ_ENGINE_POSTGRES) {
    printf("SKIP: EXPLAIN shape is checked on PostgreSQL only\n");
    return 77;
  }
  ASSERT_OK(db, oq_db_exec(db,
                           "INSERT INTO onceq_items (payload) SELECT"
                           " jsonb_build_object('n', g)"
                           " FROM generate_series(1, 20000) g",
                           0, NULL, NULL));
  oqt_exec(db, "ANALYZE onceq_items");
  oq_session *s = NULL;
  oq_session_opts so = {.expiry_ms = 60000};
  ASSERT_OK(db, oq_session_open(db, &so, &s));

  /* parts [4, 8) of 12 are slots [342, 683): ceil(4 * 1024 / 12) = 342 */
  int lo, hi;
  oq_parts_slots(4, 8, 12, &lo, &hi);
  ASSERT_EQ(lo, 342);
  ASSERT_EQ(hi, 683);
  char slo[16], shi[16];
  snprintf(slo, sizeof slo, "%d", lo);
  snprintf(shi, sizeof shi, "%d", hi);
  /* $7: the byte budget (the worker's default, 64 MiB) */
  const char *pv[7] = {oq_session_id(s), "{default}", "8", slo, shi, "0",
                       "67108864"};
  plan p;
  explain(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_PARTS), 7, pv, &p);
  printf("--- partitioned claim, parts [4,8) of 12:\n%s", p.text);
  check_range_scan(&p);

  /* the orphan variant (ready for longer than 30 s) too */
  pv[5] = "30000";
  explain(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_PARTS), 7, pv, &p);
  check_range_scan(&p);

  /* a keyed queue: 2,000 items on 200 keys; the loose scan's first
   * descent (alias i) starts at the block's first slot, and every next one
   * (i_1) stops at its end, both as index conditions (the custom plan
   * shows the values) */
  oqt_exec(db, "INSERT INTO onceq_items (queue, payload, ordering_key)"
               " SELECT 'keyed', jsonb_build_object('n', g), 'k' || (g % 200)"
               " FROM generate_series(1, 2000) g");
  oqt_exec(db, "ANALYZE onceq_items");
  pv[1] = "{keyed}";
  pv[5] = "0";
  explain(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM_PARTS_KEYED), 7, pv,
          &p);
  printf("--- partitioned keyed claim, parts [4,8) of 12:\n%s", p.text);
  char cond[1024];
  cond_after(&p, "Index Scan using onceq_items_key_order on onceq_items i ",
             cond, sizeof cond);
  ASSERT_CONTAINS(cond, "Index Cond: ");
  ASSERT_CONTAINS(cond, "(part >= 342) AND (part < 683)");
  cond_after(&p, "Index Scan using onceq_items_key_order on onceq_items i_1 ",
             cond, sizeof cond);
  ASSERT_CONTAINS(cond, "Index Cond: ");
  ASSERT_CONTAINS(cond,
                  "(ROW(part, ordering_key) > ROW(h.part, h.ordering_key))"
                  " AND (part < 683)");

  /* for comparison: the unpartitioned claim */
  const char *pu[4] = {oq_session_id(s), "{default}", "8", "67108864"};
  explain(db, oq__sql(OQ_ENGINE_POSTGRES, OQ__SQL_CLAIM), 4, pu, &p);
  printf("--- unpartitioned claim:\n%s", p.text);

  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  printf("PASS it_lib_parts_explain\n");
  return 0;
}
