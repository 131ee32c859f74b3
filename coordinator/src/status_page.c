/*
 * status_page.c: the coordinator's status page and its JSON endpoints
 * (status_page.h).
 *
 * Terms: a view is one request's answer, built into a memory stream from
 * one snapshot of the queues and sessions (qstats.h), the partition report
 * and the latest dead letters. A sample is the time and table counters of
 * an earlier snapshot: without history, a PostgreSQL database's rates
 * (all queues only) are the counters' growth since the oldest sample, so
 * they cover the last minute or so of page loads, as `onceq stats
 * --watch` does with its own samples (a single `onceq stats` samples twice
 * instead). Samples are at least 1 s apart, so many browsers do not fill
 * the ring with near-duplicates.
 *
 * Escaping: text from the database goes through html_text (element text
 * and attribute values alike: & < > " ' become entities), never printf'd
 * as is. Numbers are formatted by us.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "fmt.h"
#include "qstats.h"
#include "stats_view.h"
#include "status_page.h"
#include "views.h"

#define DEAD_SHOWN 50      /* latest dead letters on the page and /api/dead */
#define ERROR_SHOWN 300    /* characters of a last_error on the page */
#define PAYLOAD_SHOWN 160  /* characters of a payload on the page */
#define SESSIONS_SHOWN 600 /* session rows on the page */
#define REFRESH_S 5        /* the page reloads itself this often */
#define SAMPLES_MAX 64     /* samples kept: 1 s apart, ~QV_STATS_WINDOW_S */
#define SAMPLE_GAP_S 1.0   /* least time between two samples kept */

struct co_status {
  pthread_mutex_t mu;
  oq_db_opts dbo;
  char *conninfo; /* dbo.conninfo's copy */
  char *token;    /* NULL: no token asked */
  oq_db *db;      /* (mu) opened on first use; closed after a failure */
  /* (mu) oldest first; counters only: q, s are NULL (stats_view.h) */
  qv_snapshot samples[SAMPLES_MAX];
  int nsamples;
};

co_status *co_status_new(const oq_db_opts *dbo, const char *token)
{
  co_status *st = calloc(1, sizeof *st);
  if (!st)
    return NULL;
  st->dbo = *dbo;
  st->dbo.application_name = "onceq-status";
  st->conninfo = dbo->conninfo ? strdup(dbo->conninfo) : NULL;
  st->token = token && *token ? strdup(token) : NULL;
  if ((dbo->conninfo && !st->conninfo) || (token && *token && !st->token) ||
      pthread_mutex_init(&st->mu, NULL) != 0) {
    free(st->conninfo);
    free(st->token);
    free(st);
    return NULL;
  }
  st->dbo.conninfo = st->conninfo;
  return st;
}

void co_status_free(co_status *st)
{
  if (!st)
    return;
  oq_db_close(st->db);
  pthread_mutex_destroy(&st->mu);
  free(st->conninfo);
  free(st->token);
  free(st);
}

/* ---- rate samples ------------------------------------------------------ */

/* The sample the rates are taken against: the oldest kept, or NULL. */
static const qv_snapshot *rate_base(const co_status *st)
{
  return st->nsamples > 0 ? &st->samples[0] : NULL;
}

/* Keep cur's time and counters. Samples go once the next one is already a
 * whole window old, so the base covers at least the window when the page
 * is loaded often enough, and the newest sample stays whatever its age. */
static void rate_keep(co_status *st, const qv_snapshot *cur)
{
  int drop = 0;
  while (drop + 1 < st->nsamples &&
         cur->now_s - st->samples[drop + 1].now_s >= QV_STATS_WINDOW_S)
    drop++;
  if (drop == 0 && st->nsamples == SAMPLES_MAX)
    drop = 1;
  memmove(st->samples, st->samples + drop,
          (size_t)(st->nsamples - drop) * sizeof st->samples[0]);
  st->nsamples -= drop;
  if (st->nsamples > 0 &&
      cur->now_s - st->samples[st->nsamples - 1].now_s < SAMPLE_GAP_S)
    return;
  qv_snapshot c = *cur;
  c.q = NULL;
  c.nq = 0;
  c.more_queues = 0;
  c.s = NULL;
  c.ns = 0;
  st->samples[st->nsamples++] = c;
}

/* ---- HTML helpers ------------------------------------------------------ */

/* Text from outside as HTML (element text or a quoted attribute value),
 * at most max characters (code points; 0: all), with "…" when cut. */
static void html_text_max(FILE *f, const char *s, size_t max)
{
  size_t chars = 0;
  if (!s)
    return;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if ((*p & 0xC0) != 0x80 && max && ++chars > max) {
      fputs("…", f);
      return;
    }
    switch (*p) {
    case '&':
      fputs("&amp;", f);
      break;
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    case '\'':
      fputs("&#39;", f);
      break;
    default:
      fputc(*p, f);
    }
  }
}

static void html_text(FILE *f, const char *s)
{
  html_text_max(f, s, 0);
}

/* A stable hue for an owner, so its parts share a colour. */
static int hue_of(const char *id)
{
  unsigned h = 2166136261u;
  for (const char *p = id; *p; p++)
    h = (h ^ (unsigned char)*p) * 16777619u;
  return (int)(h % 360);
}

static const char css[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;"
    "margin:0;background:#f6f7f9;color:#1d2330}"
    "header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;"
    "gap:24px;align-items:baseline;flex-wrap:wrap}"
    "header h1{font-size:18px;margin:0}header span{opacity:.8}"
    "main{padding:12px 20px}"
    "section{background:#fff;border:1px solid #dde1e7;border-radius:6px;"
    "margin:0 0 14px;padding:10px 14px;overflow-x:auto}"
    "h2{font-size:15px;margin:2px 0 8px}"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:14px}"
    ".card{background:#fff;border:1px solid #dde1e7;border-radius:6px;"
    "padding:8px 16px;min-width:110px}"
    ".card strong{display:block;font-size:22px}.card small{color:#5b6475}"
    "table{border-collapse:collapse;width:100%}"
    "th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eef0f3;"
    "vertical-align:top}"
    "th{font-weight:600;color:#5b6475;font-size:12px;text-transform:uppercase}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "tfoot td{font-weight:600;border-top:1px solid #c9ced6}"
    "td.err{color:#a4262c;white-space:pre-wrap;word-break:break-word}"
    "td.pl,code{font-family:ui-monospace,monospace;font-size:12px;"
    "word-break:break-all}"
    ".hint{color:#5b6475;font-size:12px}"
    ".bad,.blocked{color:#a4262c;font-weight:600}"
    ".map{display:flex;flex-wrap:wrap;gap:2px}"
    ".p{display:inline-block;min-width:22px;padding:2px 3px;font-size:11px;"
    "text-align:center;border-radius:3px;color:#1d2330}"
    ".p.free{background:#e3e5e8;color:#8a919e}"
    "footer{color:#5b6475;font-size:12px;padding:0 20px 16px}";

/* ---- the page ---------------------------------------------------------- */

typedef struct dead_rows {
  FILE *f;
  long n;
} dead_rows;

/* id, queue, attempts, max_attempts, seconds since death, last_error,
 * payload (both cut by the statement) */
static oq_err dead_row(void *ud, int ncols, const char *const *v)
{
  dead_rows *d = ud;
  char ago[32];
  if (ncols < 7)
    return OQ_ERR_SQL;
  d->n++;
  cm_fmt_dur(ago, sizeof ago, v[4] ? strtod(v[4], NULL) : -1);
  fputs("<tr class=\"dead\"><td><code>", d->f);
  html_text(d->f, v[0]);
  fputs("</code></td><td>", d->f);
  html_text(d->f, v[1]);
  fprintf(d->f, "</td><td class=\"n\">%d/%d</td><td>%s ago</td>",
          (int)strtol(v[2] ? v[2] : "0", NULL, 10),
          (int)strtol(v[3] ? v[3] : "0", NULL, 10), ago);
  fputs("<td class=\"err\">", d->f);
  html_text_max(d->f, v[5], ERROR_SHOWN);
  fputs("</td><td class=\"pl\">", d->f);
  html_text_max(d->f, v[6], PAYLOAD_SHOWN);
  fputs("</td></tr>\n", d->f);
  return OQ_OK;
}

/* The all-queues row, `onceq stats`'s TOTAL: summed counts (a "+" when a
 * count was capped) and the throughput over all queues. */
static void page_total(FILE *f, const qv_snapshot *s, const qv_view_hint *total)
{
  long sum[4] = {0, 0, 0, 0};
  bool approx = false;
  for (int i = 0; i < s->nq; i++) {
    sum[0] += s->q[i].ready;
    sum[1] += s->q[i].scheduled;
    sum[2] += s->q[i].running;
    sum[3] += s->q[i].dead;
    approx = approx || s->q[i].approx;
  }
  char c[4][32], in[32], done[32];
  for (int k = 0; k < 4; k++)
    qv_fmt_count(c[k], sizeof c[k], sum[k]);
  qv_fmt_rate(in, sizeof in, total->in_per_min);
  qv_fmt_rate(done, sizeof done, total->done_per_min);
  fprintf(f,
          "</tbody><tfoot><tr id=\"total-row\"><td>all queues</td>"
          "<td class=\"n\">%s%s</td><td class=\"n\">%s</td>"
          "<td class=\"n\">%s</td><td class=\"n\">%s</td><td></td>"
          "<td class=\"n\" id=\"total-in\">%s</td>"
          "<td class=\"n\" id=\"total-done\">%s</td><td></td></tr>"
          "</tfoot>",
          c[0], approx ? "+" : "", c[1], c[2], c[3], in, done);
}

/* Where the throughput comes from and what time it covers. */
static void page_rates_note(FILE *f, const qv_snapshot *s,
                            const qv_view_hint *total)
{
  char w[32];
  cm_fmt_dur(w, sizeof w, total->window_s);
  fputs("<p class=\"hint\" id=\"rate-window\">", f);
  if (total->source && strcmp(total->source, "history") == 0)
    fprintf(f,
            "In/min and done/min: the last %s, from the history "
            "(onceq_done).",
            w);
  else if (total->source && strcmp(total->source, "pg_stat") == 0)
    fprintf(f,
            "In/min and done/min: all queues over the last %s, from "
            "PostgreSQL's table counters (per queue they need workers "
            "with --history).",
            w);
  else if (s->counters)
    fputs("In/min and done/min: from the next load on (PostgreSQL's table "
          "counters are compared between loads; per queue they need workers "
          "with --history).",
          f);
  else
    fputs("In/min and done/min need workers with --history.", f);
  fputs("</p>", f);
}

static void page_queues(FILE *f, const qv_snapshot *s, const qv_view_hint *h,
                        const qv_view_hint *total)
{
  fputs("<section id=\"queues\"><h2>Queues</h2><table><thead><tr>"
        "<th>Queue</th><th>Ready</th><th>Delayed</th><th>Claimed</th>"
        "<th>Dead</th><th>Lag</th><th>In/min</th><th>Done/min</th>"
        "<th>Scaling hint</th></tr></thead><tbody>\n",
        f);
  for (int i = 0; i < s->nq; i++) {
    const qv_qstat *q = &s->q[i];
    char c[4][32], lag[32], in[32], done[32];
    qv_fmt_count(c[0], sizeof c[0], q->ready);
    qv_fmt_count(c[1], sizeof c[1], q->scheduled);
    qv_fmt_count(c[2], sizeof c[2], q->running);
    qv_fmt_count(c[3], sizeof c[3], q->dead);
    cm_fmt_dur(lag, sizeof lag, q->lag_s);
    qv_fmt_rate(in, sizeof in, h[i].in_per_min);
    qv_fmt_rate(done, sizeof done, h[i].done_per_min);
    fputs("<tr data-queue=\"", f);
    html_text(f, q->queue);
    fputs(q->paused ? "\" data-paused=\"1\"><td class=\"q\">"
                    : "\"><td class=\"q\">",
          f);
    html_text(f, q->queue);
    if (q->paused) /* `onceq pause`: claims skip it */
      fputs(" <span class=\"paused\">paused</span>", f);
    if (q->max_running >= 0) /* `onceq limit` */
      fprintf(f, " <span class=\"limit\">limit %ld</span>", q->max_running);
    if (q->rate_limit > 0) { /* `onceq limit --rate` */
      char per[16];
      cm_fmt_dur(per, sizeof per, (double)q->rate_interval_ms / 1000.0);
      fprintf(f, " <span class=\"rate\">rate %ld/%s</span>", q->rate_limit,
              per);
    }
    if (q->blocked > 0) { /* `onceq keys --blocked` lists them */
      char nb[32];
      qv_fmt_count(nb, sizeof nb, q->blocked);
      fprintf(f,
              " <span class=\"blocked\" title=\"ordering keys whose head "
              "item failed and waits (onceq keys --blocked)\">%s blocked "
              "key%s</span>",
              nb, q->blocked == 1 ? "" : "s");
    }
    fprintf(f,
            "</td><td class=\"n ready\">%s%s</td><td class=\"n delayed\">%s"
            "</td><td class=\"n claimed\">%s</td><td class=\"n dead%s\">%s"
            "</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
            "<td class=\"n\">%s</td><td class=\"hint\">",
            c[0], q->approx ? "+" : "", c[1], c[2], q->dead > 0 ? " bad" : "",
            c[3], lag, in, done);
    html_text(f, h[i].text);
    fputs("</td></tr>\n", f);
  }
  if (s->nq == 0)
    fputs("<tr><td colspan=\"9\">no items and no dead letters</td></tr>\n", f);
  page_total(f, s, total);
  fputs("</table>", f);
  if (s->more_queues > 0)
    fprintf(f, "<p class=\"hint\">%d more queue(s) not shown</p>",
            s->more_queues);
  page_rates_note(f, s, total);
  fputs("<p class=\"hint\" id=\"hint-total\">Scaling: ", f);
  html_text(f, total->text);
  fputs("</p></section>\n", f);
}

static void page_sessions(FILE *f, const qv_snapshot *s)
{
  fprintf(f,
          "<section id=\"sessions\"><h2>Live sessions (%d)</h2><table><thead>"
          "<tr><th>Session</th><th>Role</th><th>Host</th><th>PID</th>"
          "<th>Heartbeat</th><th>Expiry</th><th>Age</th><th>Holds</th>"
          "<th>Queues</th></tr></thead><tbody>\n",
          s->ns);
  for (int i = 0; i < s->ns && i < SESSIONS_SHOWN; i++) {
    const qv_sstat *x = &s->s[i];
    char beat[32], exp[32], age[32], claims[32];
    cm_fmt_dur(beat, sizeof beat, x->heartbeat_age_s);
    cm_fmt_dur(exp, sizeof exp, x->expiry_s);
    cm_fmt_dur(age, sizeof age, x->age_s);
    qv_fmt_count(claims, sizeof claims, x->claims);
    bool late = x->heartbeat_age_s > x->expiry_s;
    fputs("<tr class=\"session\" data-session=\"", f);
    html_text(f, x->id);
    fprintf(f, "\"><td><code>%.8s</code></td><td>%s</td><td class=\"host\">",
            x->id,
            x->leader        ? "leader"
            : x->coordinator ? "coordinator"
                             : "worker");
    html_text(f, x->hostname);
    fprintf(f,
            "</td><td class=\"n\">%ld</td><td class=\"n%s\">%s ago</td>"
            "<td class=\"n\">%s</td><td class=\"n\">%s</td>"
            "<td class=\"n claims\">%s</td><td>",
            x->pid, late ? " bad" : "", beat, exp, age, claims);
    html_text(f, x->queues);
    fputs("</td></tr>\n", f);
  }
  fputs("</tbody></table>", f);
  if (s->ns > SESSIONS_SHOWN)
    fprintf(f,
            "<p class=\"hint\">%d more session(s): /api/sessions has them "
            "all</p>",
            s->ns - SESSIONS_SHOWN);
  fputs("</section>\n", f);
}

static void page_parts(FILE *f, const oq_parts_report *r)
{
  fprintf(f,
          "<section id=\"parts\"><h2>Partitions</h2><p class=\"hint\">"
          "<span id=\"parts-count\">%d</span> parts%s, %d live member(s), "
          "%d owner(s), <span id=\"parts-unowned\">%d</span> without a live "
          "owner; imbalance %.2f</p><div class=\"map\">",
          r->partitions, r->is_set ? "" : " (default, not set)", r->members,
          r->owners, r->unowned, r->imbalance);
  for (int i = 0; i < r->partitions; i++) {
    const oq_part_info *p = &r->parts[i];
    if (p->owner[0] && p->owner_live) {
      fprintf(f,
              "<span class=\"p owned\" style=\"background:hsl(%d,65%%,78%%)\""
              " title=\"part %d: ",
              hue_of(p->owner), p->part);
      html_text(f, p->owner_host);
      fprintf(f, " pid %d, session %.8s, %ld ready, %ld claimed\">%d</span>",
              p->owner_pid, p->owner, p->ready, p->claimed, p->part);
    } else {
      fprintf(f,
              "<span class=\"p free\" title=\"part %d: no live owner, %ld "
              "ready\">%d</span>",
              p->part, p->ready, p->part);
    }
  }
  fputs("</div></section>\n", f);
}

/* The whole page into f; OQ_OK or the database error (on db). */
static oq_err page(co_status *st, FILE *f, const qv_snapshot *s,
                   const qv_snapshot *old)
{
  oq_db *db = st->db;
  qv_view_hint *h = calloc((size_t)(s->nq > 0 ? s->nq : 1), sizeof *h);
  qv_view_hint total;
  oq_parts_report *parts = NULL;
  oq_err e = OQ_OK;
  if (!h || qv_view_hints(s, old, h, &total) != 0) {
    e = OQ_ERR_NOMEM;
    goto out;
  }
  e = oq_parts_report_read(db, &parts);
  if (e != OQ_OK)
    goto out;
  long ready = 0, running = 0, dead = 0;
  int workers = 0;
  for (int i = 0; i < s->nq; i++) {
    ready += s->q[i].ready;
    running += s->q[i].running;
    dead += s->q[i].dead;
  }
  for (int i = 0; i < s->ns; i++)
    workers += !s->s[i].coordinator;
  char when[40], cr[32], cc[32], cd[32];
  cm_fmt_utc(when, sizeof when, s->now_s);
  qv_fmt_count(cr, sizeof cr, ready);
  qv_fmt_count(cc, sizeof cc, running);
  qv_fmt_count(cd, sizeof cd, dead);
  fprintf(
      f,
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"%d\">"
      "<meta name=\"viewport\" content=\"width=device-width\">"
      "<title>onceq status</title><style>%s</style></head><body>\n"
      "<header><h1>onceq</h1><span>%s</span><span>%s</span>"
      "<span>refreshes every %d s</span></header><main>\n"
      "<div class=\"cards\">"
      "<div class=\"card\"><strong id=\"total-ready\">%s</strong><small>ready"
      "</small></div>"
      "<div class=\"card\"><strong "
      "id=\"total-claimed\">%s</strong><small>claimed"
      "</small></div>"
      "<div class=\"card\"><strong id=\"total-dead\"%s>%s</strong><small>dead"
      "</small></div>"
      "<div class=\"card\"><strong id=\"workers\">%d</strong><small>worker "
      "session(s)</small></div>"
      "<div class=\"card\"><strong "
      "id=\"queues-count\">%d</strong><small>queue(s)"
      "</small></div></div>\n",
      REFRESH_S, css, when,
      oq_db_engine(db) == OQ_ENGINE_COCKROACH ? "CockroachDB" : "PostgreSQL",
      REFRESH_S, cr, cc, dead > 0 ? " class=\"bad\"" : "", cd, workers, s->nq);
  page_queues(f, s, h, &total);
  page_sessions(f, s);
  page_parts(f, parts);
  fprintf(f, "<section id=\"dead\"><h2>Latest dead letters</h2><table><thead>"
             "<tr><th>Item</th><th>Queue</th><th>Attempts</th><th>Died</th>"
             "<th>Last error</th><th>Payload</th></tr></thead><tbody>\n");
  dead_rows d = {f, 0};
  e = qv_dead_latest(db, DEAD_SHOWN, dead_row, &d);
  if (e != OQ_OK)
    goto out;
  if (d.n == 0)
    fputs("<tr><td colspan=\"6\">none</td></tr>\n", f);
  fprintf(f, "</tbody></table></section>\n</main><footer>read-only; JSON: "
             "<code>/api/stats</code> <code>/api/sessions</code> "
             "<code>/api/dead</code> <code>/api/parts</code> (the shapes of "
             "<code>onceq stats|sessions|list --state dead|parts --json</code>)"
             "</footer></body></html>\n");
out:
  oq_parts_report_free(parts);
  free(h);
  return e;
}

/* ---- requests ---------------------------------------------------------- */

/* Constant-time comparison of the Authorization header with the token. */
static bool authorized(const co_status *st, const char *authorization)
{
  if (!st->token)
    return true;
  if (!authorization || strncmp(authorization, "Bearer ", 7) != 0)
    return false;
  const char *got = authorization + 7;
  size_t n = strlen(st->token), m = strlen(got);
  unsigned diff = (unsigned)(n ^ m);
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned)(st->token[i] ^ (i < m ? got[i] : 0));
  return diff == 0;
}

static int text_reply(const char *msg, int status, char **body, size_t *len,
                      const char **ctype)
{
  *body = strdup(msg);
  *len = *body ? strlen(*body) : 0;
  *ctype = "text/plain; charset=utf-8";
  return *body ? status : 500;
}

typedef enum route {
  R_PAGE,
  R_STATS,
  R_SESSIONS,
  R_DEAD,
  R_PARTS,
  R_NONE
} route;

static route route_of(const char *url)
{
  if (strcmp(url, "/") == 0 || strcmp(url, "/status") == 0)
    return R_PAGE;
  if (strcmp(url, "/api/stats") == 0)
    return R_STATS;
  if (strcmp(url, "/api/sessions") == 0)
    return R_SESSIONS;
  if (strcmp(url, "/api/dead") == 0)
    return R_DEAD;
  if (strcmp(url, "/api/parts") == 0)
    return R_PARTS;
  return R_NONE;
}

/* Build the answer of route r into f; OQ_OK or an error (on st->db). */
static oq_err build(co_status *st, route r, FILE *f)
{
  oq_db *db = st->db;
  if (r == R_SESSIONS)
    return qv_view_sessions(f, db);
  if (r == R_DEAD)
    return qv_view_dead(f, db, DEAD_SHOWN);
  if (r == R_PARTS) {
    oq_parts_report *p = NULL;
    oq_err e = oq_parts_report_read(db, &p);
    if (e == OQ_OK)
      qv_view_parts(f, p);
    oq_parts_report_free(p);
    return e;
  }
  qv_snapshot s;
  oq_err e = qv_snapshot_take(db, true, &s);
  if (e != OQ_OK)
    return e;
  const qv_snapshot *old = rate_base(st);
  if (r == R_STATS)
    e = qv_view_stats(f, db, true, &s, old) == 0 ? OQ_OK : OQ_ERR_NOMEM;
  else
    e = page(st, f, &s, old);
  rate_keep(st, &s);
  qv_snapshot_free(&s);
  return e;
}

int co_status_serve(void *ud, const char *url, const char *authorization,
                    char **body, size_t *len, const char **ctype)
{
  co_status *st = ud;
  *body = NULL;
  *len = 0;
  route r = route_of(url);
  if (r == R_NONE)
    return text_reply("not found\n", 404, body, len, ctype);
  if (!authorized(st, authorization))
    return text_reply("a bearer token is required (Authorization: Bearer "
                      "TOKEN; --status-token)\n",
                      401, body, len, ctype);
  int status = 200;
  char err[OQ_ERRBUF_SIZE] = "";
  pthread_mutex_lock(&st->mu);
  if (!st->db && oq_db_open(&st->dbo, &st->db, err, sizeof err) != OQ_OK)
    st->db = NULL;
  if (!st->db) {
    pthread_mutex_unlock(&st->mu);
    char msg[OQ_ERRBUF_SIZE + 64];
    snprintf(msg, sizeof msg, "database unavailable: %s\n", err);
    return text_reply(msg, 503, body, len, ctype);
  }
  FILE *f = open_memstream(body, len);
  oq_err e = f ? build(st, r, f) : OQ_ERR_NOMEM;
  if (f)
    fclose(f);
  if (e != OQ_OK) {
    char msg[OQ_ERRBUF_SIZE + 64];
    snprintf(msg, sizeof msg, "status unavailable: %s\n",
             e == OQ_ERR_NOMEM ? "out of memory" : oq_db_errmsg(st->db));
    if (!oq_db_connected(st->db)) {
      oq_db_close(st->db);
      st->db = NULL;
    }
    pthread_mutex_unlock(&st->mu);
    free(*body);
    return text_reply(msg, 503, body, len, ctype);
  }
  pthread_mutex_unlock(&st->mu);
  *ctype = r == R_PAGE ? "text/html; charset=utf-8"
                       : "application/json; charset=utf-8";
  return status;
}
