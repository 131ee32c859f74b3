/* cmd_retry.c: `onceq retry`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_retry(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "retry", "not implemented yet");
}
