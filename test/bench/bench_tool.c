/*
 * bench_tool.c: helpers for test/bench/run.sh and keys_bench.sh.
 *
 *   bench_tool sql claim|claim_parts|ack|ack_batch
 *       print the PostgreSQL text of the statement the library sends
 *       (lib/src/dialect.c), so that the pgbench ceilings are built from
 *       the library's own SQL and follow any change to it (internal API:
 *       oq__sql).
 *   bench_tool migrate CONNINFO
 *       apply the schema with the library's migrations (oq_migrate_run),
 *       so the bench does not depend on the onceq CLI building.
 *   bench_tool wait_empty CONNINFO SECONDS
 *       poll `SELECT count(*) FROM onceq_items` every 20 ms on one
 *       connection until it is 0, then print the wall clock in ms since
 *       the epoch (as `date +%s%3N`) and exit 0; exit 1 with the count
 *       left after SECONDS, or on a connection or query error; 2 on a bad
 *       SECONDS. A new psql per poll cost about 13 ms of CPU on session
 *       26's 2-core machine, taken from the drains it timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "internal.h"

static int usage(void)
{
  fputs("usage: bench_tool sql claim|claim_parts|ack|ack_batch\n"
        "       bench_tool migrate CONNINFO\n"
        "       bench_tool wait_empty CONNINFO SECONDS\n",
        stderr);
  return 2;
}

static double now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

static int wait_empty(const char *conninfo, const char *seconds)
{
  char *end = NULL;
  double limit = strtod(seconds, &end);
  if (!end || *end || !(limit > 0 && limit <= 3600)) { /* NaN too */
    fputs("bench_tool: wait_empty: SECONDS must be a number in (0, 3600]\n",
          stderr);
    return 2;
  }
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "bench_tool: wait_empty: %s", PQerrorMessage(c));
    PQfinish(c);
    return 1;
  }
  double deadline = now_ms() + limit * 1000.0;
  int rc = 1;
  for (;;) {
    PGresult *r = PQexec(c, "SELECT count(*) FROM onceq_items");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    char left[32] = "";
    if (ok)
      snprintf(left, sizeof left, "%s", PQgetvalue(r, 0, 0));
    bool empty = ok && strcmp(left, "0") == 0;
    PQclear(r);
    if (!ok) {
      fprintf(stderr, "bench_tool: wait_empty: %s", PQerrorMessage(c));
      break;
    }
    double t = now_ms();
    if (empty) {
      printf("%.0f\n", t);
      rc = 0;
      break;
    }
    if (t >= deadline) {
      fprintf(stderr, "bench_tool: wait_empty: %s items left after %s s\n",
              left, seconds);
      break;
    }
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
  }
  PQfinish(c);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc == 4 && strcmp(argv[1], "wait_empty") == 0)
    return wait_empty(argv[2], argv[3]);
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
