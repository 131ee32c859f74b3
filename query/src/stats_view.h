/*
 * stats_view.h: the stats view: a snapshot (qstats.h) against an older
 * one turned into rates and scaling hints, printed as `onceq stats`
 * prints it (a table, or with json its `--json` object) and as the status
 * page serves it (/api/stats, and the hints on the page). One
 * implementation, so the two never differ in shape.
 *
 * Thread safety: each call uses the caller's db and stream, on one thread.
 */
#ifndef ONCEQ_QUERY_STATS_VIEW_H
#define ONCEQ_QUERY_STATS_VIEW_H

#include <stdbool.h>
#include <stdio.h>

#include "onceq/onceq.h"
#include "qstats.h"

/* Rates are taken over the last this many seconds: with history in one
 * snapshot, else (--watch) between samples up to this far apart. */
#define QV_STATS_WINDOW_S 60.0

/* One frame of `onceq stats` (json: `onceq stats --json`, one line) for
 * snapshot s, with rates against old (may be NULL), to f. 0, or -1 when
 * out of memory (nothing printed). */
int qv_view_stats(FILE *f, oq_db *db, bool json, const qv_snapshot *s,
                  const qv_snapshot *old);

/* One queue's rates and scaling hint, as `onceq stats` computes them. */
typedef struct qv_view_hint {
  double in_per_min;   /* arrivals; -1 unknown */
  double done_per_min; /* completions; -1 unknown */
  double window_s;     /* total only: seconds the rates cover; 0 unknown */
  const char *source;  /* total only: "history", "pg_stat" or "none" (the
                          `onceq stats --json` names); static */
  char text[320];      /* the hint; "" when there is none per queue */
} qv_view_hint;

/* The per-queue hints (q: s->nq entries) and the one over all queues
 * (total). 0, or -1 when out of memory. Of old (here and in
 * qv_view_stats) only the time and the table counters are read, so a
 * caller may keep just those of its older snapshots. */
int qv_view_hints(const qv_snapshot *s, const qv_snapshot *old, qv_view_hint *q,
                  qv_view_hint *total);

#endif
