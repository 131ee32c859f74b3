/* cmd_coordinator.c: `onceq coordinator`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_coordinator(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "coordinator", "not implemented yet");
}
