/* lease.c: the coordinator lease row (lease.h), through libonceq's named
 * lease (onceq/lease.h). */
#include "lease.h"

oq_err co_lease_try(oq_db *db, const char *session_id, bool *leader,
                    char *holder, size_t holder_len)
{
  return oq_lease_try(db, CO_LEASE_NAME, session_id, leader, holder,
                      holder_len);
}
