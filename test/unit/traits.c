/*
 * traits.c (unit): the engine trait table (onceq/traits.h) and the
 * ONCEQ_ENGINE_TRAITS rule, plus the migration statement splitter that the
 * per-statement migrations (transactional_ddl false) run on. No database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oq_test.h"

static void test_table(void)
{
  const oq_engine_traits *pg = oq_engine_traits_of(OQ_ENGINE_POSTGRES);
  const oq_engine_traits *cr = oq_engine_traits_of(OQ_ENGINE_COCKROACH);
  ASSERT_STREQ(pg->name, "postgres");
  ASSERT_STREQ(cr->name, "cockroachdb");
  /* PostgreSQL: every capability */
  ASSERT(pg->listen_notify && pg->advisory_lock && pg->transactional_ddl &&
         pg->multi_queue_claim && pg->session_settings && pg->stat_views);
  ASSERT_EQ(pg->poll_ms, 1000);
  /* CockroachDB: none of them (docs/cockroachdb.md, "Engine traits") */
  ASSERT(!cr->listen_notify && !cr->advisory_lock && !cr->transactional_ddl &&
         !cr->multi_queue_claim && !cr->session_settings && !cr->stat_views);
  ASSERT_EQ(cr->poll_ms, 150);
  /* an unknown engine value falls back to PostgreSQL's row */
  ASSERT(oq_engine_traits_of((oq_engine)7) == pg);
  printf("ok trait table\n");
}

static void test_override(void)
{
  const oq_engine_traits *pg = oq_engine_traits_of(OQ_ENGINE_POSTGRES);
  const oq_engine_traits *cr = oq_engine_traits_of(OQ_ENGINE_COCKROACH);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, NULL, false) == pg);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, "", false) == pg);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, "cockroachdb", false) ==
         cr);
  /* exact value only: a near miss changes nothing */
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, "CockroachDB", false) ==
         pg);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, "crdb", false) == pg);
  /* PostgreSQL's traits can never be forced onto CockroachDB (it has no
   * LISTEN or advisory lock to use) */
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_COCKROACH, "postgres", false) == cr);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_COCKROACH, NULL, false) == cr);
  /* a pooled PostgreSQL connection gets the pooled row (no LISTEN, no
   * session state); the CockroachDB override and engine win over it */
  const oq_engine_traits *po =
      oq__engine_traits_pick(OQ_ENGINE_POSTGRES, NULL, true);
  ASSERT(po != pg && po != cr);
  ASSERT(!po->listen_notify && !po->session_settings);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_POSTGRES, "cockroachdb", true) == cr);
  ASSERT(oq__engine_traits_pick(OQ_ENGINE_COCKROACH, NULL, true) == cr);
  ASSERT_STREQ(OQ_TRAITS_ENV, "ONCEQ_ENGINE_TRAITS");
  printf("ok override rule\n");
}

typedef struct {
  int n;
  char stmts[16][512];
  int stop_at;
} split_ctx;

static oq_err collect(void *ud, const char *stmt)
{
  split_ctx *c = ud;
  if (c->n == c->stop_at)
    return OQ_ERR_SQL;
  snprintf(c->stmts[c->n++], sizeof c->stmts[0], "%s", stmt);
  return OQ_OK;
}

static int split(const char *script, split_ctx *c)
{
  char *copy = strdup(script);
  ASSERT(copy != NULL);
  c->n = 0;
  oq_err e = oq__migrate_each_statement(copy, collect, c);
  free(copy);
  return e == OQ_OK ? c->n : -1;
}

static void test_split(void)
{
  split_ctx c = {.stop_at = -1};
  /* a function body with ";" at line ends stays one statement */
  const char *s = "-- header\n"
                  "CREATE TABLE a (x int);\n"
                  "\n-- only a comment;\n"
                  "CREATE FUNCTION f() RETURNS trigger\n"
                  "LANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM 1;\n"
                  "  RETURN NULL;\nEND;\n$$;\n"
                  "CREATE INDEX i ON a (x);\n";
  ASSERT_EQ(split(s, &c), 3);
  ASSERT_CONTAINS(c.stmts[0], "CREATE TABLE a (x int)");
  ASSERT_CONTAINS(c.stmts[1], "RETURN NULL;\nEND;\n$$");
  ASSERT_CONTAINS(c.stmts[2], "CREATE INDEX i");
  /* the last statement may end the script without a newline */
  ASSERT_EQ(split("SELECT 1;\nSELECT 2;", &c), 2);
  /* ";" inside a line does not split */
  ASSERT_EQ(split("SELECT ';x';\n", &c), 1);
  /* stops at the first error */
  c.stop_at = 1;
  ASSERT_EQ(split("SELECT 1;\nSELECT 2;\nSELECT 3;\n", &c), -1);
  ASSERT_EQ(c.n, 1);
  c.stop_at = -1;
  /* every embedded script closes each $$ body it opens (else the splitter
   * would run the rest of the script as one statement) */
  for (int v = 0; v < oq__migration_count; v++) {
    const char *scripts[2] = {oq__migrations[v].pg_sql,
                              oq__migrations[v].crdb_sql};
    for (int k = 0; k < 2; k++) {
      char *copy = strdup(scripts[k]);
      int n = 0;
      for (char *p = copy; (p = strstr(p, "$$")) != NULL; p += 2)
        n++;
      ASSERT_EQ(n % 2, 0);
      free(copy);
    }
  }
  printf("ok migration statement splitter\n");
}

int main(void)
{
  test_table();
  test_override();
  test_split();
  printf("traits: ok\n");
  return 0;
}
