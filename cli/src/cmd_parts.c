/*
 * cmd_parts.c: `onceq parts` shows the static partition assignment (P,
 * each part's owner session, its ready and claimed items, and how evenly
 * the ready items spread over the owners); `onceq parts set P` changes the
 * cluster-wide partition count, which running sessions adopt on their next
 * round. Terms (slot, part, member, orphan) as in onceq/partition.h.
 *
 * imbalance = max / mean ready items per live owning session: 1.00 is
 * even, k means one of k owners holds everything that is ready. The JSON
 * document is the partitions view (query/src/views.c), which the
 * status page serves as /api/parts.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "table.h"
#include "views.h"

static const char parts_usage[] =
    "usage: onceq parts [--json]\n"
    "       onceq parts set P\n"
    "  show P (the cluster-wide partition count), each part's owner\n"
    "  session, its ready and claimed items, and the imbalance (max / mean\n"
    "  ready items per owning session; 1.00 is even)\n"
    "  set P   store P (1..1024); workers started with --partitioned adopt\n"
    "          it on their next round (about one poll interval)\n";

static int parts_set(const cli_globals *g, int argc, char **argv)
{
  long long want = 0;
  if (argc != 3)
    return cli_usage_error("parts", "parts set needs exactly one value, P");
  if (!cli_parse_int(argv[2], 1, OQ_PARTS_MAX, &want))
    return cli_usage_error("parts",
                           "P must be a whole number from 1 to %d, not '%s'",
                           OQ_PARTS_MAX, argv[2]);
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "parts", &rc);
  if (!db)
    return rc;
  int before = 0;
  bool was_set = false;
  oq_err e = oq_parts_get(db, &before, &was_set);
  if (e == OQ_ERR_CONFIG) {
    before = 0; /* an unusable stored value: setting it is the fix */
    e = OQ_OK;
  }
  if (e == OQ_OK)
    e = oq_parts_set(db, (int)want);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "parts", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (g->json) {
    cm_json j;
    cm_json_init(&j, stdout);
    cm_json_obj(&j, NULL);
    cm_json_int(&j, "partitions", want);
    if (before > 0)
      cm_json_int(&j, "previous", before);
    else
      cm_json_raw(&j, "previous", NULL);
    cm_json_bool(&j, "previous_set", was_set);
    cm_json_end(&j);
  } else {
    printf("partitions: %d%s -> %lld; partitioned sessions adopt it on "
           "their next round\n",
           before, was_set ? "" : " (default)", want);
  }
out:
  oq_db_close(db);
  return rc;
}

static int print_text(const oq_parts_report *r)
{
  if (r->is_set)
    printf("partitions: %d\n", r->partitions);
  else
    printf("partitions: %d (default; not set: `onceq parts set P`)\n",
           r->partitions);
  printf("members: %d live partitioned session(s); %d own parts; %d "
         "part(s) without a live owner\n",
         r->members, r->owners, r->unowned);
  printf("ready: %ld; imbalance %.2f (max / mean ready per owner; 1.00 is "
         "even)\n",
         qv_parts_ready(r), r->imbalance);
  if (r->stale_rows > 0)
    printf("draining: %ld ownership row(s) >= P, taken under a larger P\n",
           r->stale_rows);
  cm_table *t = cm_table_new();
  if (!t)
    return -1;
  cm_table_col(t, "PART", CM_COL_RIGHT);
  cm_table_col(t, "SLOTS", 0);
  cm_table_col(t, "READY", CM_COL_RIGHT);
  cm_table_col(t, "CLAIMED", CM_COL_RIGHT);
  cm_table_col(t, "PID", CM_COL_RIGHT);
  cm_table_col(t, "HOST", 0);
  cm_table_col(t, "OWNER", CM_COL_FLEX);
  for (int x = 0; x < r->partitions; x++) {
    const oq_part_info *pi = &r->parts[x];
    cm_table_cellf(t, "%d", pi->part);
    cm_table_cellf(t, "%d-%d", pi->slot_lo, pi->slot_hi - 1);
    cm_table_cellf(t, "%ld", pi->ready);
    cm_table_cellf(t, "%ld", pi->claimed);
    if (pi->owner[0]) {
      cm_table_cellf(t, "%d", pi->owner_pid);
      cm_table_cell(t, pi->owner_host);
      cm_table_cellf(t, "%s%s", pi->owner, pi->owner_live ? "" : " (expired)");
    } else {
      cm_table_cell(t, NULL);
      cm_table_cell(t, NULL);
      cm_table_cell(t, "(none)");
    }
  }
  int rc = cm_table_print(t, stdout, 0);
  cm_table_free(t);
  return rc;
}

int cmd_parts(const cli_globals *g, int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(parts_usage, stdout);
      return CLI_EXIT_OK;
    }
  if (argc >= 2 && strcmp(argv[1], "set") == 0)
    return parts_set(g, argc, argv);
  if (argc > 1)
    return cli_usage_error("parts", "unknown argument %s", argv[1]);
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "parts", &rc);
  if (!db)
    return rc;
  oq_parts_report *r = NULL;
  oq_err e = oq_parts_report_read(db, &r);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "parts", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (g->json)
    qv_view_parts(stdout, r);
  else if (print_text(r) != 0)
    rc = cli_fail(CLI_EXIT_RUNTIME, "parts", "out of memory");
out:
  oq_parts_report_free(r);
  oq_db_close(db);
  return rc;
}
