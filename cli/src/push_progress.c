/* push_progress.c: the progress line on stderr, the spans of lines
 * (inserted, rejected, ...) and the summary (push.h). */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonline.h"
#include "push.h"

double push_now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void push_span_add(push_state *st, long first, long last, push_span_kind kind,
                   const char *why)
{
  if (last < first)
    return;
  if (st->nspans > 0) {
    push_span *p = &st->spans[st->nspans - 1];
    if (kind == SPAN_INSERTED && p->kind == SPAN_INSERTED &&
        p->last + 1 == first) {
      p->last = last;
      return;
    }
  }
  if (st->nspans == st->cap_spans) {
    size_t nc = st->cap_spans ? st->cap_spans * 2 : 16;
    push_span *s = realloc(st->spans, nc * sizeof *s);
    if (!s) {
      st->oom = true;
      return;
    }
    st->spans = s;
    st->cap_spans = nc;
  }
  push_span *s = &st->spans[st->nspans++];
  s->first = first;
  s->last = last;
  s->kind = kind;
  /* cut to the buffer on purpose: a span names its reason in one line */
  snprintf(s->why, sizeof s->why, "%.*s", (int)sizeof s->why - 1,
           why ? why : "");
}

void push_span_extend(push_state *st, long last)
{
  if (st->nspans > 0 && st->spans[st->nspans - 1].last < last)
    st->spans[st->nspans - 1].last = last;
}

static void fmt_count(long n, char *buf, size_t len)
{
  snprintf(buf, len, "%ld", n);
}

void push_progress(push_state *st, const char *verb, bool force)
{
  double t = push_now_s();
  double since = (t - st->last_draw) * 1000.0;
  if (!force && since < (st->tty ? TTY_REDRAW_MS : PLAIN_EVERY_MS))
    return;
  if (!st->tty && st->done_lines == st->last_drawn_lines)
    return; /* nothing new: no line */
  st->last_draw = t;
  st->last_drawn_lines = st->done_lines;
  double el = t - st->t0;
  double rate = el > 0 ? (double)st->done_lines / el : 0;
  char n[32], extra[96] = "", eta[16] = "";
  fmt_count(st->done_lines, n, sizeof n);
  int pct = -1;
  if (st->total_bytes > 0) {
    double f = (double)st->done_bytes / (double)st->total_bytes;
    if (f > 1)
      f = 1;
    pct = (int)(f * 100.0);
    double brate = el > 0 ? (double)st->done_bytes / el : 0;
    if (brate > 0 && st->done_bytes < st->total_bytes)
      cm_fmt_dur(eta, sizeof eta,
                 (double)(st->total_bytes - st->done_bytes) / brate);
    snprintf(extra, sizeof extra, "%s%d%%%s%s", st->tty ? "  " : ", ", pct,
             eta[0] ? (st->tty ? "  ETA " : ", ETA ") : "", eta);
  }
  if (!st->tty) {
    fprintf(stderr, "onceq: push: %s %s lines (%.0f/s%s)\n", verb, n, rate,
            extra);
    return;
  }
  char bar[32] = "";
  if (pct >= 0) {
    int w = 20, full = pct * w / 100;
    bar[0] = '[';
    for (int k = 0; k < w; k++)
      bar[1 + k] = k < full ? '#' : '.';
    bar[w + 1] = ']';
    bar[w + 2] = ' ';
    bar[w + 3] = '\0';
  }
  fprintf(stderr, "\r\033[K%s%s %s lines  %.0f/s%s", bar, verb, n, rate, extra);
  fflush(stderr);
  st->drew_tty = true;
}

void push_progress_clear(push_state *st)
{
  if (st->tty && st->drew_tty) {
    fputs("\r\033[K", stderr);
    st->drew_tty = false;
  }
}

void push_say(push_state *st, const char *fmt, ...)
{
  va_list ap;
  push_progress_clear(st);
  fputs("onceq: push: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* The line of the global ordinal ord (1-based) across batches b[0..nb). */
static long line_of(const push_batch *b, size_t nb, long ord)
{
  for (size_t k = 0; k < nb; k++) {
    if (ord <= (long)b[k].n)
      return b[k].line[ord - 1];
    ord -= (long)b[k].n;
  }
  return 0;
}

void push_print_ids(push_state *st, const push_batch *b, size_t nb)
{
  if (st->o->quiet)
    return;
  for (size_t r = 0; r < st->nins; r++) {
    if (st->o->json) {
      cm_json_obj(&st->j, NULL);
      cm_json_int(&st->j, "line", line_of(b, nb, st->ins_ord[r]));
      cm_json_str(&st->j, "id", st->ins_id[r]);
      cm_json_end(&st->j);
    } else {
      fputs(st->ins_id[r], stdout);
      fputc('\n', stdout);
    }
  }
  fflush(stdout);
}

void push_print_summary(push_state *st, double secs)
{
  char *buf = NULL;
  size_t blen = 0;
  FILE *f = open_memstream(&buf, &blen);
  if (!f)
    return;
  static const char *const label[] = {"inserted line", "rejected line",
                                      "unknown outcome for line",
                                      "not inserted: line"};
  bool any = false;
  for (int kind = SPAN_INSERTED; kind <= SPAN_NOT_INSERTED; kind++) {
    bool first = true;
    for (size_t k = 0; k < st->nspans; k++) {
      const push_span *s = &st->spans[k];
      if ((int)s->kind != kind)
        continue;
      if (first) {
        size_t nk = 0; /* one span of one line: "line 5", else "lines" */
        for (size_t m = 0; m < st->nspans; m++)
          if ((int)st->spans[m].kind == kind)
            nk++;
        fprintf(f, "%s%s%s ", any ? "; " : "", label[kind],
                nk == 1 && s->first == s->last ? "" : "s");
      } else {
        fputs(", ", f);
      }
      if (s->first == s->last)
        fprintf(f, "%ld", s->first);
      else
        fprintf(f, "%ld-%ld", s->first, s->last);
      if (kind != SPAN_INSERTED && s->why[0])
        fprintf(f, " (%s)", s->why);
      first = false;
      any = true;
    }
  }
  fclose(f);
  char tail[160];
  if (st->o->key_field)
    snprintf(tail, sizeof tail, "%ld new item%s, %ld existed already",
             st->inserted, st->inserted == 1 ? "" : "s", st->existed);
  else
    snprintf(tail, sizeof tail, "%ld new item%s", st->inserted,
             st->inserted == 1 ? "" : "s");
  if (!any)
    push_say(st, "nothing to push: no JSON lines on stdin");
  else
    push_say(st, "%s; %s (%.1fs)", buf, tail, secs);
  free(buf);
}

void push_print_json_summary(push_state *st, int rc)
{
  cm_json *j = &st->j;
  cm_json_obj(j, NULL);
  cm_json_arr(j, "inserted");
  for (size_t k = 0; k < st->nspans; k++)
    if (st->spans[k].kind == SPAN_INSERTED) {
      cm_json_arr(j, NULL);
      cm_json_int(j, NULL, st->spans[k].first);
      cm_json_int(j, NULL, st->spans[k].last);
      cm_json_end(j);
    }
  cm_json_end(j);
  cm_json_arr(j, "rejected");
  for (size_t k = 0; k < st->nspans; k++)
    if (st->spans[k].kind != SPAN_INSERTED) {
      cm_json_obj(j, NULL);
      cm_json_int(j, "first", st->spans[k].first);
      cm_json_int(j, "last", st->spans[k].last);
      cm_json_str(j, "outcome",
                  st->spans[k].kind == SPAN_REJECTED  ? "rejected"
                  : st->spans[k].kind == SPAN_UNKNOWN ? "unknown"
                                                      : "not inserted");
      cm_json_str(j, "why", st->spans[k].why);
      cm_json_end(j);
    }
  cm_json_end(j);
  cm_json_int(j, "lines", st->lines);
  cm_json_int(j, "new", st->inserted);
  cm_json_int(j, "existed", st->existed);
  cm_json_int(j, "exit", rc);
  cm_json_end(j);
  fflush(stdout);
}
