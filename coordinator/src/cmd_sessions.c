/* cmd_sessions.c: `onceq sessions`. Not written yet: being built for the operator CLI issue. */
#include "cli.h"

int cmd_sessions(const cli_globals *g, int argc, char **argv)
{
  (void)g;
  (void)argc;
  (void)argv;
  return cli_fail(CLI_EXIT_RUNTIME, "sessions", "not implemented yet");
}
