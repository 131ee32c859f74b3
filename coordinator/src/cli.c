/* cli.c: helpers shared by the onceq commands (cli.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "onceq: ");
  if (cmd)
    fprintf(stderr, "%s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (cmd)
    fprintf(stderr, "; see `onceq %s --help`\n", cmd);
  else
    fprintf(stderr, "; see `onceq --help`\n");
  return CLI_EXIT_USAGE;
}

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "onceq: %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return code;
}

int cli_exit_for(oq_err e)
{
  return (e == OQ_ERR_CONFIG || e == OQ_ERR_AUTH || e == OQ_ERR_SCHEMA ||
          e == OQ_ERR_INVALID)
             ? CLI_EXIT_USAGE
             : CLI_EXIT_RUNTIME;
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
  return db;
}

void cli_hide_password(char *arg)
{
  char masked[1024];
  oq_conninfo_mask(arg, masked, sizeof masked);
  size_t len = strlen(arg), mlen = strlen(masked);
  if (strcmp(masked, arg) == 0)
    return;
  if (mlen <= len) {
    memcpy(arg, masked, mlen);
    memset(arg + mlen, ' ', len - mlen);
  } else {
    memset(arg, '*', len);
  }
}
