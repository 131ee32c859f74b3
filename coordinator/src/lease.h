/*
 * lease.h: leadership among `onceq coordinator` instances through one row
 * of onceq_leases (name = CO_LEASE_NAME) that references the leader's
 * session with ON DELETE CASCADE.
 *
 * Terms:
 *  - leader: the session named by the lease row. Taking the lease is
 *    INSERT ... ON CONFLICT DO NOTHING, so at most one session holds it.
 *  - failover: when the leader stops heartbeating, any reaper deletes its
 *    session and the cascade deletes the lease in the same statement; the
 *    next co_lease_try of another instance then takes it. A leader that
 *    exits deletes its session, which gives the lease up at once.
 *
 * Leadership only decides who does the janitor work. Nothing it does
 * relies on there never being two leaders for a moment: reaping and
 * retention are idempotent, schedules fire through a compare-and-set, and
 * notifications are marked with a conditional UPDATE.
 *
 * Thread safety: uses the caller's db.
 */
#ifndef ONCEQ_COORD_LEASE_H
#define ONCEQ_COORD_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#include "onceq/onceq.h"

#define CO_LEASE_NAME "coordinator"

/*
 * Take the lease for session_id if it is free, then read who holds it.
 * *leader: session_id holds it now. holder (may be NULL, holder_len >=
 * OQ_UUID_LEN + 1): the holder's session id, "" when none. A session that
 * is gone (reaped) gives OQ_ERR_SESSION_LOST.
 */
OQ_MUST_CHECK oq_err co_lease_try(oq_db *db, const char *session_id,
                                  bool *leader, char *holder,
                                  size_t holder_len);

#endif
