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

typedef struct sessions_ctx {
  bool json;
  cli_table *t;
  cli_json j;
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
  if (c->json) {
    cli_json *j = &c->j;
    cli_json_obj(j, NULL);
    cli_json_str(j, "id", v[C_ID]);
    cli_json_str(j, "host", v[C_HOST]);
    cli_json_raw(j, "pid", v[C_PID]);
    cli_json_time(j, "created_at", cli_num(v[C_CREATED]));
    cli_json_time(j, "heartbeated_at", cli_num(v[C_BEAT]));
    cli_json_num(j, "age_s", cli_num(v[C_AGE]));
    cli_json_num(j, "heartbeat_age_s", cli_num(v[C_BEAT_AGO]));
    cli_json_num(j, "expiry_s", cli_num(v[C_EXPIRY]));
    cli_json_bool(j, "expired", expired);
    cli_json_raw(j, "claims", v[C_CLAIMS]);
    cli_json_str(j, "queues", v[C_QUEUES]);
    cli_json_str(j, "version", v[C_VERSION]);
    cli_json_end(j);
    return OQ_OK;
  }
  char age[16], beat[24], exp[16], id8[9];
  snprintf(id8, sizeof id8, "%.8s", v[C_ID] ? v[C_ID] : "");
  cli_table_cell(c->t, id8);
  cli_table_cell(c->t, v[C_HOST] && *v[C_HOST] ? v[C_HOST] : "-");
  cli_table_cell(c->t, v[C_PID]);
  cli_table_cell(c->t, cli_fmt_dur(cli_num(v[C_AGE]), age, sizeof age));
  cli_table_cell(c->t, cli_fmt_ago(cli_num(v[C_BEAT_AGO]), beat, sizeof beat));
  cli_table_cell(c->t, cli_fmt_dur(cli_num(v[C_EXPIRY]), exp, sizeof exp));
  cli_table_cell(c->t, expired ? "expired" : "live");
  cli_table_cell(c->t, v[C_CLAIMS]);
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
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "sessions", &rc);
  if (!db)
    return rc;
  sessions_ctx c = {.json = g->json};
  char *jbuf = NULL;
  size_t jlen = 0;
  FILE *jf = NULL;
  if (c.json) {
    jf = open_memstream(&jbuf, &jlen);
    if (!jf) {
      rc = cli_fail(CLI_EXIT_RUNTIME, "sessions", "out of memory");
      goto out;
    }
    cli_json_init(&c.j, jf);
    cli_json_obj(&c.j, NULL);
    cli_json_arr(&c.j, "sessions");
  } else {
    c.t = cli_table_new();
    cli_table_col(c.t, "SESSION", 0);
    cli_table_col(c.t, "HOST", CLI_COL_FLEX);
    cli_table_col(c.t, "PID", CLI_COL_RIGHT);
    cli_table_col(c.t, "AGE", CLI_COL_RIGHT);
    cli_table_col(c.t, "HEARTBEAT", CLI_COL_RIGHT);
    cli_table_col(c.t, "EXPIRY", CLI_COL_RIGHT);
    cli_table_col(c.t, "STATE", 0);
    cli_table_col(c.t, "CLAIMS", CLI_COL_RIGHT);
  }
  oq_err e = oq_db_query(db, sessions_sql, 0, NULL, on_row, &c);
  if (e != OQ_OK) {
    rc = cli_fail_db(db, e, "sessions", NULL);
    goto out;
  }
  if (c.json) {
    cli_json_end(&c.j);
    cli_json_end(&c.j);
    fclose(jf);
    jf = NULL;
    fwrite(jbuf, 1, jlen, stdout);
  } else if (c.n == 0) {
    printf("no sessions (no worker is running)\n");
  } else if (cli_table_print(c.t, stdout, 0) != 0) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "sessions", "out of memory");
  } else {
    printf("%ld session%s, %ld claimed item%s\n", c.n, c.n == 1 ? "" : "s",
           c.claims, c.claims == 1 ? "" : "s");
  }
out:
  if (jf)
    fclose(jf);
  free(jbuf);
  cli_table_free(c.t);
  oq_db_close(db);
  return rc;
}
