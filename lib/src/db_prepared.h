/*
 * db_prepared.h: the prepared-statement cache (db_prepared.c): each library
 * statement that runs per claim or per ack is parsed once per connection.
 * Included through internal.h; see db_state.h for the connection files.
 */
#ifndef ONCEQ_DB_PREPARED_H
#define ONCEQ_DB_PREPARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

/*
 * Prepare sql on db's connection unless it is already (by text), and put
 * its name in name. Statements repeated per item (a batch's handler
 * statement, the claim check) are then parsed and planned once per
 * connection instead of once per item. At most OQ__DB_PREPARED_MAX per
 * connection; a reconnect forgets them. *ncols (may be NULL) gets the
 * number of columns the statement returns (0: no rows, e.g. an INSERT
 * without RETURNING).
 */
#define OQ__DB_PREPARED_MAX 16
oq_err oq__db_prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols);

/* A statement of ours vanished before its Bind (26000): a transaction
 * pooler is in the way; db runs unnamed statements from now on, on every
 * reconnect too, and logs so once. */
void oq__db_vanished(oq_db *db);

#endif
