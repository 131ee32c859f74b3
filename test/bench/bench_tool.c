/*
 * bench_tool.c: helpers for test/bench/run.sh.
 *
 *   bench_tool sql claim|claim_parts|ack|ack_batch
 *       print the PostgreSQL text of the statement the library sends
 *       (lib/src/dialect.c), so that the pgbench ceilings are built from
 *       the library's own SQL and follow any change to it (internal API:
 *       oq__sql).
 *   bench_tool migrate CONNINFO
 *       apply the schema with the library's migrations (oq_migrate_run),
 *       so the bench does not depend on the onceq CLI building.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static int usage(void)
{
  fputs("usage: bench_tool sql claim|claim_parts|ack|ack_batch\n"
        "       bench_tool migrate CONNINFO\n",
        stderr);
  return 2;
}

int main(int argc, char **argv)
{
  static const struct {
    const char *name;
    oq__stmt stmt;
  } stmts[] = {{"claim", OQ__SQL_CLAIM},
               {"claim_parts", OQ__SQL_CLAIM_PARTS},
               {"ack", OQ__SQL_ACK},
               {"ack_batch", OQ__SQL_ACK_BATCH}};
  if (argc != 3)
    return usage();
  if (strcmp(argv[1], "sql") == 0) {
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++)
      if (strcmp(argv[2], stmts[i].name) == 0) {
        puts(oq__sql(OQ_ENGINE_POSTGRES, stmts[i].stmt));
        return 0;
      }
    return usage();
  }
  if (strcmp(argv[1], "migrate") == 0) {
    char err[OQ_ERRBUF_SIZE];
    oq_db *db = NULL;
    oq_db_opts o = {.conninfo = argv[2], .application_name = "onceq-bench"};
    if (oq_db_open(&o, &db, err, sizeof err) != OQ_OK) {
      fprintf(stderr, "bench_tool: %s\n", err);
      return 1;
    }
    int from = 0, to = 0;
    oq_err e = oq_migrate_run(db, &from, &to);
    if (e != OQ_OK)
      fprintf(stderr, "bench_tool: migrate: %s\n", oq_db_errmsg(db));
    else
      printf("schema version %d -> %d\n", from, to);
    oq_db_close(db);
    return e == OQ_OK ? 0 : 1;
  }
  return usage();
}
