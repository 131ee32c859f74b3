/* cmd_list.c: `onceq list`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_list(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "list", "not implemented yet");
}
