/* lease.c: the coordinator lease row (lease.h). */
#include <stdio.h>
#include <string.h>

#include "rows.h"
#include "lease.h"

static const char SQL_TAKE[] =
    "INSERT INTO onceq_leases (name, session_id) VALUES ($1, $2::uuid)"
    " ON CONFLICT (name) DO NOTHING";
static const char SQL_HOLDER[] =
    "SELECT session_id::text FROM onceq_leases WHERE name = $1";

oq_err co_lease_try(oq_db *db, const char *session_id, bool *leader,
                    char *holder, size_t holder_len)
{
  const char *take[2] = {CO_LEASE_NAME, session_id};
  const char *name[1] = {CO_LEASE_NAME};
  qv_rows r = {0};
  *leader = false;
  if (holder && holder_len)
    holder[0] = '\0';
  oq_err e = qv_exec(db, SQL_TAKE, 2, take, NULL);
  if (e != OQ_OK) {
    /* our session row is gone: the FK refuses the lease */
    if (oq_db_sqlstate_is(db, OQ_SQLSTATE_FOREIGN_KEY_VIOLATION))
      return OQ_ERR_SESSION_LOST;
    return e;
  }
  e = qv_query(db, SQL_HOLDER, 1, name, &r);
  if (e == OQ_OK) {
    const char *h = qv_rows_get(&r, 0, 0);
    if (h) {
      *leader = strcmp(h, session_id) == 0;
      if (holder && holder_len)
        snprintf(holder, holder_len, "%s", h);
    }
  }
  qv_rows_free(&r);
  return e;
}
