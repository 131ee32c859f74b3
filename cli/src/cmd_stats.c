/*
 * cmd_stats.c: `onceq stats [--watch [D]] [--sample D] [--json]`: per-queue
 * counts, lag and rates, the live sessions and their claims, and scaling
 * hints. The snapshot itself (cheap, index-range counts) is qstats.c; this
 * file turns snapshots into rates and prints.
 *
 * Rates, and why they are computed this way. Acked items are deleted, so
 * without history nothing in the tables counts completions per queue; a
 * counter row that every ack updates would serialise acks on it (and be a
 * hot row on CockroachDB), so there is none. Instead:
 *  - with history (workers run with --history, so onceq_done has rows),
 *    both per-queue rates come from ONE snapshot over the last 60 s:
 *    DONE/MIN = onceq_done rows acked in the window; IN/MIN = items created
 *    in the window wherever they are now (acked, dead or live; see
 *    qstats.h for how live ones are counted off the ready index);
 *  - without history, only the TOTAL row has rates, and only on
 *    PostgreSQL: its own cumulative table counters (pg_stat_user_tables
 *    n_tup_ins / n_tup_del) sampled twice: arrivals = inserts into
 *    onceq_items, completions = deletes from it minus moves to onceq_dead
 *    (so cancels count as completions). Free (nothing on the hot path) but
 *    table-wide, and each backend flushes them about once a second, so a
 *    short sample is noisy: one-shot stats sample --sample apart (1s), and
 *    --watch over up to the last 60 s of its own samples.
 *  - CockroachDB has no such counters: its rates need --history.
 *
 * Scaling hints (the "scaler"), per queue when the per-queue rates are
 * known, else over all queues: per-worker rate = completions / workers
 * serving the queue (sessions list their queues); workers needed =
 * arrivals / per-worker rate. When workers keep up (no ready backlog)
 * they are partly idle, so the per-worker rate understates their capacity
 * and the figure is an upper bound; the hint says so.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonout.h"
#include "cli.h"
#include "cofmt.h"
#include "qstats.h"
#include "views.h"

#define RATE_WINDOW_S 60.0
#define MAX_SAMPLES 512

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

/* Rates derived from the newest snapshot and an older one (or none). */
typedef struct rates {
  double window_s; /* seconds between the two samples; 0: one sample */
  double *in_q;    /* per queue of cur, per minute; -1 unknown */
  double *done_q;  /* per queue of cur, per minute; -1 unknown */
  double in_total; /* per minute; -1 unknown */
  double done_total;
  const char *in_src; /* where the totals came from, for the JSON */
  const char *done_src;
  double total_window_s; /* window of the totals' rates */
} rates;

static int rates_compute(const co_snapshot *cur, const co_snapshot *old,
                         rates *r)
{
  memset(r, 0, sizeof *r);
  r->in_total = r->done_total = -1;
  r->in_src = r->done_src = "none";
  if (cur->nq > 0) {
    r->in_q = calloc((size_t)cur->nq, sizeof *r->in_q);
    r->done_q = calloc((size_t)cur->nq, sizeof *r->done_q);
    if (!r->in_q || !r->done_q)
      return -1;
  }
  double dt = old ? cur->now_s - old->now_s : 0;
  r->window_s = dt > 0 ? dt : 0;
  double sum_in = 0, sum_done = 0;
  for (int i = 0; i < cur->nq; i++) {
    const co_qstat *q = &cur->q[i];
    r->done_q[i] = r->in_q[i] = -1;
    if (cur->history) {
      r->done_q[i] = (double)q->done_60s;
      r->in_q[i] =
          (double)(q->new_live_60s + q->new_done_60s + q->new_died_60s);
      sum_done += r->done_q[i];
      sum_in += r->in_q[i];
    }
  }
  if (cur->history) {
    r->in_total = sum_in;
    r->done_total = sum_done;
    r->in_src = r->done_src = "history";
    r->total_window_s = RATE_WINDOW_S;
  } else if (old && cur->counters && old->counters && r->window_s > 0) {
    double ins = (double)(cur->items_ins - old->items_ins);
    double del = (double)(cur->items_del - old->items_del) -
                 (double)(cur->dead_ins - old->dead_ins);
    r->in_total = (ins < 0 ? 0 : ins) * 60.0 / r->window_s;
    r->done_total = (del < 0 ? 0 : del) * 60.0 / r->window_s;
    r->in_src = r->done_src = "pg_stat";
    r->total_window_s = r->window_s;
  }
  return 0;
}

static void rates_free(rates *r)
{
  free(r->in_q);
  free(r->done_q);
  memset(r, 0, sizeof *r);
}

/* ---- scaling hint ------------------------------------------------------ */

typedef struct hint {
  const char *queue; /* NULL: all queues */
  int workers;       /* live worker sessions serving it */
  double in, done;   /* per minute; -1 unknown */
  double per_worker; /* per minute; -1 unknown */
  long needed;       /* -1 unknown */
  char text[320];
} hint;

/* Does a worker whose session lists queues (comma separated) serve q? An
 * empty list (a client that does not say) counts for every queue. */
static bool serves(const char *queues, const char *q)
{
  size_t n = strlen(q);
  if (!queues[0])
    return true;
  for (const char *p = queues; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, q, n) == 0)
      return true;
    if (!comma)
      break;
    p = comma + 1;
  }
  return false;
}

/* The scaler: workers needed = arrivals / (completions / workers). */
static void hint_compute(hint *h, long ready_count)
{
  char a[32], c[32], p[32], ready[32];
  co_fmt_count(ready, sizeof ready, ready_count);
  const char *what = h->queue ? h->queue : "all queues";
  h->per_worker = -1;
  h->needed = -1;
  co_fmt_rate(a, sizeof a, h->in);
  co_fmt_rate(c, sizeof c, h->done);
  if (h->workers == 0) {
    if (ready_count > 0 || h->in > 0) {
      h->needed = 1;
      snprintf(h->text, sizeof h->text,
               "%s: no worker serves it while %s item(s) are ready and %s/min "
               "arrive: start at least 1",
               what, ready, a);
    } else {
      snprintf(h->text, sizeof h->text, "%s: idle (no workers, nothing ready)",
               what);
    }
    return;
  }
  if (h->in < 0 || h->done < 0) {
    snprintf(h->text, sizeof h->text,
             "%s: no rate data yet (rates need workers with --history, "
             "PostgreSQL's table statistics, or --watch)",
             what);
    return;
  }
  if (h->done <= 0) {
    if (h->in > 0 || ready_count > 0)
      snprintf(h->text, sizeof h->text,
               "%s: %d worker(s) completed nothing in the window while %s "
               "item(s) are ready and %s/min arrive: check the workers",
               what, h->workers, ready, a);
    else
      snprintf(h->text, sizeof h->text,
               "%s: idle (nothing arrives, nothing ready)", what);
    return;
  }
  h->per_worker = h->done / h->workers;
  co_fmt_rate(p, sizeof p, h->per_worker);
  double x = h->in / h->per_worker;
  h->needed = (long)ceil(x - 1e-9);
  if (h->needed < 1 && (h->in > 0 || ready_count > 0))
    h->needed = 1;
  int n = snprintf(h->text, sizeof h->text,
                   "%s: arrivals %s/min / (%s/min done by %d worker(s) = "
                   "%s/min each) = %.1f -> %ld worker(s) needed, %d running",
                   what, a, c, h->workers, p, x, h->needed, h->workers);
  if (n > 0 && (size_t)n < sizeof h->text) {
    if (ready_count == 0)
      snprintf(h->text + n, sizeof h->text - (size_t)n,
               "; no ready backlog: workers keep up, so they are partly idle "
               "and this is an upper bound");
    else if (h->needed <= h->workers)
      snprintf(h->text + n, sizeof h->text - (size_t)n,
               "; %s ready: more workers would drain the backlog faster",
               ready);
  }
}

/* The hint over all queues (total), and one per queue (nq entries, in
 * s's order) when the per-queue rates are known. */
typedef struct hints {
  hint total;
  hint *q; /* per queue; NULL when no queue has rates */
  int nq;
} hints;

static int scaling_hints(const co_snapshot *s, const rates *r, hints *hs)
{
  long ready = 0;
  memset(hs, 0, sizeof *hs);
  for (int i = 0; i < s->ns; i++)
    if (!s->s[i].coordinator)
      hs->total.workers++;
  for (int i = 0; i < s->nq; i++)
    ready += s->q[i].ready;
  hs->total.in = r->in_total;
  hs->total.done = r->done_total;
  hint_compute(&hs->total, ready);

  bool any = false;
  for (int i = 0; i < s->nq; i++)
    any = any || (r->in_q[i] >= 0 && r->done_q[i] >= 0);
  if (!any || s->nq == 0)
    return 0;
  hs->q = calloc((size_t)s->nq, sizeof *hs->q);
  if (!hs->q)
    return -1;
  hs->nq = s->nq;
  for (int i = 0; i < s->nq; i++) {
    hint *h = &hs->q[i];
    h->queue = s->q[i].queue;
    for (int k = 0; k < s->ns; k++)
      if (!s->s[k].coordinator && serves(s->s[k].queues, h->queue))
        h->workers++;
    h->in = r->in_q[i];
    h->done = r->done_q[i];
    hint_compute(h, s->q[i].ready);
  }
  return 0;
}

/* ---- output ------------------------------------------------------------ */

/* Column totals over the queues: sums of the shown (capped) counts, and
 * whether any count in the column hit the cap (the sum is then a lower
 * bound). */
typedef struct totals {
  long n[4]; /* ready, scheduled, running, dead */
  bool cap[4];
  double lag_s; /* the largest lag; -1 none */
} totals;

static void add_count(totals *t, int col, long n, bool approx)
{
  t->n[col] += n > CO_COUNT_CAP ? CO_COUNT_CAP : n;
  if (n > CO_COUNT_CAP || approx)
    t->cap[col] = true;
}

static void sum_queues(const co_snapshot *s, totals *t)
{
  memset(t, 0, sizeof *t);
  t->lag_s = -1;
  for (int i = 0; i < s->nq; i++) {
    const co_qstat *q = &s->q[i];
    add_count(t, 0, q->ready, q->approx);
    add_count(t, 1, q->scheduled, q->approx);
    add_count(t, 2, q->running, q->approx);
    add_count(t, 3, q->dead, false);
    if (q->lag_s > t->lag_s)
      t->lag_s = q->lag_s;
  }
}

static void json_count(FILE *f, const char *name, long n)
{
  fprintf(f, "\"%s\":%ld,\"%s_capped\":%s", name,
          n > CO_COUNT_CAP ? CO_COUNT_CAP : n, name,
          n > CO_COUNT_CAP ? "true" : "false");
}

static void json_num(FILE *f, double v)
{
  if (v < 0 || isnan(v))
    fputs("null", f);
  else
    fprintf(f, "%.3f", v);
}

static void json_hint(FILE *f, const hint *h)
{
  fputs("{\"queue\":", f);
  cm_json_quote(f, h->queue);
  fputs(",\"arrivals_per_min\":", f);
  json_num(f, h->in);
  fputs(",\"completions_per_min\":", f);
  json_num(f, h->done);
  fprintf(f, ",\"workers\":%d,\"per_worker_per_min\":", h->workers);
  json_num(f, h->per_worker);
  fputs(",\"workers_needed\":", f);
  if (h->needed < 0)
    fputs("null", f);
  else
    fprintf(f, "%ld", h->needed);
  fputs(",\"reason\":", f);
  cm_json_quote(f, h->text);
  fputc('}', f);
}

static void print_json(FILE *f, oq_db *db, const co_snapshot *s, const rates *r,
                       const hints *hs)
{
  char when[40];
  totals t;
  static const char *const cols[4] = {"ready", "scheduled", "running", "dead"};
  co_fmt_utc(when, sizeof when, s->now_s);
  fprintf(f, "{\"time\":\"%s\",\"now\":%.3f,\"engine\":\"%s\",", when, s->now_s,
          oq_db_engine(db) == OQ_ENGINE_COCKROACH ? "cockroachdb" : "postgres");
  fprintf(f, "\"history\":%s,\"sample_window_s\":%.3f,\"queues\":[",
          s->history ? "true" : "false", r->window_s);
  for (int i = 0; i < s->nq; i++) {
    const co_qstat *q = &s->q[i];
    fprintf(f, "%s{\"queue\":", i ? "," : "");
    cm_json_quote(f, q->queue);
    fputc(',', f);
    json_count(f, "ready", q->ready);
    fputc(',', f);
    json_count(f, "scheduled", q->scheduled);
    fputc(',', f);
    json_count(f, "running", q->running);
    fputc(',', f);
    json_count(f, "dead", q->dead);
    fprintf(f, ",\"approximate\":%s,\"lag_s\":", q->approx ? "true" : "false");
    json_num(f, q->lag_s);
    fputs(",\"in_per_min\":", f);
    json_num(f, r->in_q[i]);
    fputs(",\"done_per_min\":", f);
    json_num(f, r->done_q[i]);
    fprintf(f, ",\"dead_per_min\":%ld}", q->died_60s);
  }
  sum_queues(s, &t);
  fprintf(f, "],\"more_queues\":%d,\"total\":{", s->more_queues);
  for (int c = 0; c < 4; c++)
    fprintf(f, "\"%s\":%ld,\"%s_capped\":%s,", cols[c], t.n[c], cols[c],
            t.cap[c] ? "true" : "false");
  fputs("\"lag_s\":", f);
  json_num(f, t.lag_s);
  fputs(",\"in_per_min\":", f);
  json_num(f, r->in_total);
  fprintf(f, ",\"in_source\":\"%s\",\"done_per_min\":", r->in_src);
  json_num(f, r->done_total);
  fprintf(f, ",\"done_source\":\"%s\",\"window_s\":%.3f},\"sessions\":[",
          r->done_src, r->total_window_s);
  for (int i = 0; i < s->ns; i++) {
    const co_sstat *x = &s->s[i];
    fprintf(f, "%s{\"id\":", i ? "," : "");
    cm_json_quote(f, x->id);
    fprintf(f, ",\"role\":\"%s\",\"hostname\":",
            x->leader        ? "leader"
            : x->coordinator ? "coordinator"
                             : "worker");
    cm_json_quote(f, x->hostname);
    fprintf(f, ",\"pid\":%ld,\"version\":", x->pid);
    cm_json_quote(f, x->version);
    fputs(",\"queues\":", f);
    cm_json_quote(f, x->queues);
    fprintf(f,
            ",\"claims\":%ld,\"heartbeat_age_s\":%.3f,\"expiry_s\":%.3f,"
            "\"age_s\":%.3f}",
            x->claims, x->heartbeat_age_s, x->expiry_s, x->age_s);
  }
  fputs("],\"scaling\":", f);
  json_hint(f, &hs->total);
  fputs(",\"scaling_per_queue\":[", f);
  for (int i = 0; i < hs->nq; i++) {
    if (i)
      fputc(',', f);
    json_hint(f, &hs->q[i]);
  }
  fputs("]}\n", f);
}

/* Print prefix + text, wrapped at width columns on spaces, continuation
 * lines indented under the text. */
static void wrap(FILE *f, const char *prefix, const char *text, int width)
{
  int indent = (int)strlen(prefix), col = indent;
  fputs(prefix, f);
  while (*text) {
    const char *sp = strchr(text, ' ');
    int wlen = sp ? (int)(sp - text) : (int)strlen(text);
    if (col > indent && col + 1 + wlen > width) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    fwrite(text, 1, (size_t)wlen, f);
    col += wlen;
    text += wlen;
    while (*text == ' ')
      text++;
  }
  fputc('\n', f);
}

static void print_human(FILE *f, const co_snapshot *s, const rates *r,
                        const hints *hs)
{
  char when[40], b[8][32];
  totals t;
  co_fmt_utc(when, sizeof when, s->now_s);
  fprintf(f, "onceq stats  %s", when);
  if (r->total_window_s > 0)
    fprintf(f, "  rates/min over %.0fs%s", r->total_window_s,
            s->history ? " (history)" : "");
  else
    fprintf(f, "  rates: need --history or a second sample");
  fputc('\n', f);
  fprintf(f, "%-18s %8s %8s %8s %8s %8s %7s %8s\n", "QUEUE", "READY", "SCHED",
          "RUNNING", "DEAD", "LAG", "IN/MIN", "DONE/MIN");
  for (int i = 0; i < s->nq; i++) {
    const co_qstat *q = &s->q[i];
    co_fmt_count(b[0], sizeof b[0], q->ready);
    co_fmt_count(b[1], sizeof b[1], q->scheduled);
    co_fmt_count(b[2], sizeof b[2], q->running);
    co_fmt_count(b[3], sizeof b[3], q->dead);
    co_fmt_age(b[4], sizeof b[4], q->lag_s);
    co_fmt_rate(b[5], sizeof b[5], r->in_q[i]);
    co_fmt_rate(b[6], sizeof b[6], r->done_q[i]);
    char qname[19 * 6];
    oq_text_escape(qname, sizeof qname, q->queue); /* outside text */
    fprintf(f, "%-18.18s %8s %8s %8s %8s %8s %7s %8s%s\n", qname, b[0], b[1],
            b[2], b[3], b[4], b[5], b[6], q->approx ? " ~" : "");
  }
  sum_queues(s, &t);
  if (s->nq == 0)
    fprintf(f, "(no queues: nothing ready, scheduled, running or dead)\n");
  if (s->more_queues > 0)
    fprintf(f, "(%d more queue(s) not shown)\n", s->more_queues);
  /* totals of capped counts are lower bounds: mark them with '+' */
  for (int c = 0; c < 4; c++)
    snprintf(b[c], sizeof b[c], "%ld%s", t.n[c], t.cap[c] ? "+" : "");
  co_fmt_age(b[4], sizeof b[4], t.lag_s);
  co_fmt_rate(b[5], sizeof b[5], r->in_total);
  co_fmt_rate(b[6], sizeof b[6], r->done_total);
  fprintf(f, "%-18s %8s %8s %8s %8s %8s %7s %8s\n", "TOTAL", b[0], b[1], b[2],
          b[3], b[4], b[5], b[6]);

  int workers = 0, coords = 0;
  for (int i = 0; i < s->ns; i++) {
    if (s->s[i].coordinator)
      coords++;
    else
      workers++;
  }
  fprintf(f, "\nSESSIONS  %d worker(s), %d coordinator(s)\n", workers, coords);
  if (s->ns > 0)
    fprintf(f, "%-8s %-11s %-16s %7s %7s %10s %7s %7s\n", "ID", "ROLE", "HOST",
            "PID", "CLAIMS", "HEARTBEAT", "EXPIRY", "AGE");
  for (int i = 0; i < s->ns; i++) {
    const co_sstat *x = &s->s[i];
    co_fmt_count(b[0], sizeof b[0], x->claims);
    co_fmt_age(b[1], sizeof b[1], x->heartbeat_age_s);
    co_fmt_age(b[2], sizeof b[2], x->expiry_s);
    co_fmt_age(b[3], sizeof b[3], x->age_s);
    fprintf(f, "%-8.8s %-11s %-16.16s %7ld %7s %10s %7s %7s\n", x->id,
            x->leader        ? "leader"
            : x->coordinator ? "coordinator"
                             : "worker",
            x->hostname, x->pid, b[0], b[1], b[2], b[3]);
  }
  fputc('\n', f);
  if (hs->nq == 0) {
    wrap(f, "scaling: ", hs->total.text, 79);
    return;
  }
  /* per queue, for the queues that have something going on */
  bool first = true;
  for (int i = 0; i < hs->nq; i++) {
    const co_qstat *q = &s->q[i];
    if (q->ready == 0 && q->running == 0 && !(hs->q[i].in > 0))
      continue;
    wrap(f, first ? "scaling: " : "         ", hs->q[i].text, 79);
    first = false;
  }
  if (first)
    wrap(f, "scaling: ", hs->total.text, 79);
}

/* Render one frame of s (against old, may be NULL) into f. */
static int render(FILE *f, oq_db *db, bool json, const co_snapshot *s,
                  const co_snapshot *old)
{
  rates r;
  hints hs;
  if (rates_compute(s, old, &r) != 0 || scaling_hints(s, &r, &hs) != 0) {
    rates_free(&r);
    return -1;
  }
  if (json)
    print_json(f, db, s, &r, &hs);
  else
    print_human(f, s, &r, &hs);
  free(hs.q);
  rates_free(&r);
  return 0;
}

/* Sleep ms in slices of at most 100 ms; false when a stop was requested. */
static bool nap(int64_t ms)
{
  while (ms > 0 && !stop_requested) {
    int64_t slice = ms < 100 ? ms : 100;
    struct timespec ts = {0, (long)slice * 1000000L};
    nanosleep(&ts, NULL);
    ms -= slice;
  }
  return !stop_requested;
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
      CO_COUNT_CAP, CO_COUNT_CAP);
}

/* --watch mode: sample every interval, keep up to the last 60 s of
 * samples, rates against the oldest. */
static int watch(const cli_globals *g, oq_db *db, int64_t interval_ms)
{
  co_snapshot *ring = calloc(MAX_SAMPLES, sizeof *ring);
  int head = 0, count = 0, rc = CLI_EXIT_OK;
  bool tty = isatty(STDOUT_FILENO) == 1;
  if (!ring)
    return cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  /* bounded by the user: Ctrl-C or SIGTERM ends it */
  while (!stop_requested) {
    co_snapshot cur;
    oq_err e = co_snapshot_take(db, true, &cur);
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
      if (cur.now_s - ring[second].now_s < RATE_WINDOW_S)
        break;
      co_snapshot_free(&ring[oldest]);
      count--;
    }
    if (count == MAX_SAMPLES) {
      int oldest = (head - count + MAX_SAMPLES) % MAX_SAMPLES;
      co_snapshot_free(&ring[oldest]);
      count--;
    }
    const co_snapshot *old =
        count > 0 ? &ring[(head - count + MAX_SAMPLES) % MAX_SAMPLES] : NULL;
    char *frame = NULL;
    size_t flen = 0;
    FILE *mf = open_memstream(&frame, &flen);
    if (!mf) {
      co_snapshot_free(&cur);
      rc = cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
      break;
    }
    int r = render(mf, db, g->json, &cur, old);
    fclose(mf);
    if (r == 0) {
      if (tty && !g->json)
        fputs("\033[H\033[2J", stdout); /* home, clear screen: like top */
      fwrite(frame, 1, flen, stdout);
      if (!tty && !g->json)
        fputc('\n', stdout);
      fflush(stdout);
    }
    free(frame);
    ring[head] = cur;
    head = (head + 1) % MAX_SAMPLES;
    count++;
    nap(interval_ms);
  }
  for (int i = 0; i < count; i++)
    co_snapshot_free(&ring[(head - 1 - i + MAX_SAMPLES) % MAX_SAMPLES]);
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
  co_snapshot first = {0}, second = {0};
  bool sampled = false;
  e = co_snapshot_take(db, true, &first);
  if (e == OQ_OK && sample_ms > 0 && !first.history && first.counters) {
    nap(sample_ms);
    e = co_snapshot_take(db, true, &second);
    sampled = true;
  }
  if (e != OQ_OK) {
    rc = cli_fail(cli_exit_for(e), "stats", "%s", oq_db_errmsg(db));
  } else if (render(stdout, db, g->json, sampled ? &second : &first,
                    sampled ? &first : NULL) != 0) {
    rc = cli_fail(CLI_EXIT_RUNTIME, "stats", "out of memory");
  }
  co_snapshot_free(&first);
  co_snapshot_free(&second);
out:
  oq_db_close(db);
  return rc;
}

int co_view_stats(FILE *f, oq_db *db, const co_snapshot *s,
                  const co_snapshot *old)
{
  return render(f, db, true, s, old);
}

int co_view_hints(const co_snapshot *s, const co_snapshot *old, co_view_hint *q,
                  co_view_hint *total)
{
  rates r;
  hints hs;
  if (rates_compute(s, old, &r) != 0 || scaling_hints(s, &r, &hs) != 0) {
    rates_free(&r);
    return -1;
  }
  for (int i = 0; i < s->nq; i++) {
    q[i].in_per_min = r.in_q[i];
    q[i].done_per_min = r.done_q[i];
    snprintf(q[i].text, sizeof q[i].text, "%s", hs.q ? hs.q[i].text : "");
  }
  total->in_per_min = r.in_total;
  total->done_per_min = r.done_total;
  snprintf(total->text, sizeof total->text, "%s", hs.total.text);
  free(hs.q);
  rates_free(&r);
  return 0;
}
