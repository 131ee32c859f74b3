/*
 * db_prepared.c: the prepared-statement cache. The library's statements
 * that run per claim or per ack are parsed once per connection under names
 * no other client can have ("oq_p<nonce>_<gen>_<slot>"); behind a
 * transaction pooler (db_state.h, OQ__DB_POOLER_UNNAMED) they run unnamed
 * and the cache keeps only their column counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_state.h"

static void prepared_name(const oq_db *db, int slot, char *name, size_t len)
{
  snprintf(name, len, "oq_p%08x_%u_%d", db->prep.nonce, db->prep.gen, slot);
}

/* Our prepared statements went away (a DISCARD ALL, a pooler) or no longer
 * fit: forget them and make the failure a restart, so the statement is
 * prepared again when it is rerun (a claim by its retry loop, an ack with
 * its transaction), as ack_many does for its pipelines. */
oq_err oq__db_lost_prepared(oq_db *db)
{
  char msg[OQ_ERRBUF_SIZE], state[6];
  snprintf(msg, sizeof msg, "%s", db->errmsg);
  snprintf(state, sizeof state, "%s", db->sqlstate);
  oq__db_forget_prepared(db);
  return oq__db_fail(db, OQ_ERR_RETRY, state,
                     "%s (a prepared statement was lost; it is prepared again "
                     "on the next try)",
                     msg);
}

oq_err oq__db_prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols)
{
  return oq__db_prepare_as(db, sql, nparams, types, name, namelen, ncols,
                           "prepare failed");
}

/* Ask the server how many columns prepared statement `name` returns: a
 * round trip, once per statement and connection, for the pipelines. */
static oq_err describe_cols(oq_db *db, const char *name, int *cols)
{
  bool timed_out = false;
  PGresult *res = NULL;
  if (PQsendDescribePrepared(db->conn, name))
    res = oq__db_await(db, &timed_out);
  if (timed_out)
    return oq__db_deadline_passed(db, "describe failed");
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
    e = oq__db_fail_result(db, res, "describe failed");
    /* prepared a round trip ago, gone now: a transaction pooler */
    if (e != OQ_ERR_CONN &&
        oq__sqlstate_is(db->sqlstate, OQ_SQLSTATE_INVALID_STATEMENT_NAME)) {
      oq__db_vanished(db);
      e = oq__db_lost_prepared(db);
    }
  } else {
    *cols = PQnfields(res);
  }
  PQclear(res);
  return e;
}

/* Through a pooler: no name (the statement runs unnamed, its Parse in the
 * same message group as its Bind); the cache keeps the column count a
 * pipeline needs, found once per statement and connection. */
static oq_err prepare_unnamed(oq_db *db, const char *sql, int nparams,
                              const unsigned int *types, char *name, int *ncols,
                              const char *what)
{
  name[0] = '\0';
  if (!ncols)
    return OQ_OK;
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++)
    if (db->prep.sql[i] && db->prep.cols[i] >= 0 &&
        strcmp(db->prep.sql[i], sql) == 0) {
      *ncols = db->prep.cols[i];
      return OQ_OK;
    }
  int cols = -1;
  oq_err e =
      oq__db_describe_unnamed(db, sql, nparams, types, NULL, &cols, what);
  if (e != OQ_OK)
    return e;
  *ncols = cols;
  int slot = (int)(db->prep.next++ % OQ__DB_PREPARED_MAX);
  free(db->prep.sql[slot]);
  db->prep.sql[slot] = strdup(sql); /* out of memory: described again */
  db->prep.cols[slot] = cols;
  return OQ_OK;
}

/* A statement we had prepared is gone before its Bind (26000) though
 * nothing of ours dropped it: a transaction pooler sent the Bind to
 * another server connection. Run unnamed from now on. Expected once per
 * connection behind a transaction pooler (debug); a warning when
 * detect_pooler had not seen one. */
void oq__db_vanished(oq_db *db)
{
  if (db->route == OQ__DB_POOLER_UNNAMED)
    return;
  bool known = db->route == OQ__DB_POOLER;
  db->route = OQ__DB_POOLER_UNNAMED;
  OQ_LOG(known ? OQ_LOG_DEBUG : OQ_LOG_WARN, NULL, NULL,
         "a prepared statement vanished between Parse and Bind on %s: a "
         "transaction-pooling proxy (pgbouncer pool_mode=transaction) is in "
         "the way; this connection runs unnamed statements from now on",
         db->masked);
}

bool oq__db_prepared_cached(const oq_db *db, const char *sql)
{
  if (db->route == OQ__DB_POOLER_UNNAMED)
    return false;
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++)
    if (db->prep.sql[i] && strcmp(db->prep.sql[i], sql) == 0)
      return true;
  return false;
}

/* slot was named: it and the one named before it are kept from eviction */
static void named(oq_db *db, int slot)
{
  if (slot == db->prep.last)
    return;
  db->prep.before = db->prep.last;
  db->prep.last = slot;
}

/* what: the failure's wording (a statement that is run at once fails as
 * "query failed", whether its Parse or its Execute met the error). */
oq_err oq__db_prepare_as(oq_db *db, const char *sql, int nparams,
                         const unsigned int *types, char *name, size_t namelen,
                         int *ncols, const char *what)
{
  if (db->route == OQ__DB_POOLER_UNNAMED)
    return prepare_unnamed(db, sql, nparams, types, name, ncols, what);
  int slot = -1;
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++) {
    if (db->prep.sql[i] && strcmp(db->prep.sql[i], sql) == 0) {
      prepared_name(db, i, name, namelen);
      named(db, i);
      if (ncols && db->prep.cols[i] < 0) {
        oq_err e = describe_cols(db, name, &db->prep.cols[i]);
        if (e != OQ_OK)
          return e;
      }
      if (ncols)
        *ncols = db->prep.cols[i];
      return OQ_OK;
    }
    if (!db->prep.sql[i] && slot < 0)
      slot = i;
  }
  if (slot < 0 && db->route != OQ__DB_DIRECT) {
    /* full, through a pooler: a DEALLOCATE may reach another server
     * connection than the statement, so a name is never given to other
     * SQL: new names for all (the old ones stay behind where they are) */
    oq__db_forget_prepared(db);
    slot = 0;
  }
  if (slot < 0) {
    /* full: drop one, round robin, never the two named last (a pipeline
     * names its statements just before sending them) */
    do
      slot = (int)(db->prep.next++ % OQ__DB_PREPARED_MAX);
    while (slot == db->prep.last || slot == db->prep.before);
    char sql_dealloc[64] = "DEALLOCATE ";
    prepared_name(db, slot, sql_dealloc + strlen(sql_dealloc),
                  sizeof sql_dealloc - strlen(sql_dealloc));
    oq_err e = oq__db_simple(db, sql_dealloc);
    if (e != OQ_OK &&
        !oq__sqlstate_is(db->sqlstate, OQ_SQLSTATE_INVALID_STATEMENT_NAME))
      return e; /* 26000: already gone, the slot is free all the same */
    free(db->prep.sql[slot]);
    db->prep.sql[slot] = NULL;
  }
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  prepared_name(db, slot, name, namelen);
  bool timed_out = false;
  PGresult *res = NULL;
  if (PQsendPrepare(db->conn, name, sql, nparams, (const Oid *)types))
    res = oq__db_await(db, &timed_out);
  if (timed_out)
    return oq__db_deadline_passed(db, what);
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
    e = oq__db_fail_result(db, res, what);
    /* only 42P05 (a name of ours left on the server) is ours to fix: a
     * 0A000 from Parse is a statement the server cannot run at all, which
     * no retry mends */
    if (e != OQ_ERR_CONN &&
        oq__sqlstate_is(db->sqlstate, OQ_SQLSTATE_DUPLICATE_PREPARED))
      e = oq__db_lost_prepared(db);
  }
  PQclear(res);
  int cols = -1;
  if (e == OQ_OK && ncols)
    e = describe_cols(db, name, &cols);
  if (e == OQ_OK) {
    named(db, slot);
    db->prep.cols[slot] = cols;
    if (ncols)
      *ncols = cols;
    db->prep.sql[slot] = strdup(sql);
    if (!db->prep.sql[slot])
      e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  return e;
}
