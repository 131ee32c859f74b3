/*
 * stats_view.c: what `onceq stats` prints and the status page shows
 * (stats_view.h): per-queue counts, lag and rates, the live sessions and
 * their claims, and scaling hints. The snapshot itself (cheap, index-range
 * counts) is qstats.c; this file turns snapshots into rates and prints
 * them, as a table or as JSON. The CLI's loop (--watch, --sample) is
 * cli/src/cmd_stats.c.
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
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "fmt.h"
#include "jsonout.h"
#include "stats_view.h"

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

static int rates_compute(const qv_snapshot *cur, const qv_snapshot *old,
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
    const qv_qstat *q = &cur->q[i];
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
    r->total_window_s = QV_STATS_WINDOW_S;
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
  qv_fmt_count(ready, sizeof ready, ready_count);
  const char *what = h->queue ? h->queue : "all queues";
  h->per_worker = -1;
  h->needed = -1;
  qv_fmt_rate(a, sizeof a, h->in);
  qv_fmt_rate(c, sizeof c, h->done);
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
  qv_fmt_rate(p, sizeof p, h->per_worker);
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

static int scaling_hints(const qv_snapshot *s, const rates *r, hints *hs)
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
  t->n[col] += n > QV_COUNT_CAP ? QV_COUNT_CAP : n;
  if (n > QV_COUNT_CAP || approx)
    t->cap[col] = true;
}

static void sum_queues(const qv_snapshot *s, totals *t)
{
  memset(t, 0, sizeof *t);
  t->lag_s = -1;
  for (int i = 0; i < s->nq; i++) {
    const qv_qstat *q = &s->q[i];
    add_count(t, 0, q->ready, q->approx);
    add_count(t, 1, q->scheduled, q->approx);
    add_count(t, 2, q->running, q->approx);
    add_count(t, 3, q->dead, false);
    if (q->lag_s > t->lag_s)
      t->lag_s = q->lag_s;
  }
}

/* A count and whether it is capped: "<name>":n,"<name>_capped":capped. */
static void json_count(cm_json *j, const char *name, long n, bool capped)
{
  char key[32];
  cm_json_int(j, name, n);
  snprintf(key, sizeof key, "%s_capped", name);
  cm_json_bool(j, key, capped);
}

/* A queue's count: up to the cap, capped past it. */
static void json_qcount(cm_json *j, const char *name, long n)
{
  json_count(j, name, n > QV_COUNT_CAP ? QV_COUNT_CAP : n, n > QV_COUNT_CAP);
}

static void json_hint(cm_json *j, const char *key, const hint *h)
{
  cm_json_obj(j, key);
  cm_json_str(j, "queue", h->queue);
  cm_json_num_or_null(j, "arrivals_per_min", h->in);
  cm_json_num_or_null(j, "completions_per_min", h->done);
  cm_json_int(j, "workers", h->workers);
  cm_json_num_or_null(j, "per_worker_per_min", h->per_worker);
  if (h->needed < 0)
    cm_json_raw(j, "workers_needed", NULL);
  else
    cm_json_int(j, "workers_needed", h->needed);
  cm_json_str(j, "reason", h->text);
  cm_json_end(j);
}

static void print_json(FILE *f, oq_db *db, const qv_snapshot *s, const rates *r,
                       const hints *hs)
{
  char when[40];
  totals t;
  static const char *const cols[4] = {"ready", "scheduled", "running", "dead"};
  cm_json j;
  cm_json_init(&j, f);
  cm_json_obj(&j, NULL);
  cm_json_str(&j, "time", cm_fmt_utc(when, sizeof when, s->now_s));
  cm_json_num(&j, "now", s->now_s);
  cm_json_str(&j, "engine",
              oq_db_engine(db) == OQ_ENGINE_COCKROACH ? "cockroachdb"
                                                      : "postgres");
  cm_json_bool(&j, "history", s->history);
  cm_json_num(&j, "sample_window_s", r->window_s);
  cm_json_arr(&j, "queues");
  for (int i = 0; i < s->nq; i++) {
    const qv_qstat *q = &s->q[i];
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "queue", q->queue);
    json_qcount(&j, "ready", q->ready);
    json_qcount(&j, "scheduled", q->scheduled);
    json_qcount(&j, "running", q->running);
    json_qcount(&j, "dead", q->dead);
    json_qcount(&j, "blocked_keys", q->blocked);
    cm_json_bool(&j, "paused", q->paused);
    if (q->max_running < 0)
      cm_json_raw(&j, "concurrency_limit", NULL);
    else
      cm_json_int(&j, "concurrency_limit", q->max_running);
    if (q->rate_limit < 0) {
      cm_json_raw(&j, "rate_limit", NULL);
    } else {
      cm_json_int(&j, "rate_limit", q->rate_limit);
      cm_json_int(&j, "rate_interval_ms", q->rate_interval_ms);
    }
    cm_json_bool(&j, "approximate", q->approx);
    cm_json_num_or_null(&j, "lag_s", q->lag_s);
    cm_json_num_or_null(&j, "in_per_min", r->in_q[i]);
    cm_json_num_or_null(&j, "done_per_min", r->done_q[i]);
    cm_json_int(&j, "dead_per_min", q->died_60s);
    cm_json_end(&j);
  }
  cm_json_end(&j);
  sum_queues(s, &t);
  cm_json_int(&j, "more_queues", s->more_queues);
  cm_json_obj(&j, "total");
  for (int c = 0; c < 4; c++)
    json_count(&j, cols[c], t.n[c], t.cap[c]);
  cm_json_num_or_null(&j, "lag_s", t.lag_s);
  cm_json_num_or_null(&j, "in_per_min", r->in_total);
  cm_json_str(&j, "in_source", r->in_src);
  cm_json_num_or_null(&j, "done_per_min", r->done_total);
  cm_json_str(&j, "done_source", r->done_src);
  cm_json_num(&j, "window_s", r->total_window_s);
  cm_json_end(&j);
  cm_json_arr(&j, "sessions");
  for (int i = 0; i < s->ns; i++) {
    const qv_sstat *x = &s->s[i];
    cm_json_obj(&j, NULL);
    cm_json_str(&j, "id", x->id);
    cm_json_str(&j, "role",
                x->leader        ? "leader"
                : x->coordinator ? "coordinator"
                                 : "worker");
    cm_json_str(&j, "hostname", x->hostname);
    cm_json_int(&j, "pid", x->pid);
    cm_json_str(&j, "version", x->version);
    cm_json_str(&j, "queues", x->queues);
    cm_json_int(&j, "claims", x->claims);
    cm_json_num(&j, "heartbeat_age_s", x->heartbeat_age_s);
    cm_json_num(&j, "expiry_s", x->expiry_s);
    cm_json_num(&j, "age_s", x->age_s);
    cm_json_end(&j);
  }
  cm_json_end(&j);
  json_hint(&j, "scaling", &hs->total);
  cm_json_arr(&j, "scaling_per_queue");
  for (int i = 0; i < hs->nq; i++)
    json_hint(&j, NULL, &hs->q[i]);
  cm_json_end(&j);
  cm_json_end(&j); /* the object, and its newline */
}

/* Print prefix + text, wrapped at width columns on spaces, continuation
 * lines indented under the text. */
static void wrap(FILE *f, const char *prefix, const char *raw, int width)
{
  /* hints name queues: outside text, escaped for the terminal */
  char safe[4 * sizeof(((hint *)0)->text)];
  oq_text_escape(safe, sizeof safe, raw);
  const char *text = safe;
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

static void print_human(FILE *f, const qv_snapshot *s, const rates *r,
                        const hints *hs)
{
  char when[40], b[8][32];
  totals t;
  cm_fmt_utc(when, sizeof when, s->now_s);
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
    const qv_qstat *q = &s->q[i];
    qv_fmt_count(b[0], sizeof b[0], q->ready);
    qv_fmt_count(b[1], sizeof b[1], q->scheduled);
    qv_fmt_count(b[2], sizeof b[2], q->running);
    qv_fmt_count(b[3], sizeof b[3], q->dead);
    cm_fmt_dur(b[4], sizeof b[4], q->lag_s);
    qv_fmt_rate(b[5], sizeof b[5], r->in_q[i]);
    qv_fmt_rate(b[6], sizeof b[6], r->done_q[i]);
    char qname[19 * 6];
    oq_text_escape(qname, sizeof qname, q->queue); /* outside text */
    char lim[64] = "";
    if (q->max_running >= 0)
      snprintf(lim, sizeof lim, " limit %ld", q->max_running);
    if (q->rate_limit >= 0) {
      char per[16];
      size_t used = strlen(lim);
      cm_fmt_dur(per, sizeof per, (double)q->rate_interval_ms / 1000.0);
      snprintf(lim + used, sizeof lim - used, " rate %ld/%s", q->rate_limit,
               per);
    }
    char blk[48] = ""; /* `onceq keys --blocked` lists them */
    if (q->blocked > 0) {
      qv_fmt_count(b[7], sizeof b[7], q->blocked);
      snprintf(blk, sizeof blk, " %s blocked key%s", b[7],
               q->blocked == 1 ? "" : "s");
    }
    fprintf(f, "%-18.18s %8s %8s %8s %8s %8s %7s %8s%s%s%s%s\n", qname, b[0],
            b[1], b[2], b[3], b[4], b[5], b[6], q->approx ? " ~" : "",
            q->paused ? " paused" : "", lim, blk);
  }
  sum_queues(s, &t);
  if (s->nq == 0)
    fprintf(f, "(no queues: nothing ready, scheduled, running or dead)\n");
  if (s->more_queues > 0)
    fprintf(f, "(%d more queue(s) not shown)\n", s->more_queues);
  /* totals of capped counts are lower bounds: mark them with '+' */
  for (int c = 0; c < 4; c++)
    snprintf(b[c], sizeof b[c], "%ld%s", t.n[c], t.cap[c] ? "+" : "");
  cm_fmt_dur(b[4], sizeof b[4], t.lag_s);
  qv_fmt_rate(b[5], sizeof b[5], r->in_total);
  qv_fmt_rate(b[6], sizeof b[6], r->done_total);
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
    const qv_sstat *x = &s->s[i];
    qv_fmt_count(b[0], sizeof b[0], x->claims);
    cm_fmt_dur(b[1], sizeof b[1], x->heartbeat_age_s);
    cm_fmt_dur(b[2], sizeof b[2], x->expiry_s);
    cm_fmt_dur(b[3], sizeof b[3], x->age_s);
    /* a session's hostname is whatever its program wrote: outside text */
    char host[128]; /* shown cut to 16 columns anyway */
    oq_text_escape(host, sizeof host, x->hostname ? x->hostname : "");
    fprintf(f, "%-8.8s %-11s %-16.16s %7ld %7s %10s %7s %7s\n", x->id,
            x->leader        ? "leader"
            : x->coordinator ? "coordinator"
                             : "worker",
            host, x->pid, b[0], b[1], b[2], b[3]);
  }
  fputc('\n', f);
  if (hs->nq == 0) {
    wrap(f, "scaling: ", hs->total.text, 79);
    return;
  }
  /* per queue, for the queues that have something going on */
  bool first = true;
  for (int i = 0; i < hs->nq; i++) {
    const qv_qstat *q = &s->q[i];
    if (q->ready == 0 && q->running == 0 && !(hs->q[i].in > 0))
      continue;
    wrap(f, first ? "scaling: " : "         ", hs->q[i].text, 79);
    first = false;
  }
  if (first)
    wrap(f, "scaling: ", hs->total.text, 79);
}

int qv_view_stats(FILE *f, oq_db *db, bool json, const qv_snapshot *s,
                  const qv_snapshot *old)
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

int qv_view_hints(const qv_snapshot *s, const qv_snapshot *old, qv_view_hint *q,
                  qv_view_hint *total)
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
    q[i].window_s = 0;
    q[i].source = NULL;
    snprintf(q[i].text, sizeof q[i].text, "%s", hs.q ? hs.q[i].text : "");
  }
  total->in_per_min = r.in_total;
  total->done_per_min = r.done_total;
  total->window_s = r.total_window_s;
  total->source = r.in_src;
  snprintf(total->text, sizeof total->text, "%s", hs.total.text);
  free(hs.q);
  rates_free(&r);
  return 0;
}
