/*
 * lease.h: a named lease in onceq_leases: one row per name that references
 * the holder's session with ON DELETE CASCADE, so the lease ends with the
 * session (a reaped or closed session gives it up). The coordinator elects
 * its leader with it (`onceq coordinator`, name "coordinator").
 *
 * Terms:
 *  - holder: the session named by the lease row. Taking a lease is an
 *    INSERT ... ON CONFLICT DO NOTHING, so at most one session holds it.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_LEASE_H
#define ONCEQ_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Take the lease name for session_id if it is free, then read who holds it:
 * two transactions of one statement each (run again on a restart).
 * *held: session_id holds it now. holder (may be NULL, holder_len >=
 * OQ_UUID_LEN + 1): the holder's session id, "" when none. A session that
 * is gone (reaped: the foreign key refuses the row) gives
 * OQ_ERR_SESSION_LOST.
 * Blocks: two round trips, bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_lease_try(oq_db *db, const char *name,
                                  const char *session_id, bool *held,
                                  char *holder, size_t holder_len);

#ifdef __cplusplus
}
#endif
#endif
