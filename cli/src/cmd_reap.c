/*
 * cmd_reap.c: `onceq reap`: one reap pass (oq_reap), reporting what it
 * released: each expired session with the number of items it held, and the
 * items dead-lettered because they were abandoned on their last attempt.
 *
 * One transaction: the expired sessions are read and locked (FOR UPDATE)
 * with their claim counts, then oq_reap deletes them. The lock keeps the
 * report exact: a heartbeat cannot revive a listed session and its worker
 * cannot claim more items (the claim's foreign-key check waits for the
 * lock) before the delete; now() is the same for both statements.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "table.h"
#include "views.h"

typedef struct reaped {
  char id[40];
  char *host; /* owned */
  long pid;
  double beat_ago_s, expiry_s;
  long claims;
} reaped;

typedef struct reap_ctx {
  reaped *r;
  size_t n, cap;
  int nreaped, ndead; /* from oq_reap */
} reap_ctx;

static void reset(reap_ctx *c)
{
  for (size_t k = 0; k < c->n; k++)
    free(c->r[k].host);
  c->n = 0;
  c->nreaped = c->ndead = 0;
}

static oq_err on_expired(void *ud, int ncols, const char *const *v)
{
  reap_ctx *c = ud;
  if (ncols < QV_EXPIRED_NCOLS)
    return OQ_ERR_SQL;
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    reaped *r = realloc(c->r, cap * sizeof *r);
    if (!r)
      return OQ_ERR_NOMEM;
    c->r = r;
    c->cap = cap;
  }
  reaped *r = &c->r[c->n];
  snprintf(r->id, sizeof r->id, "%s", v[QV_EXPIRED_ID] ? v[QV_EXPIRED_ID] : "");
  r->host = strdup(v[QV_EXPIRED_HOST] ? v[QV_EXPIRED_HOST] : "");
  if (!r->host)
    return OQ_ERR_NOMEM;
  r->pid = v[QV_EXPIRED_PID] ? strtol(v[QV_EXPIRED_PID], NULL, 10) : 0;
  r->beat_ago_s = cm_atof(v[QV_EXPIRED_BEAT_AGO], NAN);
  r->expiry_s = cm_atof(v[QV_EXPIRED_EXPIRY], NAN);
  r->claims = v[QV_EXPIRED_CLAIMS] ? strtol(v[QV_EXPIRED_CLAIMS], NULL, 10) : 0;
  c->n++;
  return OQ_OK;
}

/* The transaction body; may run again on a restart. */
static oq_err reap_tx(oq_db *db, void *ud)
{
  reap_ctx *c = ud;
  reset(c);
  oq_err e = qv_expired_sessions_lock(db, on_expired, c);
  if (e != OQ_OK)
    return e;
  e = oq_reap(db, &c->nreaped, &c->ndead);
  /* oq_reap retries a statement on 40001 by itself; inside our
   * transaction that retry meets "transaction aborted" (25P02): the
   * transaction as a whole must run again. */
  if (e != OQ_OK && oq_db_sqlstate_is(db, OQ_SQLSTATE_IN_FAILED_TRANSACTION))
    return OQ_ERR_RETRY;
  return e;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq reap [--json]\n"
          "  one reap pass: delete the sessions whose last heartbeat is\n"
          "  older than their expiry (the database's clock decides), which\n"
          "  releases every item they held, and move items abandoned on\n"
          "  their last attempt to onceq_dead. Prints each reaped session\n"
          "  (the first 8 characters of its id; --json has all of it) and\n"
          "  how many items it held.\n"
          "  Safe to run any time, beside workers and coordinators.\n");
}

int cmd_reap(const cli_globals *g, int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    return cli_usage_error("reap", "unknown argument %s", argv[i]);
  }
  reap_ctx c = {0};
  int rc = cli_transact(g, "reap", reap_tx, &c, NULL);
  if (rc != CLI_EXIT_OK)
    goto out;
  long released = 0;
  for (size_t k = 0; k < c.n; k++)
    released += c.r[k].claims;
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_arr(&j, "sessions");
    for (size_t k = 0; k < c.n; k++) {
      cm_json_obj(&j, NULL);
      cm_json_str(&j, "id", c.r[k].id);
      cm_json_str(&j, "host", c.r[k].host);
      cm_json_int(&j, "pid", c.r[k].pid);
      cm_json_num(&j, "heartbeat_age_s", c.r[k].beat_ago_s);
      cm_json_num(&j, "expiry_s", c.r[k].expiry_s);
      cm_json_int(&j, "claims_released", c.r[k].claims);
      cm_json_end(&j);
    }
    cm_json_end(&j);
    cm_json_int(&j, "sessions_reaped", c.nreaped);
    cm_json_int(&j, "items_released", released);
    cm_json_int(&j, "items_dead", c.ndead);
    cm_json_end(&j);
    goto out;
  }
  if (c.n > 0) {
    cm_table *t = cm_table_new();
    cm_table_col(t, "SESSION", 0);
    cm_table_col(t, "HOST", CM_COL_FLEX);
    cm_table_col(t, "PID", CM_COL_RIGHT);
    cm_table_col(t, "HEARTBEAT", CM_COL_RIGHT);
    cm_table_col(t, "EXPIRY", CM_COL_RIGHT);
    cm_table_col(t, "RELEASED", CM_COL_RIGHT);
    for (size_t k = 0; k < c.n; k++) {
      char beat[24], exp[16], id8[9];
      snprintf(id8, sizeof id8, "%.8s", c.r[k].id);
      cm_table_cell(t, id8);
      cm_table_cell(t, c.r[k].host[0] ? c.r[k].host : "-");
      cm_table_cellf(t, "%ld", c.r[k].pid);
      cm_table_cell(t, cm_fmt_ago(beat, sizeof beat, c.r[k].beat_ago_s));
      cm_table_cell(t, cm_fmt_dur(exp, sizeof exp, c.r[k].expiry_s));
      cm_table_cellf(t, "%ld", c.r[k].claims);
    }
    int prc = cm_table_print(t, stdout, 0);
    cm_table_free(t);
    if (prc != 0) {
      rc = cli_fail(CLI_EXIT_RUNTIME, "reap", "out of memory");
      goto out;
    }
  }
  if (c.nreaped == 0 && c.ndead == 0)
    printf("nothing to reap: no session is past its expiry\n");
  else
    printf("%d session%s reaped, %ld item%s released, %d abandoned item%s "
           "moved to dead\n",
           c.nreaped, c.nreaped == 1 ? "" : "s", released,
           released == 1 ? "" : "s", c.ndead, c.ndead == 1 ? "" : "s");
out:
  reset(&c);
  free(c.r);
  return rc;
}
