/* itemids.c: item IDs from the command line and where they are
 * (itemids.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "itemids.h"
#include "table.h"

bool cli_ids_init(cli_ids *ids, size_t max)
{
  memset(ids, 0, sizeof *ids);
  ids->v = calloc(max ? max : 1, sizeof *ids->v);
  return ids->v != NULL;
}

void cli_ids_free(cli_ids *ids)
{
  free(ids->v);
  memset(ids, 0, sizeof *ids);
}

int cli_id_check(const char *cmd, const char *id, const char *nothing_done)
{
  if (cli_is_uuid(id))
    return CLI_EXIT_OK;
  return cli_fail(CLI_EXIT_USAGE, cmd,
                  "no item %s: an item id is a UUID like "
                  "0b5e2a4c-93f1-4c6e-9a51-2d8f3c7a1e60%s%s",
                  id, nothing_done ? "; " : "",
                  nothing_done ? nothing_done : "");
}

int cli_ids_add(cli_ids *ids, const char *cmd, const char *arg,
                const char *nothing_done)
{
  if (arg[0] == '-')
    return cli_usage_error(cmd, "unknown option %s", arg);
  int rc = cli_id_check(cmd, arg, nothing_done);
  if (rc != CLI_EXIT_OK)
    return rc;
  for (size_t k = 0; k < ids->n; k++)
    if (strcasecmp(ids->v[k], arg) == 0)
      return CLI_EXIT_OK;
  ids->v[ids->n++] = arg;
  return CLI_EXIT_OK;
}

void cli_id_where_set(cli_id_where *w, const char *const *v)
{
  snprintf(w->id, sizeof w->id, "%s", v[0] ? v[0] : "");
  snprintf(w->where, sizeof w->where, "%s", v[1] ? v[1] : "unknown");
  snprintf(w->related, sizeof w->related, "%s", v[2] ? v[2] : "");
}
