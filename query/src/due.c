/*
 * due.c: the reads of the leader's pass (due.h): due schedules, dead
 * letters to notify; and the bulk push's table probe.
 */
#include "due.h"
#include "figures.h"

/* next_run_at comes back as text and goes into the compare-and-set as
 * that same text: an exact round trip, whatever its precision. */
static const char SQL_DUE[] =
    "SELECT name, cron, queue, payload::text, next_run_at::text,"
    " extract(epoch FROM next_run_at)::float8"
    " FROM onceq_schedules WHERE next_run_at <= now()"
    " ORDER BY next_run_at LIMIT 100";
_Static_assert(QV_DUE_BATCH == 100, "SQL_DUE's LIMIT");
static const char SQL_NEXT[] = "SELECT next_run_at::text,"
                               " extract(epoch FROM next_run_at)::float8"
                               " FROM onceq_schedules WHERE name = $1";

/* Only QV_PAYLOAD_READ of each payload leaves the database (d.pt): 100
 * payloads of 1 MiB per pass would be 100 MiB in the coordinator (issue
 * 20). */
static const char SQL_UNNOTIFIED[] =
    "SELECT id::text, died_at::text, jsonb_build_object("
    "'event', 'dead', 'id', id, 'queue', queue,"
    " 'payload', CASE WHEN length(pt) > 16384 THEN to_jsonb(left(pt, 16384))"
    " ELSE pt::jsonb END, 'payload_truncated', length(pt) > 16384,"
    " 'priority', priority, 'attempts', attempts,"
    " 'max_attempts', max_attempts, 'unique_key', unique_key,"
    " 'last_error', last_error, 'created_at', created_at,"
    " 'died_at', died_at)::text,"
    " (extract(epoch FROM died_at) * 1000000)::int8::text"
    " FROM (SELECT id, queue, " QV_PAYLOAD_READ " AS pt, priority, attempts,"
    " max_attempts, unique_key, last_error, created_at, died_at"
    " FROM onceq_dead WHERE notified_at IS NULL ORDER BY died_at LIMIT 100) d"
    " ORDER BY died_at";
_Static_assert(QV_PAYLOAD_SHOWN == 16384, "SQL_UNNOTIFIED's cut");

oq_err qv_schedules_due(oq_db *db, qv_rows *out)
{
  return qv_query(db, SQL_DUE, 0, NULL, out);
}

oq_err qv_schedule_next(oq_db *db, const char *name, qv_rows *out)
{
  const char *p[1] = {name};
  return qv_query(db, SQL_NEXT, 1, p, out);
}

oq_err qv_dead_unnotified(oq_db *db, qv_rows *out)
{
  return qv_query(db, SQL_UNNOTIFIED, 0, NULL, out);
}

oq_err qv_items_probe(oq_db *db)
{
  return oq_db_query(db, "SELECT 1 FROM onceq_items LIMIT 0", 0, NULL, NULL,
                     NULL);
}
