/*
 * lease.c: a named lease row in onceq_leases (lease.h): the only code that
 * writes that table.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const char SQL_TAKE[] =
    "INSERT INTO onceq_leases (name, session_id) VALUES ($1, $2::uuid)"
    " ON CONFLICT (name) DO NOTHING";
static const char SQL_HOLDER[] =
    "SELECT session_id::text FROM onceq_leases WHERE name = $1";

typedef struct lease_stmt {
  const char *const *params;
  char holder[OQ_UUID_LEN + 1]; /* SQL_HOLDER's answer, "" when none */
} lease_stmt;

static oq_err take_tx(oq_db *db, void *ud)
{
  lease_stmt *s = ud;
  return oq_db_exec(db, SQL_TAKE, 2, s->params, NULL);
}

static oq_err read_holder(void *ud, int ncols, const char *const *vals)
{
  lease_stmt *s = ud;
  if (ncols > 0 && vals[0])
    snprintf(s->holder, sizeof s->holder, "%s", vals[0]);
  return OQ_OK;
}

static oq_err holder_tx(oq_db *db, void *ud)
{
  lease_stmt *s = ud;
  s->holder[0] = '\0'; /* a restarted run answers afresh */
  return oq_db_query(db, SQL_HOLDER, 1, s->params, read_holder, s);
}

oq_err oq_lease_try(oq_db *db, const char *name, const char *session_id,
                    bool *held, char *holder, size_t holder_len)
{
  const char *take[2] = {name, session_id};
  const char *who[1] = {name};
  lease_stmt s = {.params = take};
  *held = false;
  if (holder && holder_len)
    holder[0] = '\0';
  oq_err e = oq_db_transact(db, take_tx, &s);
  if (e != OQ_OK) {
    /* our session row is gone: the foreign key refuses the lease */
    if (oq_db_sqlstate_is(db, OQ_SQLSTATE_FOREIGN_KEY_VIOLATION))
      return OQ_ERR_SESSION_LOST;
    return e;
  }
  s.params = who;
  e = oq_db_transact(db, holder_tx, &s);
  if (e == OQ_OK && s.holder[0]) {
    *held = strcmp(s.holder, session_id) == 0;
    if (holder && holder_len)
      snprintf(holder, holder_len, "%s", s.holder);
  }
  return e;
}
