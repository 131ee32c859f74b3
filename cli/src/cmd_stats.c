/*
 * cmd_stats.c: `onceq stats [--watch [D]] [--sample D] [--json]`: the
 * options, the one-shot sample and the --watch loop. What a frame shows,
 * and how its rates and scaling hints are computed, is the stats view
 * (query/src/stats_view.c), which the status page serves too.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "figures.h"
#include "qstats.h"
#include "signals.h"
#include "stats_view.h"

#define MAX_SAMPLES 512

/* SIGINT and SIGTERM end --watch (cm_signals_install counts them). */
static cm_signal_count stop_requested;

/* Sleep ms, in slices that watch for a stop; false when one came. */
static bool nap(int64_t ms)
{
  return cm_nap_until(oq_monotonic_ms() + (uint64_t)(ms > 0 ? ms : 0),
                      &stop_requested);
}

static void usage(void)
{
  printf(
      "usage: onceq stats [--watch [D]] [--sample D] [--json]\n"
      "  per queue: ready, scheduled, running and dead items, the age of\n"
      "  the oldest ready item (LAG), arrivals and completions per minute;\n"
      "  the live sessions and their claims; a scaling hint.\n"
      "  Counts stop at %ld (shown as %ld+) so they stay cheap on big "
      "tables.\n"
      "  --watch [D]  redraw every D (default 2s) until Ctrl-C; on a "
      "terminal\n"
      "               in place, like top; otherwise one block (or JSON "
      "line)\n"
      "               per interval\n"
      "  --sample D   one-shot without history: sample PostgreSQL's table\n"
      "               counters twice, D apart, for the TOTAL rates (1s; 0s:\n"
      "               once, no rates)\n"
      "  --json       one JSON object (per interval with --watch)\n"
      "  IN/MIN and DONE/MIN per queue need workers with --history (over the\n"
      "  last 60 s); without it the TOTAL row uses PostgreSQL's table\n"
      "  statistics between two samples.\n",
      QV_COUNT_CAP, QV_COUNT_CAP);
}

/* --watch mode: sample every interval, keep up to the last 60 s of
 * samples, rates against the oldest. */
static int watch(const cli_globals *g, oq_db *db, int64_t interval_ms)
{
  qv_snapshot *ring = calloc(MAX_SAMPLES, sizeof *ring);
  int head = 0, count = 0, rc = CLI_EXIT_OK;
  bool tty = isatty(STDOUT_FILENO) == 1;
  if (!ring)
    return cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
  /* bounded by the user: Ctrl-C or SIGTERM ends it, and so does a reader
   * that goes away (SIGPIPE is ignored: the write fails instead) */
  cm_signals_install(&stop_requested);
  while (!stop_requested) {
    qv_snapshot cur;
    oq_err e = qv_snapshot_take(db, true, &cur);
    if (e != OQ_OK) {
      fprintf(stderr, "onceq: stats: %s (retrying)\n", oq_db_errmsg(db));
      if (!oq_db_connected(db) && oq_db_reconnect(db) != OQ_OK)
        fprintf(stderr, "onceq: stats: %s\n", oq_db_errmsg(db));
      nap(interval_ms);
      continue;
    }
    /* drop samples older than the rate window (keep at least one) */
    while (count > 1) {
      int oldest = (head - count + MAX_SAMPLES) % MAX_SAMPLES;
      int second = (oldest + 1) % MAX_SAMPLES;
      if (cur.now_s - ring[second].now_s < QV_STATS_WINDOW_S)
        break;
      qv_snapshot_free(&ring[oldest]);
      count--;
    }
    if (count == MAX_SAMPLES) {
      int oldest = (head - count + MAX_SAMPLES) % MAX_SAMPLES;
      qv_snapshot_free(&ring[oldest]);
      count--;
    }
    const qv_snapshot *old =
        count > 0 ? &ring[(head - count + MAX_SAMPLES) % MAX_SAMPLES] : NULL;
    char *frame = NULL;
    size_t flen = 0;
    FILE *mf = open_memstream(&frame, &flen);
    if (!mf) {
      qv_snapshot_free(&cur);
      rc = cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
      break;
    }
    int r = qv_view_stats(mf, db, g->json, &cur, old);
    fclose(mf);
    if (r == 0) {
      if (tty && !g->json)
        fputs("\033[H\033[2J", stdout); /* home, clear screen: like top */
      fwrite(frame, 1, flen, stdout);
      if (!tty && !g->json)
        fputc('\n', stdout);
      fflush(stdout);
    }
    if (ferror(stdout))
      stop_requested = 1;
    free(frame);
    ring[head] = cur;
    head = (head + 1) % MAX_SAMPLES;
    count++;
    nap(interval_ms);
  }
  for (int i = 0; i < count; i++)
    qv_snapshot_free(&ring[(head - 1 - i + MAX_SAMPLES) % MAX_SAMPLES]);
  free(ring);
  return rc;
}

int cmd_stats(const cli_globals *g, int argc, char **argv)
{
  bool watch_mode = false;
  int64_t interval_ms = 2000, sample_ms = 1000;
  static const char *const once[] = {"--watch", "--sample", NULL};
  int rc0 = cli_no_repeats("stats", argc, argv, once);
  if (rc0 != CLI_EXIT_OK)
    return rc0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage();
      return CLI_EXIT_OK;
    } else if (strcmp(a, "--watch") == 0 || strncmp(a, "--watch=", 8) == 0) {
      watch_mode = true;
      const char *v = a[7] == '=' ? a + 8 : NULL;
      int64_t ms;
      if (!v && i + 1 < argc && oq_duration_parse(argv[i + 1], &ms) == OQ_OK)
        v = argv[++i];
      if (v) {
        if (oq_duration_parse(v, &ms) != OQ_OK || ms < 50)
          return cli_usage_error("stats",
                                 "--watch %s: expected a duration of at "
                                 "least 50ms, e.g. 2s or 500ms",
                                 v);
        interval_ms = ms;
      }
    } else if (strcmp(a, "--sample") == 0 || strncmp(a, "--sample=", 9) == 0) {
      const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || oq_duration_parse(v, &sample_ms) != OQ_OK || sample_ms > 60000)
        return cli_usage_error("stats",
                               "--sample needs a duration up to 60s, e.g. "
                               "1s or 0s");
    } else {
      return cli_usage_error("stats", "unknown argument %s", a);
    }
  }
  int rc = CLI_EXIT_OK;
  oq_db *db = cli_connect(g, "stats", &rc);
  if (!db)
    return rc;
  oq_err e = oq_migrate_check(db);
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "stats", "%s", oq_db_errmsg(db));
    goto out;
  }
  if (watch_mode) {
    rc = watch(g, db, interval_ms);
    goto out;
  }
  /* with history one snapshot has every rate; without it (PostgreSQL),
   * the table counters need a second sample, sample_ms later */
  qv_snapshot first = {0}, second = {0};
  bool sampled = false;
  e = qv_snapshot_take(db, true, &first);
  if (e == OQ_OK && sample_ms > 0 && !first.history && first.counters) {
    nap(sample_ms);
    e = qv_snapshot_take(db, true, &second);
    sampled = true;
  }
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "stats", "%s", oq_db_errmsg(db));
  } else if (qv_view_stats(stdout, db, g->json, sampled ? &second : &first,
                           sampled ? &first : NULL) != 0) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
  }
  qv_snapshot_free(&first);
  qv_snapshot_free(&second);
out:
  oq_db_close(db);
  return rc;
}
