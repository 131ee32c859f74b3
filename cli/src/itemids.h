/*
 * itemids.h: the item IDs an operator names on the command line (cancel,
 * retry, show), and what a command learns about each one.
 *
 * Terms:
 *  - ID list: the operands of cancel or retry, each a UUID in its
 *    canonical text form, repeats dropped (compared case-insensitively, as
 *    the database compares UUIDs), in the order first given. The library
 *    (oq_cancel, oq_retry_dead) sends it as one uuid[] array, so one
 *    statement handles every ID.
 *  - where: the table an ID is found in: live (onceq_items), dead
 *    (onceq_dead), done (the onceq_done history) or unknown.
 *
 * Thread safety: a cli_ids is used by one thread.
 */
#ifndef ONCEQ_COORD_ITEMIDS_H
#define ONCEQ_COORD_ITEMIDS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_ids {
  const char **v; /* the IDs as given (into argv), first seen first */
  size_t n;
} cli_ids;

/* An empty list with room for max IDs (argc is always enough). false when
 * out of memory. Free with cli_ids_free, also after a failure. */
bool cli_ids_init(cli_ids *ids, size_t max);
void cli_ids_free(cli_ids *ids);

/*
 * Take one operand of command cmd: an option ("-...") no one recognised is
 * a usage error, anything but a UUID is "no item ..." ending with
 * "; <nothing_done>" (e.g. "nothing cancelled"); either prints one line
 * and gives CLI_EXIT_USAGE. A repeat is dropped. Else CLI_EXIT_OK.
 */
int cli_ids_add(cli_ids *ids, const char *cmd, const char *arg,
                const char *nothing_done);

/* CLI_EXIT_OK when id is a UUID; else print "no item ID: an item id is a
 * UUID like ...", ending "; <nothing_done>" unless that is NULL, and give
 * CLI_EXIT_USAGE. */
int cli_id_check(const char *cmd, const char *id, const char *nothing_done);

/* One row of a lookup statement that says where each ID is: the ID as the
 * database prints it, where, and one more id that explains it. */
typedef struct cli_id_where {
  char id[40];
  char where[16];   /* live | dead | done | unknown */
  char related[40]; /* e.g. the session or item holding it; "" if none */
} cli_id_where;

/* Copy a lookup row's first three columns (id, where, related) into *w;
 * SQL NULL gives "" (where: "unknown"). */
void cli_id_where_set(cli_id_where *w, const char *const *v);

#endif
