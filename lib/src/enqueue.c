/*
 * enqueue.c: a plain INSERT on the caller's connection, inside the caller's
 * transaction (enqueue.h). A unique key that already exists is not an
 * error: the existing item's id comes back with OQ_ENQUEUE_DUPLICATE.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

bool oq_enqueue_too_large(const oq_db *db)
{
  const char *m = oq_db_errmsg(db);
  return oq_db_sqlstate_is(db, OQ_SQLSTATE_CHECK_VIOLATION) && m &&
         (strstr(m, "onceq_items_payload_size") ||
          strstr(m, "octet_length(payload"));
}

static oq_err read_id(void *ud, int ncols, const char *const *vals)
{
  char *id = ud;
  if (ncols > 0 && vals[0])
    snprintf(id, OQ_UUID_LEN + 1, "%s", vals[0]);
  return OQ_OK;
}

/* The options every enqueue statement shares, as text parameters. */
typedef struct row_params {
  char prio[16], delay[24], maxa[16];
} row_params;

static oq_err check_opts(oq_db *db, const oq_enqueue_opts *o, row_params *rp)
{
  if (o->max_attempts < 0)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "max_attempts must be positive (got %d)",
                       o->max_attempts);
  if (o->ordering_key && !*o->ordering_key)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "ordering_key is empty; give a key, or NULL for none");
  if (o->ordering_key && strlen(o->ordering_key) > OQ_MAX_ORDERING_KEY_BYTES)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "ordering_key is %zu bytes long; a key is at most %d "
                       "bytes (hash a longer one)",
                       strlen(o->ordering_key), OQ_MAX_ORDERING_KEY_BYTES);
  if (o->ordering_key_field && !*o->ordering_key_field)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "ordering_key_field is empty; name a field, or NULL "
                       "for none");
  snprintf(rp->prio, sizeof rp->prio, "%d", o->priority);
  snprintf(rp->delay, sizeof rp->delay, "%lld",
           (long long)(o->delay_ms > 0 ? o->delay_ms : 0));
  snprintf(rp->maxa, sizeof rp->maxa, "%d",
           o->max_attempts > 0 ? o->max_attempts : OQ_DEFAULT_MAX_ATTEMPTS);
  return OQ_OK;
}

static const char *queue_of(const oq_enqueue_opts *o)
{
  return o->queue && *o->queue ? o->queue : OQ_DEFAULT_QUEUE;
}

static oq_err enqueue_row(oq_db *db, const oq_enqueue_opts *o, char *id_out,
                          oq_enqueue_status *status)
{
  static const oq_enqueue_opts none = {0};
  if (!o)
    o = &none;
  id_out[0] = '\0';
  if (status)
    *status = OQ_ENQUEUED;
  row_params rp;
  oq_err e0 = check_opts(db, o, &rp);
  if (e0 != OQ_OK)
    return e0;
  const char *params[8] = {queue_of(o),   o->payload ? o->payload : "{}",
                           rp.prio,       o->run_at,
                           rp.delay,      rp.maxa,
                           o->unique_key, o->ordering_key};
  oq_engine eng = oq_db_engine(db);
  /* If the key's holder is acknowledged between our INSERT and SELECT the
   * key is free again, so try the insert once more. */
  for (int round = 0; round < 3; round++) {
    oq_err e = oq_db_query(db, oq__sql(eng, OQ__SQL_ENQUEUE), 8, params,
                           read_id, id_out);
    if (e != OQ_OK && oq_enqueue_too_large(db))
      return oq__db_fail(db, OQ_ERR_INVALID,
                         oq_sqlstate_code(OQ_SQLSTATE_CHECK_VIOLATION),
                         "payload is larger than the 1 MiB limit (%d bytes "
                         "of JSON text, constraint onceq_items_payload_size): "
                         "store the data elsewhere and enqueue a reference "
                         "to it",
                         OQ_MAX_PAYLOAD_BYTES);
    if (e == OQ_ERR_INVALID)
      return oq__db_fail(db, e, oq_db_sqlstate(db),
                         "item rejected (is the payload valid JSON? is "
                         "run_at a timestamp?): %s",
                         oq_db_errmsg(db));
    if (e == OQ_ERR_SQL && oq_db_sqlstate_is(db, OQ_SQLSTATE_UNDEFINED_TABLE))
      return oq__db_fail(db, OQ_ERR_SCHEMA,
                         oq_sqlstate_code(OQ_SQLSTATE_UNDEFINED_TABLE),
                         "onceq_items does not exist; run `onceq migrate "
                         "--db URL` first");
    if (e != OQ_OK || id_out[0] || !o->unique_key)
      return e;
    const char *key[1] = {o->unique_key};
    e = oq_db_query(db, oq__sql(eng, OQ__SQL_ENQUEUE_FIND_KEY), 1, key, read_id,
                    id_out);
    if (e != OQ_OK)
      return e;
    if (id_out[0]) {
      if (status)
        *status = OQ_ENQUEUE_DUPLICATE;
      return OQ_OK;
    }
  }
  return oq__db_fail(
      db, OQ_ERR_CONFLICT, oq_sqlstate_code(OQ_SQLSTATE_UNIQUE_VIOLATION),
      "unique key %s kept changing hands; try again", o->unique_key);
}

oq_err oq_enqueue(oq_db *db, const oq_enqueue_opts *o, char *id_out,
                  oq_enqueue_status *status)
{
  oq_err e = enqueue_row(db, o, id_out, status);
  if (e != OQ_OK || !o->keep_result || !id_out[0])
    return e;
  /* in the same transaction, so no worker can ack it before it asks
   * (also an existing item of the same unique key: its waiter wants it) */
  const char *params[1] = {id_out};
  return oq_db_exec(db, oq__sql(oq_db_engine(db), OQ__SQL_ENQUEUE_KEEP_RESULT),
                    1, params, NULL);
}

oq_err oq_enqueue_many(oq_db *db, const oq_enqueue_opts *o,
                       const char *payloads, const char *key_field,
                       oq_row_fn on_row, void *ud)
{
  static const oq_enqueue_opts none = {0};
  if (!o)
    o = &none;
  row_params rp;
  oq_err e = check_opts(db, o, &rp);
  if (e != OQ_OK)
    return e;
  const char *params[9] = {
      payloads,       queue_of(o), rp.prio,   o->run_at,
      rp.delay,       rp.maxa,     key_field, o->ordering_key_field,
      o->ordering_key};
  return oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_ENQUEUE_MANY), 9,
                     params, on_row, ud);
}
