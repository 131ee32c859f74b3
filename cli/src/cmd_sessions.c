/*
 * cmd_sessions.c: `onceq sessions`: the worker sessions in onceq_sessions,
 * oldest first, with how many items each one holds (claims). The
 * statement and the rows are the sessions view (query/src/views.c),
 * which the status page serves as /api/sessions.
 *
 * Terms: age = now() - created_at; heartbeat = now() - heartbeated_at;
 * expired = heartbeat older than the session's own expiry (the next reap,
 * by any reaper or `onceq reap`, deletes it and releases its claims). All
 * times come from the database's clock.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "views.h"

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq sessions [--json]\n"
          "  the worker sessions, oldest first: host, pid, age, time since\n"
          "  the last heartbeat, expiry, state and claims (items held).\n"
          "  An expired session is deleted by the next reap (`onceq reap`),\n"
          "  which releases its claims. The table shows the first 8\n"
          "  characters of each session id; --json has every field.\n");
}

int cmd_sessions(const cli_globals *g, int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    return cli_usage_error("sessions", "unknown argument %s", argv[i]);
  }
  cm_listing out;
  qv_sessions_sum sum = {0};
  oq_db *db = NULL;
  int rc = qv_sessions_open(&out, g->json);
  if (rc == CLI_EXIT_OK)
    db = cli_connect(g, "sessions", &rc);
  if (!db)
    goto out;
  oq_err e = qv_sessions_read(db, &out, &sum);
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "sessions", NULL);
    goto out;
  }
  if (out.json) {
    cm_listing_end_rows(&out);
    rc = cm_listing_print(&out, stdout, "sessions");
  } else if (sum.n == 0) {
    printf("no sessions (no worker is running)\n");
  } else {
    rc = cm_listing_print(&out, stdout, "sessions");
    if (rc == CLI_EXIT_OK)
      printf("%ld session%s, %ld claimed item%s\n", sum.n,
             sum.n == 1 ? "" : "s", sum.claims, sum.claims == 1 ? "" : "s");
  }
out:
  oq_db_close(db);
  cm_listing_free(&out);
  return rc;
}
