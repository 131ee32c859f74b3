/*
 * views.h: the read commands' `--json` documents written to any stream,
 * so the status page (status_page.c) serves exactly the shapes the CLI
 * prints. Each function lives beside its command (cmd_stats.c,
 * cmd_sessions.c, cmd_list.c, cmd_parts.c) and shares its code.
 *
 * Thread safety: each call uses the caller's db and stream, on one thread.
 */
#ifndef ONCEQ_COORD_VIEWS_H
#define ONCEQ_COORD_VIEWS_H

#include <stdio.h>

#include "onceq/onceq.h"
#include "qstats.h"

/* `onceq stats --json` for snapshot s, with rates against old (may be
 * NULL). 0, or -1 when out of memory. */
int co_view_stats(FILE *f, oq_db *db, const co_snapshot *s,
                  const co_snapshot *old);

/* One queue's rates and scaling hint, as `onceq stats` computes them. */
typedef struct co_view_hint {
  double in_per_min;   /* arrivals; -1 unknown */
  double done_per_min; /* completions; -1 unknown */
  char text[320];      /* the hint; "" when there is none per queue */
} co_view_hint;

/* The per-queue hints (q: s->nq entries) and the one over all queues
 * (total). 0, or -1 when out of memory. */
int co_view_hints(const co_snapshot *s, const co_snapshot *old, co_view_hint *q,
                  co_view_hint *total);

/* `onceq sessions --json`. CLI exit code (0 ok). */
int co_view_sessions(FILE *f, oq_db *db);

/* `onceq list --state dead --limit N --json`. CLI exit code (0 ok). */
int co_view_dead(FILE *f, oq_db *db, long limit);

/* `onceq parts --json` for report r. */
void co_view_parts(FILE *f, const oq_parts_report *r);

#endif
