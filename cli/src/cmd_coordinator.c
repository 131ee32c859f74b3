/*
 * cmd_coordinator.c: `onceq coordinator`, the coordinator daemon
 * (coordinator/include/coordinator.h) with the global --db.
 */
#include "cli.h"
#include "coordinator.h"

int cmd_coordinator(const cli_globals *g, int argc, char **argv)
{
  return co_coordinator_main(g->db, argc, argv);
}
