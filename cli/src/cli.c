/* cli.c: helpers shared by the onceq commands (cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "say.h"

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

bool cli_parse_int(const char *s, long long min, long long max, long long *out)
{
  if (!s || !*s)
    return false;
  const char *p = s;
  if (*p == '-' || *p == '+')
    p++;
  if (!*p)
    return false;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9')
      return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return false;
  if (a[n] == '=') {
    *val = a + n + 1;
    return true;
  }
  if (a[n] != '\0')
    return false;
  if (*i + 1 < argc) {
    *i += 1;
    *val = argv[*i];
  } else {
    *val = NULL;
  }
  return true;
}

bool cli_is_uuid(const char *s)
{
  if (!s || strlen(s) != 36)
    return false;
  for (int i = 0; i < 36; i++) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-')
        return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                 (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

int cli_fail_db(oq_db *db, oq_err e, const char *cmd, const char *suffix)
{
  const char *sep = suffix && *suffix ? "; " : "";
  if (!suffix)
    suffix = "";
  if (e == OQ_ERR_NOMEM)
    return cli_fail(CLI_EXIT_RUNTIME, cmd, "out of memory%s%s", sep, suffix);
  if (e == OQ_ERR_SCHEMA || oq_db_sqlstate_is(db, OQ_SQLSTATE_UNDEFINED_TABLE))
    return cli_fail(CLI_EXIT_USAGE, cmd,
                    "the onceq tables are missing in this database; run "
                    "`onceq migrate` first%s%s",
                    sep, suffix);
  return cli_fail(cli_exit_for(e), cmd, "%s%s%s", oq_db_errmsg(db), sep,
                  suffix);
}
