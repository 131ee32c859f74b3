/*
 * views.h: the read views `onceq list`, `onceq sessions` and `onceq parts`
 * print, and the status page (status_page.c) serves as JSON: one
 * statement and one row printer each, so the CLI's `--json` output and
 * /api/sessions, /api/dead and /api/parts have one shape. The stats view
 * is stats_view.h.
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

/* ---- sessions: `onceq sessions`, /api/sessions ------------------------ */

typedef struct co_sessions_sum {
  long n;      /* sessions read */
  long claims; /* items they hold */
} co_sessions_sum;

/* Open l for the sessions view: JSON key "sessions", or its table.
 * CM_EXIT_OK or CM_EXIT_RUNTIME (listing.h). */
int co_sessions_open(cm_listing *l, bool json);
/* The sessions, oldest first, into l; *sum counts them. */
OQ_MUST_CHECK oq_err co_sessions_read(oq_db *db, cm_listing *l,
                                      co_sessions_sum *sum);
/* `onceq sessions --json` to f. */
OQ_MUST_CHECK oq_err co_view_sessions(FILE *f, oq_db *db);

/* ---- items: `onceq list`, /api/dead ----------------------------------- */

/* The states of an item (computed, not stored: views.c says how). */
enum {
  CO_ITEMS_ALL = -1,
  CO_ITEMS_RUNNING,
  CO_ITEMS_READY,
  CO_ITEMS_SCHEDULED,
  CO_ITEMS_DEAD,
  CO_ITEMS_NSTATES
};
/* "running", "ready", "scheduled", "dead": a CO_ITEMS_* state's name. */
extern const char *const co_item_states[CO_ITEMS_NSTATES];

/* Open l for the items of state (a CO_ITEMS_* value): JSON key "items",
 * or the table (with CO_ITEMS_DEAD the last column is the last error). */
int co_items_open(cm_listing *l, bool json, int state);
/* Up to limit items of state in queue (NULL: every queue) into l, in an
 * operator's order: running (longest first), ready (claim order),
 * scheduled (soonest first), dead (newest first). *n gets the rows read,
 * up to limit + 1: more than limit means there are more. */
OQ_MUST_CHECK oq_err co_items_read(oq_db *db, const char *queue, int state,
                                   long limit, cm_listing *l, long *n);
/* `onceq list --state dead --limit N --json` to f. */
OQ_MUST_CHECK oq_err co_view_dead(FILE *f, oq_db *db, long limit);

/* ---- partitions: `onceq parts`, /api/parts ---------------------------- */

/* The ready items over every part of r. */
long co_parts_ready(const oq_parts_report *r);
/* `onceq parts --json` for report r to f. */
void co_view_parts(FILE *f, const oq_parts_report *r);

#endif
