/*
 * views.h: the read views `onceq list`, `onceq sessions` and `onceq parts`
 * print, and the status page (status_page.c) serves as JSON: one
 * statement and one row printer each, so the CLI's `--json` output and
 * /api/sessions, /api/dead and /api/parts have one shape. The stats view
 * is stats_view.h. Also the statements of the other operator reads, whose
 * one caller prints them: one item (`onceq show`), the schedules (`onceq
 * schedule list`), the status page's latest dead letters and the expired
 * sessions `onceq reap` reports.
 *
 * A listing view writes into a cm_listing (common/src/listing.h): a table
 * for people, or one buffered JSON document {"<key>":[row,...],...}. The
 * caller opens it with the view's *_open, reads rows with *_read (errors
 * are on db, as for any oq_db call), then prints it.
 *
 * Thread safety: each call uses the caller's db, listing and stream, on
 * one thread.
 */
#ifndef ONCEQ_QUERY_VIEWS_H
#define ONCEQ_QUERY_VIEWS_H

#include <stdbool.h>
#include <stdio.h>

#include "listing.h"
#include "onceq/onceq.h"
#include "rows.h"

/* ---- sessions: `onceq sessions`, /api/sessions ------------------------ */

typedef struct qv_sessions_sum {
  long n;      /* sessions read */
  long claims; /* items they hold */
} qv_sessions_sum;

/* Open l for the sessions view: JSON key "sessions", or its table.
 * CM_EXIT_OK or CM_EXIT_RUNTIME (listing.h). */
int qv_sessions_open(cm_listing *l, bool json);
/* The sessions, oldest first, into l; *sum counts them. */
OQ_MUST_CHECK oq_err qv_sessions_read(oq_db *db, cm_listing *l,
                                      qv_sessions_sum *sum);
/* `onceq sessions --json` to f. */
OQ_MUST_CHECK oq_err qv_view_sessions(FILE *f, oq_db *db);

/* ---- items: `onceq list`, /api/dead ----------------------------------- */

/* The states of an item (computed, not stored: views.c says how). */
enum {
  QV_ITEMS_ALL = -1,
  QV_ITEMS_RUNNING,
  QV_ITEMS_READY,
  QV_ITEMS_SCHEDULED,
  QV_ITEMS_DEAD,
  QV_ITEMS_NSTATES
};
/* "running", "ready", "scheduled", "dead": a QV_ITEMS_* state's name. */
extern const char *const qv_item_states[QV_ITEMS_NSTATES];

/* Open l for the items of state (a QV_ITEMS_* value): JSON key "items",
 * or the table (with QV_ITEMS_DEAD the last column is the last error). */
int qv_items_open(cm_listing *l, bool json, int state);
/* Up to limit items of state in queue (NULL: every queue) into l, in an
 * operator's order: running (longest first), ready (claim order),
 * scheduled (soonest first), dead (newest first). *n gets the rows read,
 * up to limit + 1: more than limit means there are more. */
OQ_MUST_CHECK oq_err qv_items_read(oq_db *db, const char *queue, int state,
                                   long limit, cm_listing *l, long *n);
/* `onceq list --state dead --limit N --json` to f. */
OQ_MUST_CHECK oq_err qv_view_dead(FILE *f, oq_db *db, long limit);

/* ---- partitions: `onceq parts`, /api/parts ---------------------------- */

/* The ready items over every part of r. */
long qv_parts_ready(const oq_parts_report *r);
/* `onceq parts --json` for report r to f. */
void qv_view_parts(FILE *f, const oq_parts_report *r);

/* ---- one item: `onceq show` ------------------------------------------- */

/* The columns of an item row: kind is "live", "dead" or "done"; times are
 * Unix seconds (float8 text); NULL where the kind has no such field. */
enum {
  QV_ITEM_KIND,
  QV_ITEM_STATE,
  QV_ITEM_ID,
  QV_ITEM_QUEUE,
  QV_ITEM_PRIO,
  QV_ITEM_ATT,
  QV_ITEM_MAXATT,
  QV_ITEM_RUN_AT,
  QV_ITEM_CLAIMED_AT,
  QV_ITEM_DIED_AT,
  QV_ITEM_DONE_AT,
  QV_ITEM_CREATED_AT,
  QV_ITEM_NOW,
  QV_ITEM_SESSION,
  QV_ITEM_HOST,
  QV_ITEM_PID,
  QV_ITEM_BEAT,
  QV_ITEM_UKEY,
  QV_ITEM_ERR,
  QV_ITEM_RESULT,
  QV_ITEM_PAYLOAD,
  QV_ITEM_NCOLS
};
/*
 * Item id wherever it is (live in onceq_items with its session, dead in
 * onceq_dead, acknowledged in the onceq_done history), in one statement,
 * so the answer is one snapshot. *out gets the rows (free with
 * qv_rows_free, also on failure), *row the one to show (live wins over
 * dead over done), -1 when there is none. OQ_ERR_SQL when a row has fewer
 * than QV_ITEM_NCOLS columns.
 */
OQ_MUST_CHECK oq_err qv_item_find(oq_db *db, const char *id, qv_rows *out,
                                  int *row);

/* ---- schedules: `onceq schedule list` --------------------------------- */

/* The columns of a schedule row; times are Unix seconds (float8 text),
 * last_run_at NULL before the first firing. */
enum {
  QV_SCHED_NAME,
  QV_SCHED_CRON,
  QV_SCHED_QUEUE,
  QV_SCHED_PAYLOAD, /* JSON text */
  QV_SCHED_NEXT,
  QV_SCHED_LAST,
  QV_SCHED_LAST_ITEM,
  QV_SCHED_NOW,
  QV_SCHED_NCOLS
};
/* Every schedule, by name, into *out (free with qv_rows_free, also on
 * failure). */
OQ_MUST_CHECK oq_err qv_schedules_read(oq_db *db, qv_rows *out);

/* ---- the status page's latest dead letters ---------------------------- */

/* The newest limit dead items, newest first, each passed to row with 7
 * columns: id, queue, attempts, max_attempts, seconds since it died, its
 * last error and its payload's JSON text (both cut at 1000 characters). */
OQ_MUST_CHECK oq_err qv_dead_latest(oq_db *db, int limit, oq_row_fn row,
                                    void *ud);

/* ---- expired sessions: `onceq reap`'s report -------------------------- */

/* The columns of an expired session: heartbeat age and expiry in seconds
 * (float8 text), claims the items it holds. */
enum {
  QV_EXPIRED_ID,
  QV_EXPIRED_HOST,
  QV_EXPIRED_PID,
  QV_EXPIRED_BEAT_AGO,
  QV_EXPIRED_EXPIRY,
  QV_EXPIRED_CLAIMS,
  QV_EXPIRED_NCOLS
};
/* Inside the caller's transaction, before oq_reap: the sessions older than
 * their expiry (the database's clock), oldest heartbeat first, each passed
 * to row, and locked (FOR UPDATE) so that the oq_reap of the same
 * transaction deletes exactly these (cmd_reap.c says why). */
OQ_MUST_CHECK oq_err qv_expired_sessions_lock(oq_db *db, oq_row_fn row,
                                              void *ud);

#endif
