/* cli.c: helpers shared by the onceq commands (cli.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "say.h"
#include "table.h"

/* The one way a command's error line leaves: cm_vsay (common/src/say.h),
 * credentials masked, one line. */
static void put_line(const char *cmd, const char *suffix, const char *fmt,
                     va_list ap) __attribute__((format(printf, 3, 0)));
static void put_line(const char *cmd, const char *suffix, const char *fmt,
                     va_list ap)
{
  cm_vsay("onceq", cmd, suffix, fmt, ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
  char suffix[64];
  snprintf(suffix, sizeof suffix, "; see `onceq %s%s--help`", cmd ? cmd : "",
           cmd ? " " : "");
  va_list ap;
  va_start(ap, fmt);
  put_line(cmd, suffix, fmt, ap);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  put_line(cmd, NULL, fmt, ap);
  va_end(ap);
  return code;
}

int cli_no_repeats(const char *cmd, int argc, char **argv,
                   const char *const *once)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *a = argv[i];
    size_t n = strcspn(a, "=");
    for (const char *const *o = once; *o; o++) {
      if (strlen(*o) != n || strncmp(a, *o, n) != 0)
        continue;
      for (int j = i + 1; j < argc && strcmp(argv[j], "--") != 0; j++)
        if (strncmp(argv[j], *o, n) == 0 &&
            (argv[j][n] == '\0' || argv[j][n] == '='))
          return cli_usage_error(cmd,
                                 "%s is given twice; give it once (a "
                                 "second one would silently win)",
                                 *o);
    }
  }
  return CLI_EXIT_OK;
}

/* The exit-code rule of every binary is cm_exit_for (common/src/say.h). */
int cli_exit_for(oq_err e)
{
  return cm_exit_for(e);
}

oq_db *cli_connect(const cli_globals *g, const char *cmd, int *rc)
{
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  oq_db_opts o = {.conninfo = g->db, .application_name = "onceq"};
  oq_err e = oq_db_open(&o, &db, err, sizeof err);
  if (e != OQ_OK) {
    *rc = cli_fail(cli_exit_for(e), cmd, "%s", err);
    return NULL;
  }
  /* a schema from a newer onceq: refuse before reading or writing it (other
   * errors of this check are left to the command's own statements) */
  if (oq_migrate_check_not_newer(db) == OQ_ERR_SCHEMA) {
    *rc = cli_fail(CLI_EXIT_USAGE, cmd, "%s", oq_db_errmsg(db));
    oq_db_close(db);
    return NULL;
  }
  return db;
}

/* Connect, run body, report its failure in one line, close. body has the
 * shape of an oq_tx_fn but need not open a transaction. */
static int with_db(const cli_globals *g, const char *cmd, oq_tx_fn body,
                   void *ud, const char *suffix)
{
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, cmd, &rc);
  if (!db)
    return rc;
  oq_err e = body(db, ud);
  if (e != OQ_OK)
    rc = cli_fail_db(db, e, cmd, suffix);
  oq_db_close(db);
  return rc;
}

typedef struct tx_call {
  oq_tx_fn fn;
  void *ud;
} tx_call;

static oq_err run_tx(oq_db *db, void *ud)
{
  tx_call *t = ud;
  return oq_db_transact(db, t->fn, t->ud);
}

int cli_transact(const cli_globals *g, const char *cmd, oq_tx_fn fn, void *ud,
                 const char *suffix)
{
  tx_call t = {fn, ud};
  return with_db(g, cmd, run_tx, &t, suffix);
}

typedef struct query_call {
  const char *sql;
  int nparams;
  const char *const *params;
  oq_row_fn fn;
  void *ud;
} query_call;

static oq_err run_query(oq_db *db, void *ud)
{
  query_call *q = ud;
  return oq_db_query(db, q->sql, q->nparams, q->params, q->fn, q->ud);
}

int cli_query(const cli_globals *g, const char *cmd, const char *sql,
              int nparams, const char *const *params, oq_row_fn fn, void *ud)
{
  query_call q = {sql, nparams, params, fn, ud};
  return with_db(g, cmd, run_query, &q, NULL);
}
