/*
 * say.c: one-line error reports (say.h).
 */
#include <stdio.h>

#include "logsink.h"
#include "onceq/text.h"
#include "say.h"

void cm_vsay(const char *prog, const char *cmd, const char *suffix,
             const char *fmt, va_list ap)
{
  char masked[2048], safe[4096];
  vsnprintf(masked, sizeof masked, fmt, ap);
  cm_logsink_scrub(masked, sizeof masked); /* the rule, then known secrets */
  /* the message echoes what the user or the server gave (a flag's value,
   * a name): a newline in it would split the one line, an ESC would
   * reach the terminal */
  oq_text_escape(safe, sizeof safe, masked);
  fprintf(stderr, "%s: %s%s%s%s\n", prog, cmd ? cmd : "", cmd ? ": " : "", safe,
          suffix ? suffix : "");
}

void cm_say(const char *prog, const char *cmd, const char *suffix,
            const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  cm_vsay(prog, cmd, suffix, fmt, ap);
  va_end(ap);
}

int cm_exit_for(oq_err e)
{
  return (e == OQ_ERR_CONFIG || e == OQ_ERR_SCHEMA || e == OQ_ERR_INVALID)
             ? CM_EXIT_USAGE
             : CM_EXIT_RUNTIME;
}
