/* cmd_stats.c: `onceq stats`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_stats(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "stats", "not implemented yet");
}
