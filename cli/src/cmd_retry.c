/*
 * cmd_retry.c: `onceq retry ID...` and `onceq retry --all-dead [--queue Q]`:
 * move dead items (onceq_dead) back to onceq_items, ready now, with the same
 * id, payload, priority, max_attempts, unique_key and created_at, attempts
 * reset to 0 and last_error kept (it says why the item died).
 *
 * One transaction (oq_retry_dead, oq_retry_all_dead: onceq/retry.h): a
 * DELETE ... RETURNING from onceq_dead feeds the INSERT, so an item is
 * never in both tables, nor in neither.
 *
 * A dead item's unique_key may meanwhile be held by a live item: moving it
 * would break the key's promise (at most one live item per key). With
 * explicit ids that is an error (exit 2, nothing moved); --all-dead leaves
 * such items dead and says how many.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "itemids.h"
#include "table.h"

typedef struct check {
  cli_id_where w; /* related: the live item holding the unique key */
  char *key;      /* the unique key (owned), NULL if none */
} check;

typedef struct retry_ctx {
  const char *const *ids; /* NULL with --all-dead */
  const char *queue;      /* --queue with --all-dead; NULL: all */
  size_t nids;
  check *chk; /* nids entries */
  size_t nchk;
  bool blocked; /* an id is not dead or its key is taken: nothing moved */
  char **moved; /* ids moved, owned */
  size_t nmoved, cap_moved;
  long kept; /* --all-dead: left dead because the key is taken */
} retry_ctx;

static void reset(retry_ctx *c)
{
  for (size_t k = 0; k < c->nchk; k++) {
    free(c->chk[k].key);
    c->chk[k].key = NULL;
  }
  c->nchk = 0;
  for (size_t k = 0; k < c->nmoved; k++)
    free(c->moved[k]);
  c->nmoved = 0;
  c->blocked = false;
  c->kept = 0;
}

static oq_err on_check(void *ud, int ncols, const char *const *v)
{
  retry_ctx *c = ud;
  if (ncols < 4 || c->nchk >= c->nids)
    return OQ_ERR_SQL;
  check *k = &c->chk[c->nchk++];
  cli_id_where_set(&k->w, v);
  k->key = v[3] ? strdup(v[3]) : NULL;
  if (v[3] && !k->key)
    return OQ_ERR_NOMEM;
  return OQ_OK;
}

static oq_err on_moved(void *ud, int ncols, const char *const *v)
{
  retry_ctx *c = ud;
  if (ncols < 1 || !v[0])
    return OQ_ERR_SQL;
  if (c->nmoved == c->cap_moved) {
    size_t cap = c->cap_moved ? c->cap_moved * 2 : 64;
    char **m = realloc(c->moved, cap * sizeof *m);
    if (!m)
      return OQ_ERR_NOMEM;
    c->moved = m;
    c->cap_moved = cap;
  }
  c->moved[c->nmoved] = strdup(v[0]);
  if (!c->moved[c->nmoved])
    return OQ_ERR_NOMEM;
  c->nmoved++;
  return OQ_OK;
}

/* The transaction body; may run again on a restart. */
static oq_err retry_tx(oq_db *db, void *ud)
{
  retry_ctx *c = ud;
  reset(c);
  if (c->ids)
    return oq_retry_dead(db, c->ids, c->nids, on_check, on_moved, c,
                         &c->blocked);
  return oq_retry_all_dead(db, c->queue, on_moved, c, &c->kept);
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq retry ID... [--json]\n"
          "       onceq retry --all-dead [--queue Q] [--json]\n"
          "  move dead items back to ready, in one transaction: same id,\n"
          "  attempts reset to 0, run_at now, last_error kept\n"
          "  --all-dead   every dead item (of queue Q with --queue)\n"
          "  An ID that is not dead, or whose unique_key a live item holds\n"
          "  now, is an error (exit 2) and nothing is moved; --all-dead\n"
          "  leaves such items dead and says how many.\n");
}

int cmd_retry(const cli_globals *g, int argc, char **argv)
{
  bool all = false;
  const char *queue = NULL, *val = NULL;
  int rc = CLI_EXIT_OK;
  cli_ids ids;
  retry_ctx c = {0};
  if (!cli_ids_init(&ids, (size_t)argc)) {
    cli_ids_free(&ids);
    return cli_fail(CLI_EXIT_RUNTIME, "retry", "out of memory");
  }
  static const char *const once[] = {"--queue", NULL};
  int rc0 = cli_no_repeats("retry", argc, argv, once);
  if (rc0 != CLI_EXIT_OK) {
    cli_ids_free(&ids);
    return rc0;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      goto out;
    } else if (strcmp(argv[i], "--all-dead") == 0) {
      all = true;
    } else if (cli_opt(argc, argv, &i, "--queue", &val)) {
      if (!val || !*val) {
        rc = cli_usage_error("retry", "--queue needs a queue name");
        goto out;
      }
      queue = val;
    } else {
      rc = cli_ids_add(&ids, "retry", argv[i], "nothing retried");
      if (rc != CLI_EXIT_OK)
        goto out;
    }
  }
  size_t n = ids.n;
  if (all && n > 0) {
    rc = cli_usage_error("retry", "give IDs or --all-dead, not both");
    goto out;
  }
  if (!all && n == 0) {
    rc = cli_usage_error("retry", "give the IDs of dead items, or --all-dead");
    goto out;
  }
  if (queue && !all) {
    rc = cli_usage_error("retry", "--queue goes with --all-dead");
    goto out;
  }
  if (n > 0) {
    c.ids = ids.v;
    c.chk = calloc(n, sizeof *c.chk);
    if (!c.chk) {
      rc = cli_fail(CLI_EXIT_RUNTIME, "retry", "out of memory");
      goto out;
    }
    c.nids = n;
  }
  c.queue = queue;

  rc = cli_transact(g, "retry", retry_tx, &c, "nothing retried");
  if (rc != CLI_EXIT_OK)
    goto out;
  if (c.blocked) { /* one line per id that cannot move */
    for (size_t k = 0; k < c.nchk; k++) {
      const check *x = &c.chk[k];
      const cli_id_where *w = &x->w;
      if (strcmp(w->where, "live") == 0)
        fprintf(stderr, "onceq: retry: %s is live, not dead; nothing retried\n",
                w->id);
      else if (strcmp(w->where, "done") == 0)
        fprintf(stderr,
                "onceq: retry: %s was acknowledged, not dead; nothing "
                "retried\n",
                w->id);
      else if (strcmp(w->where, "unknown") == 0)
        fprintf(stderr, "onceq: retry: no item %s; nothing retried\n", w->id);
      else if (w->related[0])
        cm_say("onceq", "retry", NULL, /* the key: escaped */
               "%s: live item %s holds its unique key \"%s\" (cancel that "
               "one first); nothing retried",
               w->id, w->related, x->key ? x->key : "");
    }
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_int(&j, "retried", (long long)c.nmoved);
    cm_json_arr(&j, "ids");
    for (size_t k = 0; k < c.nmoved; k++)
      cm_json_str(&j, NULL, c.moved[k]);
    cm_json_end(&j);
    cm_json_int(&j, "kept_dead", c.kept);
    cm_json_end(&j);
  } else {
    if (!all)
      for (size_t k = 0; k < c.nmoved; k++)
        printf("retried %s\n", c.moved[k]);
    printf("%zu item%s moved from dead back to ready (attempts reset to 0)\n",
           c.nmoved, c.nmoved == 1 ? "" : "s");
  }
  fflush(stdout);
  if (c.kept > 0)
    fprintf(stderr,
            "onceq: retry: %ld dead item%s kept: a live item holds %s unique "
            "key\n",
            c.kept, c.kept == 1 ? "" : "s", c.kept == 1 ? "its" : "their");
out:
  reset(&c);
  free(c.moved);
  free(c.chk);
  cli_ids_free(&ids);
  return rc;
}
