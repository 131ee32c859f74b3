/*
 * cmd_cancel.c: `onceq cancel ID...`: delete live items from onceq_items.
 *
 * A running item is deleted too: its worker's ack is then rejected (the
 * ack's `DELETE ... WHERE id = $1 AND claim = $2` finds no row), so a
 * cancelled item is never acknowledged and its ack-transaction writes never
 * commit. External effects already started (an HTTP call, a command) are not
 * undone; the worker stops caring about the item. Each cancel leaves a
 * 'cancelled' row in onceq_results (oq_cancel, onceq/cancel.h).
 *
 * All or nothing: in one transaction every id is looked up and locked
 * (FOR UPDATE, so an ack in flight waits for us and then loses); if any id
 * is not a live item, nothing is deleted and the exit code is 2.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "itemids.h"
#include "table.h"

typedef struct cancel_ctx {
  const char *const *ids;
  size_t nids;
  /* up to nids entries, filled by each run of the transaction; related:
   * the session holding a running item */
  cli_id_where *f;
  size_t nf, nlive;
  long deleted;
} cancel_ctx;

static oq_err on_found(void *ud, int ncols, const char *const *v)
{
  cancel_ctx *c = ud;
  if (ncols < 3 || c->nf >= c->nids)
    return OQ_ERR_SQL;
  cli_id_where_set(&c->f[c->nf++], v);
  return OQ_OK;
}

/* The transaction body; may run again on a restart. */
static oq_err cancel_tx(oq_db *db, void *ud)
{
  cancel_ctx *c = ud;
  c->nf = 0;
  c->deleted = 0;
  oq_err e = oq_cancel(db, c->ids, c->nids, on_found, c, &c->deleted);
  c->nlive = 0;
  for (size_t k = 0; k < c->nf; k++)
    c->nlive += strcmp(c->f[k].where, "live") == 0;
  return e;
}

/* The entry for id (case-insensitive: the database prints lower case). */
static const cli_id_where *find(const cancel_ctx *c, const char *id)
{
  for (size_t k = 0; k < c->nf; k++)
    if (strcasecmp(c->f[k].id, id) == 0)
      return &c->f[k];
  return NULL;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq cancel ID... [--json]\n"
          "  delete live items (ready, scheduled or running). A running\n"
          "  item's worker can no longer acknowledge it: its ack is\n"
          "  rejected, so its ack-transaction writes never commit.\n"
          "  All or nothing: when any ID is not a live item, nothing is\n"
          "  deleted and the exit code is 2. Dead items: `onceq retry` or\n"
          "  leave them to retention.\n");
}

int cmd_cancel(const cli_globals *g, int argc, char **argv)
{
  int rc = CLI_EXIT_OK;
  cli_ids ids;
  cancel_ctx c = {0};
  cm_json j;
  if (!cli_ids_init(&ids, (size_t)argc)) {
    cli_ids_free(&ids);
    return cli_fail(CLI_EXIT_RUNTIME, "cancel", "out of memory");
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      goto out;
    }
    rc = cli_ids_add(&ids, "cancel", argv[i], "nothing cancelled");
    if (rc != CLI_EXIT_OK)
      goto out;
  }
  size_t n = ids.n;
  if (n == 0) {
    rc = cli_usage_error("cancel", "give the ID of each item to cancel");
    goto out;
  }

  c.ids = ids.v;
  c.nids = n;
  c.f = calloc(n, sizeof *c.f);
  if (!c.f) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "cancel", "out of memory");
    goto out;
  }
  rc = cli_transact(g, "cancel", cancel_tx, &c, "nothing cancelled");
  if (rc != CLI_EXIT_OK)
    goto out;
  if (c.nlive < n) { /* one line per id that is not live */
    for (size_t k = 0; k < n; k++) {
      const cli_id_where *f = find(&c, ids.v[k]);
      const char *where = f ? f->where : "unknown";
      if (strcmp(where, "dead") == 0)
        fprintf(stderr,
                "onceq: cancel: %s is dead, not live (`onceq retry` runs it "
                "again); nothing cancelled\n",
                ids.v[k]);
      else if (strcmp(where, "done") == 0)
        fprintf(stderr,
                "onceq: cancel: %s was already acknowledged; nothing "
                "cancelled\n",
                ids.v[k]);
      else if (strcmp(where, "live") != 0)
        fprintf(stderr, "onceq: cancel: no item %s; nothing cancelled\n",
                ids.v[k]);
    }
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  if (g->json) {
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_int(&j, "cancelled", c.deleted);
    cm_json_arr(&j, "items");
  }
  long running = 0;
  for (size_t k = 0; k < n; k++) {
    const cli_id_where *f = find(&c, ids.v[k]);
    const char *claim = f && f->related[0] ? f->related : NULL;
    running += claim != NULL;
    if (g->json) {
      cm_json_obj(&j, NULL);
      cm_json_str(&j, "id", f ? f->id : ids.v[k]);
      cm_json_bool(&j, "was_running", claim != NULL);
      cm_json_str(&j, "session", claim);
      cm_json_end(&j);
    } else {
      printf("cancelled %s%s\n", f ? f->id : ids.v[k],
             claim ? " (was running)" : "");
    }
  }
  if (g->json) {
    cm_json_end(&j);
    cm_json_end(&j);
  } else if (running > 0) {
    printf("%ld item%s cancelled; %ld %s running: %s ack will be "
           "rejected\n",
           c.deleted, c.deleted == 1 ? "" : "s", running,
           running == 1 ? "was" : "were",
           running == 1 ? "its worker's" : "their workers'");
  } else {
    printf("%ld item%s cancelled\n", c.deleted, c.deleted == 1 ? "" : "s");
  }
out:
  free(c.f);
  cli_ids_free(&ids);
  return rc;
}
