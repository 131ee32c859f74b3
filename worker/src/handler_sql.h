/*
 * handler_sql.h: the --sql handler. The statement runs inside the ack
 * transaction, so its effects commit if and only if the claim-checked
 * DELETE does: exactly-once effects in the same database. Parameters: $1
 * payload (jsonb), $2 item id (uuid), $3 queue (text), $4 attempt (int).
 *
 * Thread safety: one call per executor thread, on its own db.
 */
#ifndef ONCEQ_WORKER_HANDLER_SQL_H
#define ONCEQ_WORKER_HANDLER_SQL_H

#include "runtime.h"

/* Run j's statement and acknowledge it in one transaction; a failing
 * statement is a failed attempt. Settles j (the caller frees it). */
void wk_sql_handle(wk *w, oq_db *db, wk_job *j);

/* The same for n jobs of one session in ONE transaction (pipelined,
 * oq_ack_many_sql): an item's effect commits if and only if the item is
 * acknowledged; a failing statement fails that item's attempt only. A
 * batch that fails as a whole for a reason no item explains (a deferred
 * constraint at COMMIT) falls back to one transaction per item. Settles
 * every job (the caller frees them). */
void wk_sql_handle_batch(wk *w, oq_db *db, wk_job **jobs, size_t n);

#endif
