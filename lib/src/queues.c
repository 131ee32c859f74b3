/*
 * queues.c: per-queue controls (queues.h): one upserted row per queue in
 * onceq_queues (OQ__SQL_QUEUE_*, dialect.c). The claims read the row
 * themselves (QUEUES_OPEN / QUEUE_OPEN in dialect.c), so nothing here
 * talks to workers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static oq_err check_name(oq_db *db, const char *queue)
{
  if (!queue || !*queue)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL, "a queue name is required");
  return OQ_OK;
}

static oq_err set_paused(oq_db *db, const char *queue, bool paused)
{
  oq__db_clear(db);
  oq_err e = check_name(db, queue);
  if (e != OQ_OK)
    return e;
  const char *params[2] = {queue, paused ? "true" : "false"};
  return oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_PAUSE),
                            2, params, NULL, NULL, NULL);
}

oq_err oq_queue_pause(oq_db *db, const char *queue)
{
  return set_paused(db, queue, true);
}

oq_err oq_queue_resume(oq_db *db, const char *queue)
{
  return set_paused(db, queue, false);
}

static oq_err read_paused(void *ud, int ncols, const char *const *v)
{
  bool *paused = ud;
  *paused = ncols > 0 && v[0] && (v[0][0] == 't' || v[0][0] == 'T');
  return OQ_OK;
}

oq_err oq_queue_paused_get(oq_db *db, const char *queue, bool *paused)
{
  *paused = false;
  oq__db_clear(db);
  oq_err e = check_name(db, queue);
  if (e != OQ_OK)
    return e;
  const char *params[1] = {queue};
  return oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_GET), 1,
                            params, read_paused, paused, NULL);
}

static oq_err read_controls(void *ud, int ncols, const char *const *v)
{
  oq_queue_controls *c = ud;
  if (ncols < 4 || !v[1] || !v[2] || !v[3])
    return OQ_ERR_SQL;
  c->paused = v[0] && (v[0][0] == 't' || v[0][0] == 'T');
  c->max_running = (int)strtol(v[1], NULL, 10);
  c->rate_limit = (int)strtol(v[2], NULL, 10);
  c->rate_interval_ms = strtoll(v[3], NULL, 10);
  return OQ_OK;
}

oq_err oq_queue_controls_get(oq_db *db, const char *queue,
                             oq_queue_controls *out)
{
  *out = (oq_queue_controls){
      .max_running = -1, .rate_limit = -1, .rate_interval_ms = -1};
  oq__db_clear(db);
  oq_err e = check_name(db, queue);
  if (e != OQ_OK)
    return e;
  const char *params[1] = {queue};
  return oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_GET), 1,
                            params, read_controls, out, NULL);
}

oq_err oq_queue_set_limits(oq_db *db, const char *queue, int max_running)
{
  oq__db_clear(db);
  oq_err e = check_name(db, queue);
  if (e != OQ_OK)
    return e;
  char v[16];
  snprintf(v, sizeof v, "%d", max_running);
  const char *params[2] = {queue, max_running >= 0 ? v : NULL};
  return oq__db_query_retry(db,
                            oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_SET_LIMIT),
                            2, params, NULL, NULL, NULL);
}

oq_err oq_queue_set_rate(oq_db *db, const char *queue, int starts,
                         int64_t interval_ms)
{
  oq__db_clear(db);
  oq_err e = check_name(db, queue);
  if (e != OQ_OK)
    return e;
  if (starts > 0 && interval_ms <= 0)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "a rate limit needs an interval > 0");
  char n[16], ms[24];
  snprintf(n, sizeof n, "%d", starts);
  snprintf(ms, sizeof ms, "%lld", (long long)interval_ms);
  const char *params[3] = {queue, starts > 0 ? n : NULL,
                           starts > 0 ? ms : NULL};
  return oq__db_query_retry(db,
                            oq__sql(oq_db_engine(db), OQ__SQL_QUEUE_SET_RATE),
                            3, params, NULL, NULL, NULL);
}
