/*
 * cmd_sessions.c: `onceq sessions`: the worker sessions in onceq_sessions,
 * oldest first, with how many items each one holds (claims).
 *
 * Terms: age = now() - created_at; heartbeat = now() - heartbeated_at;
 * expired = heartbeat older than the session's own expiry (the next reap,
 * by any reaper or `onceq reap`, deletes it and releases its claims). All
 * times come from the database's clock.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "views.h"
#include "listing.h"
#include "table.h"

static const char sessions_sql[] =
    "SELECT s.id::text, s.hostname, s.pid,"
    " extract(epoch from now() - s.created_at)::float8,"
    " extract(epoch from now() - s.heartbeated_at)::float8,"
    " extract(epoch from s.expiry)::float8,"
    " s.heartbeated_at + s.expiry < now(),"
    " (SELECT count(*) FROM onceq_items i WHERE i.claim = s.id),"
    " s.queues, s.version,"
    " extract(epoch from s.created_at)::float8,"
    " extract(epoch from s.heartbeated_at)::float8"
    " FROM onceq_sessions s ORDER BY s.created_at, s.id";

enum {
  C_ID,
  C_HOST,
  C_PID,
  C_AGE,
  C_BEAT_AGO,
  C_EXPIRY,
  C_EXPIRED,
  C_CLAIMS,
  C_QUEUES,
  C_VERSION,
  C_CREATED,
  C_BEAT,
  C_NCOLS
};

static const cli_listing_col cols[] = {
    {"SESSION", 0},
    {"HOST", CLI_COL_FLEX},
    {"PID", CLI_COL_RIGHT},
    {"AGE", CLI_COL_RIGHT},
    {"HEARTBEAT", CLI_COL_RIGHT},
    {"EXPIRY", CLI_COL_RIGHT},
    {"STATE", 0},
    {"CLAIMS", CLI_COL_RIGHT},
    {NULL, 0},
};

typedef struct sessions_ctx {
  cli_listing out; /* --json: inside the "sessions" array */
  long n, claims;
} sessions_ctx;

static oq_err on_row(void *ud, int ncols, const char *const *v)
{
  sessions_ctx *c = ud;
  if (ncols < C_NCOLS)
    return OQ_ERR_SQL;
  c->n++;
  c->claims += v[C_CLAIMS] ? strtol(v[C_CLAIMS], NULL, 10) : 0;
  bool expired = v[C_EXPIRED] && v[C_EXPIRED][0] == 't';
  if (c->out.json) {
    cm_json *j = &c->out.j;
    cm_json_obj(j, NULL);
    cm_json_str(j, "id", v[C_ID]);
    cm_json_str(j, "host", v[C_HOST]);
    cm_json_raw(j, "pid", v[C_PID]);
    cli_json_time(j, "created_at", cli_num(v[C_CREATED]));
    cli_json_time(j, "heartbeated_at", cli_num(v[C_BEAT]));
    cm_json_num(j, "age_s", cli_num(v[C_AGE]));
    cm_json_num(j, "heartbeat_age_s", cli_num(v[C_BEAT_AGO]));
    cm_json_num(j, "expiry_s", cli_num(v[C_EXPIRY]));
    cm_json_bool(j, "expired", expired);
    cm_json_raw(j, "claims", v[C_CLAIMS]);
    cm_json_str(j, "queues", v[C_QUEUES]);
    cm_json_str(j, "version", v[C_VERSION]);
    cm_json_end(j);
    return OQ_OK;
  }
  char age[16], beat[24], exp[16], id8[9];
  snprintf(id8, sizeof id8, "%.8s", v[C_ID] ? v[C_ID] : "");
  cli_table_cell(c->out.t, id8);
  cli_table_cell(c->out.t, v[C_HOST] && *v[C_HOST] ? v[C_HOST] : "-");
  cli_table_cell(c->out.t, v[C_PID]);
  cli_table_cell(c->out.t, cli_fmt_dur(cli_num(v[C_AGE]), age, sizeof age));
  cli_table_cell(c->out.t,
                 cli_fmt_ago(cli_num(v[C_BEAT_AGO]), beat, sizeof beat));
  cli_table_cell(c->out.t, cli_fmt_dur(cli_num(v[C_EXPIRY]), exp, sizeof exp));
  cli_table_cell(c->out.t, expired ? "expired" : "live");
  cli_table_cell(c->out.t, v[C_CLAIMS]);
  return OQ_OK;
}

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
  sessions_ctx c = {0};
  int rc = cli_listing_open(&c.out, g->json, "sessions", cols, "sessions");
  if (rc == CLI_EXIT_OK)
    rc = cli_query(g, "sessions", sessions_sql, 0, NULL, on_row, &c);
  if (rc != CLI_EXIT_OK)
    goto out;
  if (c.out.json) {
    cli_listing_end_rows(&c.out);
    rc = cli_listing_print(&c.out, stdout, "sessions");
  } else if (c.n == 0) {
    printf("no sessions (no worker is running)\n");
  } else {
    rc = cli_listing_print(&c.out, stdout, "sessions");
    if (rc == CLI_EXIT_OK)
      printf("%ld session%s, %ld claimed item%s\n", c.n, c.n == 1 ? "" : "s",
             c.claims, c.claims == 1 ? "" : "s");
  }
out:
  cli_listing_free(&c.out);
  return rc;
}

int co_view_sessions(FILE *f, oq_db *db)
{
  sessions_ctx c = {0};
  int rc = cli_listing_open(&c.out, true, "sessions", cols, "sessions");
  if (rc == CLI_EXIT_OK &&
      oq_db_query(db, sessions_sql, 0, NULL, on_row, &c) != OQ_OK)
    rc = CLI_EXIT_RUNTIME;
  if (rc == CLI_EXIT_OK) {
    cli_listing_end_rows(&c.out);
    rc = cli_listing_print(&c.out, f, "sessions");
  }
  cli_listing_free(&c.out);
  return rc;
}
