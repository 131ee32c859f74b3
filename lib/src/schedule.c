/*
 * schedule.c: the writes to onceq_schedules (schedule.h): the only code
 * that inserts, updates or deletes its rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char SQL_ADD[] =
    "INSERT INTO onceq_schedules (name, cron, queue, payload,"
    " next_run_at) VALUES ($1, $2, $3, $4::jsonb, $5::timestamptz)"
    " ON CONFLICT (name) DO NOTHING RETURNING name";
static const char SQL_REMOVE[] = "DELETE FROM onceq_schedules WHERE name = $1";
static const char SQL_ADVANCE[] =
    "UPDATE onceq_schedules SET next_run_at = $3::timestamptz,"
    " last_run_at = $2::timestamptz"
    " WHERE name = $1 AND next_run_at = $2::timestamptz"
    " RETURNING (next_run_at <= now())::int";
static const char SQL_LAST_ITEM[] =
    "UPDATE onceq_schedules SET last_item_id = $2::uuid WHERE name = $1";

/* A statement's parameters and what its rows said. */
typedef struct sched_stmt {
  const char *const *params;
  int nrows;      /* rows returned */
  bool still_due; /* SQL_ADVANCE's answer */
} sched_stmt;

static oq_err count_row(void *ud, int ncols, const char *const *vals)
{
  sched_stmt *s = ud;
  s->nrows++;
  if (ncols > 0 && vals[0])
    s->still_due = strtol(vals[0], NULL, 10) != 0;
  return OQ_OK;
}

static oq_err add_tx(oq_db *db, void *ud)
{
  sched_stmt *s = ud;
  s->nrows = 0; /* a restarted run counts afresh */
  return oq_db_query(db, SQL_ADD, 5, s->params, count_row, s);
}

oq_err oq_schedule_add(oq_db *db, const char *name, const char *cron,
                       const char *queue, const char *payload,
                       const char *next_run_at, bool *added)
{
  const char *p[5] = {name, cron, queue, payload, next_run_at};
  sched_stmt s = {.params = p};
  oq_err e = oq_db_transact(db, add_tx, &s);
  *added = e == OQ_OK && s.nrows > 0;
  return e;
}

oq_err oq_schedule_remove(oq_db *db, const char *name, long *removed)
{
  const char *p[1] = {name};
  long n = 0;
  oq_err e = oq_db_exec(db, SQL_REMOVE, 1, p, &n);
  if (removed)
    *removed = e == OQ_OK ? n : 0;
  return e;
}

oq_err oq_schedule_advance(oq_db *db, const char *name, const char *due_at,
                           const char *next_at, bool *advanced, bool *still_due)
{
  const char *p[3] = {name, due_at, next_at};
  sched_stmt s = {.params = p};
  oq_err e = oq_db_query(db, SQL_ADVANCE, 3, p, count_row, &s);
  *advanced = e == OQ_OK && s.nrows == 1;
  *still_due = *advanced && s.still_due;
  return e;
}

oq_err oq_schedule_set_last_item(oq_db *db, const char *name,
                                 const char *item_id)
{
  const char *p[2] = {name, item_id};
  return oq_db_exec(db, SQL_LAST_ITEM, 2, p, NULL);
}
