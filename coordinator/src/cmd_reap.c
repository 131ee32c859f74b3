/* cmd_reap.c: `onceq reap`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_reap(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "reap", "not implemented yet");
}
