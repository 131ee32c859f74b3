/*
 * cmd_push.c: `onceq push`: enqueue one item (PAYLOAD argument, through
 * oq_enqueue), or JSON lines from stdin in bulk.
 *
 * Terms:
 *  - line: one line of stdin, numbered from 1; a blank line is skipped
 *    (it is counted, but it is not an item).
 *  - batch: up to --batch items (default 1000) sent as one JSON array in one
 *    statement (oq_enqueue_many), in its own transaction. Its line range runs
 * from the line after the previous batch to its last line, so the ranges of all
 * batches cover the input without gaps.
 *  - bad line: not JSON (checked here, before anything is sent, by
 *    json_check, jsonline.h: jansson, strict RFC 8259, and what
 *    PostgreSQL's jsonb refuses: \u0000 and unpaired surrogates), or, with
 * --unique-key-field F, not an object whose field F is a string or a number. A
 * line the server still rejects (e.g. a number out of numeric's range) is found
 * by bisecting its batch.
 *
 * Default: a batch with a bad line is not sent; the others are, and the
 * summary names the line ranges inserted and rejected (exit 1). --atomic:
 * every line is read and checked first, then all batches go in one
 * transaction; any bad line means nothing is inserted (exit 2).
 * --unique-key-field F makes a re-run safe: unique_key = the line's field F,
 * and ON CONFLICT (unique_key) DO NOTHING skips lines whose item is still
 * live. The ids of new items go to stdout in input order; progress, errors
 * and the summary go to stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "jsonline.h"
#include "table.h"

/* Longest queue name or unique key push accepts, in bytes: both are index
 * keys (a btree entry holds at most about 2700 bytes) and a queue name
 * travels in the wake-up NOTIFY (payload under 8000 bytes). */
#define MAX_NAME_BYTES 1000
#define DEFAULT_BATCH 1000
#define MAX_BATCH 100000
#define MAX_LINE_BYTES (256u << 20) /* jsonb's own limit is 255 MiB */
#define IDLE_FLUSH_MS 200     /* input paused this long: send what we have */
#define MAX_BATCH_AGE_MS 1000 /* a slow, steady producer: send each second */
#define TTY_REDRAW_MS 100
#define PLAIN_EVERY_MS 1000

/* ------------------------------------------------------------ options */

typedef struct push_opts {
  const char *queue;
  long long priority;
  int64_t delay_ms;
  const char *run_at;
  const char *unique_key;
  long long max_attempts;
  const char *payload;   /* single form; NULL: bulk from stdin */
  const char *key_field; /* --unique-key-field */
  long long batch;
  bool batch_set; /* --batch was given */
  bool atomic, quiet, json;
  bool wait;            /* --wait: wait for the result (cmd_wait.c) */
  long wait_timeout_ms; /* --timeout; < 0: no limit */
} push_opts;

/* ----------------------------------------------------------- the input */

/* A line reader on a file descriptor that can wait with a timeout, so a
 * slow producer's lines are sent without waiting for a full batch. */
typedef struct reader {
  int fd;
  char *buf;
  size_t start, end, cap, scanned; /* scanned: no '\n' in [start,scanned) */
  bool eof;
} reader;

/*
 * The next line (without its '\n') in *line and *len, valid until the next
 * call. Returns 1: a line; 0: end of input; -2: no whole line within
 * timeout_ms (< 0: wait as long as it takes); -3: interrupted by a signal;
 * -1: read error (errno); -4: a line longer than MAX_LINE_BYTES.
 */
static int reader_line(reader *r, int timeout_ms, char **line, size_t *len)
{
  for (;;) {
    size_t from = r->scanned > r->start ? r->scanned : r->start;
    char *nl =
        r->end > from ? memchr(r->buf + from, '\n', r->end - from) : NULL;
    if (nl) {
      *line = r->buf + r->start;
      *len = (size_t)(nl - *line);
      r->start = (size_t)(nl - r->buf) + 1;
      r->scanned = r->start;
      return 1;
    }
    r->scanned = r->end;
    if (r->eof) {
      if (r->end > r->start) {
        *line = r->buf + r->start;
        *len = r->end - r->start;
        r->start = r->scanned = r->end;
        return 1;
      }
      return 0;
    }
    if (r->start > 0) {
      memmove(r->buf, r->buf + r->start, r->end - r->start);
      r->end -= r->start;
      r->scanned -= r->start;
      r->start = 0;
    }
    if (r->end == r->cap) {
      if (r->cap >= MAX_LINE_BYTES)
        return -4;
      size_t nc = r->cap ? r->cap * 2 : 1u << 16;
      char *nb = realloc(r->buf, nc);
      if (!nb) {
        errno = ENOMEM;
        return -1;
      }
      r->buf = nb;
      r->cap = nc;
    }
    if (timeout_ms >= 0) {
      struct pollfd p = {.fd = r->fd, .events = POLLIN};
      int k = poll(&p, 1, timeout_ms);
      if (k < 0 && errno == EINTR)
        return -3;
      if (k == 0)
        return -2;
    }
    ssize_t k = read(r->fd, r->buf + r->end, r->cap - r->end);
    if (k < 0) {
      if (errno == EINTR)
        return -3;
      return -1;
    }
    if (k == 0)
      r->eof = true;
    else
      r->end += (size_t)k;
  }
}

/* ------------------------------------------------------------ batches */

typedef struct batch {
  char *text; /* "[l1,l2,...]" once closed */
  size_t len, cap;
  size_t *off, *ilen; /* each item's place in text */
  long *line;         /* each item's input line */
  size_t n, icap;
  long nitems;                /* non-blank lines, good or bad */
  long first_line, last_line; /* the range this batch covers */
  double started_s;           /* monotonic time of its first item */
  uint64_t bytes;             /* input bytes of that range */
  long bad_line;              /* first bad line, 0 if none */
  char bad_reason[96];        /* its short reason */
  long nbad;
} batch;

static void batch_reset(batch *b, long first_line)
{
  b->len = 0;
  b->n = 0;
  b->nitems = 0;
  b->first_line = first_line;
  b->last_line = first_line - 1;
  b->bytes = 0;
  b->bad_line = 0;
  b->bad_reason[0] = '\0';
  b->nbad = 0;
}

static void batch_free(batch *b)
{
  free(b->text);
  free(b->off);
  free(b->ilen);
  free(b->line);
  memset(b, 0, sizeof *b);
}

static bool grow_text(batch *b, size_t more)
{
  if (b->len + more <= b->cap)
    return true;
  size_t nc = b->cap ? b->cap : 1u << 16;
  while (nc < b->len + more)
    nc *= 2;
  char *t = realloc(b->text, nc);
  if (!t)
    return false;
  b->text = t;
  b->cap = nc;
  return true;
}

/* Append one good item. */
static bool batch_add(batch *b, const char *s, size_t n, long line)
{
  if (b->n == b->icap) {
    size_t nc = b->icap ? b->icap * 2 : 1024;
    size_t *o = realloc(b->off, nc * sizeof *o);
    if (o)
      b->off = o;
    size_t *l = realloc(b->ilen, nc * sizeof *l);
    if (l)
      b->ilen = l;
    long *ln = realloc(b->line, nc * sizeof *ln);
    if (ln)
      b->line = ln;
    if (!o || !l || !ln)
      return false;
    b->icap = nc;
  }
  if (!grow_text(b, n + 3))
    return false;
  b->text[b->len++] = b->n == 0 ? '[' : ',';
  b->off[b->n] = b->len;
  b->ilen[b->n] = n;
  b->line[b->n] = line;
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->n++;
  return true;
}

/* Close the array: "]" and a NUL (the text is a statement parameter). */
static void batch_close(batch *b)
{
  if (b->n == 0)
    return;
  b->text[b->len] = ']';
  b->text[b->len + 1] = '\0';
}

/* --------------------------------------------------------- the outcome */

typedef enum span_kind {
  SPAN_INSERTED,
  SPAN_REJECTED,
  SPAN_UNKNOWN,     /* the commit's outcome is unknown */
  SPAN_NOT_INSERTED /* stopped (error, interrupt) before it went in */
} span_kind;

typedef struct span {
  long first, last;
  span_kind kind;
  char why[160]; /* rejected / unknown / not inserted: the reason */
} span;

typedef struct push_state {
  const push_opts *o;
  oq_db *db;
  oq_enqueue_opts eo; /* queue, priority, delay or run_at, max_attempts */
  /* per batch insert (reset on each run of the transaction) */
  long *ins_ord; /* RETURNING ords */
  char (*ins_id)[37];
  size_t nins, cap_ins;
  /* totals */
  long lines, items, inserted, existed, rejected_items;
  span *spans;
  size_t nspans, cap_spans;
  bool oom;
  /* progress */
  bool tty;
  uint64_t total_bytes; /* 0: unknown */
  uint64_t done_bytes;
  long done_lines; /* lines of batches handled */
  double t0, last_draw;
  long last_drawn_lines;
  bool drew_tty;
  /* --json output of ids */
  cm_json j;
} push_state;

static volatile sig_atomic_t interrupted; /* the signal, 0 if none */

static void on_signal(int sig)
{
  interrupted = sig;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_span(push_state *st, long first, long last, span_kind kind,
                     const char *why)
{
  if (last < first)
    return;
  if (st->nspans > 0) {
    span *p = &st->spans[st->nspans - 1];
    if (kind == SPAN_INSERTED && p->kind == SPAN_INSERTED &&
        p->last + 1 == first) {
      p->last = last;
      return;
    }
  }
  if (st->nspans == st->cap_spans) {
    size_t nc = st->cap_spans ? st->cap_spans * 2 : 16;
    span *s = realloc(st->spans, nc * sizeof *s);
    if (!s) {
      st->oom = true;
      return;
    }
    st->spans = s;
    st->cap_spans = nc;
  }
  span *s = &st->spans[st->nspans++];
  s->first = first;
  s->last = last;
  s->kind = kind;
  /* cut to the buffer on purpose: a span names its reason in one line */
  snprintf(s->why, sizeof s->why, "%.*s", (int)sizeof s->why - 1,
           why ? why : "");
}

/* Trailing blank lines after the last batch belong to the last span. */
static void extend_last_span(push_state *st, long last)
{
  if (st->nspans > 0 && st->spans[st->nspans - 1].last < last)
    st->spans[st->nspans - 1].last = last;
}

/* ------------------------------------------------------------ progress */

static void fmt_count(long n, char *buf, size_t len)
{
  snprintf(buf, len, "%ld", n);
}

/* Draw the progress: a redrawn line on a terminal, a plain line at most
 * every PLAIN_EVERY_MS otherwise. force: draw now (the last one). */
static void progress(push_state *st, const char *verb, bool force)
{
  double t = now_s();
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

/* Before any other stderr line: clear the redrawn one. */
static void progress_clear(push_state *st)
{
  if (st->tty && st->drew_tty) {
    fputs("\r\033[K", stderr);
    st->drew_tty = false;
  }
}

static void say(push_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(push_state *st, const char *fmt, ...)
{
  va_list ap;
  progress_clear(st);
  fputs("onceq: push: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ------------------------------------------------------------- inserts */

typedef struct tx_ctx {
  push_state *st;
  batch *b; /* the batches to send in this transaction */
  size_t nb;
  double t_last;
} tx_ctx;

static oq_err on_inserted(void *ud, int ncols, const char *const *v)
{
  push_state *st = ud;
  if (ncols < 2 || !v[0] || !v[1])
    return OQ_ERR_SQL;
  if (st->nins == st->cap_ins) {
    size_t nc = st->cap_ins ? st->cap_ins * 2 : 1024;
    long *o = realloc(st->ins_ord, nc * sizeof *o);
    if (o)
      st->ins_ord = o;
    char(*ids)[37] = realloc(st->ins_id, nc * sizeof *ids);
    if (ids)
      st->ins_id = ids;
    if (!o || !ids)
      return OQ_ERR_NOMEM;
    st->cap_ins = nc;
  }
  st->ins_ord[st->nins] = strtol(v[0], NULL, 10);
  snprintf(st->ins_id[st->nins], 37, "%s", v[1]);
  st->nins++;
  return OQ_OK;
}

/* The statement for one batch; its rows append to st->ins_*. */
static oq_err send_batch(push_state *st, const batch *b)
{
  return oq_enqueue_many(st->db, &st->eo, b->text, st->o->key_field,
                         on_inserted, st);
}

/* Transaction body: every batch in ctx (one, or all with --atomic). May
 * run again on a restart, so it starts from nothing each time. */
static oq_err insert_tx(oq_db *db, void *ud)
{
  tx_ctx *c = ud;
  (void)db;
  c->st->nins = 0;
  if (c->nb > 1)
    c->st->done_bytes = 0; /* --atomic: counts what this run sent */
  long base = 0;           /* items in the batches before this one */
  for (size_t k = 0; k < c->nb; k++) {
    size_t before = c->st->nins;
    oq_err e = send_batch(c->st, &c->b[k]);
    if (e != OQ_OK)
      return e;
    /* RETURNING ords count from 1 in each batch: make them run on across
     * the batches of this transaction. */
    for (size_t r = before; r < c->st->nins; r++)
      c->st->ins_ord[r] += base;
    base += (long)c->b[k].n;
    if (c->nb > 1) { /* --atomic: progress while sending */
      c->st->done_lines = c->b[k].last_line;
      c->st->done_bytes += c->b[k].bytes;
      progress(c->st, "sent", false);
    }
  }
  return OQ_OK;
}

/* The line of the global ordinal ord (1-based) across batches b[0..nb). */
static long line_of(const batch *b, size_t nb, long ord)
{
  for (size_t k = 0; k < nb; k++) {
    if (ord <= (long)b[k].n)
      return b[k].line[ord - 1];
    ord -= (long)b[k].n;
  }
  return 0;
}

/* Print the ids of the new items in input order. */
static void print_ids(push_state *st, const batch *b, size_t nb)
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

/* A server error that is about the data (bisect for the line), not about
 * the connection or the schema: data exceptions (22), program limits (54)
 * and integrity constraints (23: a CHECK or trigger an operator added to
 * onceq_items refuses some lines; a unique key conflict is DO NOTHING). */
static bool data_error(oq_err e, const char *sqlstate)
{
  return e == OQ_ERR_INVALID || (sqlstate && (strncmp(sqlstate, "22", 2) == 0 ||
                                              strncmp(sqlstate, "23", 2) == 0 ||
                                              strncmp(sqlstate, "54", 2) == 0));
}

/* The server's refusal of one line in words that name the fix: the
 * payload size limit (schema v4) and the two program limits a line can hit
 * get our own sentence, the rest the server's message. */
static void server_why(oq_db *db, char *why, size_t whylen)
{
  const char *st = oq_db_sqlstate(db), *m = oq_db_errmsg(db);
  if (oq_enqueue_too_large(db))
    snprintf(why, whylen,
             "payload is larger than the 1 MiB limit (%d bytes of JSON "
             "text, constraint onceq_items_payload_size): store the data "
             "elsewhere and enqueue a reference to it",
             OQ_MAX_PAYLOAD_BYTES);
  else if (st && strcmp(st, "54001") == 0)
    snprintf(why, whylen,
             "JSON nested too deep for the server (stack depth limit "
             "exceeded, SQLSTATE 54001)");
  else if (st && strcmp(st, "54000") == 0 && strstr(m, "index row size"))
    snprintf(why, whylen,
             "the unique key is too long for the index (at most %d bytes; "
             "SQLSTATE 54000)",
             MAX_NAME_BYTES);
  else
    snprintf(why, whylen, "%s", m);
}

/* A probe: the batch's own insert, rolled back whatever happens. */
typedef struct probe_ctx {
  push_state *st;
  const char *text;
} probe_ctx;

static oq_err probe_tx(oq_db *db, void *ud)
{
  probe_ctx *p = ud;
  oq_err e =
      oq_enqueue_many(db, &p->st->eo, p->text, p->st->o->key_field, NULL, NULL);
  return e == OQ_OK ? OQ_ERR_CALLBACK : e; /* never commit a probe */
}

/*
 * Does the server accept items [lo, hi) of b? Runs the real insert and
 * rolls it back, so whatever the insert refuses (a jsonb cast, the unique
 * index's row size, a nesting too deep for the server) is found on its
 * own line, not only what a jsonb cast refuses. An error that is not about
 * the data (a lost connection) counts as accepted: the caller then reports
 * the batch as a whole.
 */
static bool server_accepts(push_state *st, const batch *b, size_t lo, size_t hi,
                           char *why, size_t whylen)
{
  size_t need = 2;
  for (size_t k = lo; k < hi; k++)
    need += b->ilen[k] + 1;
  char *t = malloc(need + 1);
  if (!t)
    return true; /* cannot tell: let the caller report the batch */
  size_t n = 0;
  t[n++] = '[';
  for (size_t k = lo; k < hi; k++) {
    if (k > lo)
      t[n++] = ',';
    memcpy(t + n, b->text + b->off[k], b->ilen[k]);
    n += b->ilen[k];
  }
  t[n++] = ']';
  t[n] = '\0';
  probe_ctx pc = {.st = st, .text = t};
  oq_err e = oq_db_transact(st->db, probe_tx, &pc);
  free(t);
  if (e == OQ_ERR_CALLBACK)
    return true;
  if (!data_error(e, oq_db_sqlstate(st->db)))
    return true;
  server_why(st->db, why, whylen);
  return false;
}

/*
 * The server refused a batch that passed our checks: find its first bad
 * line by bisection (about log2(batch) round trips). Returns the line, or
 * 0 when every half is accepted (the refusal was about something else).
 */
static long bisect_bad_line(push_state *st, const batch *b, char *why,
                            size_t whylen)
{
  size_t lo = 0, hi = b->n;
  if (server_accepts(st, b, lo, hi, why, whylen))
    return 0;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (!server_accepts(st, b, lo, mid, why, whylen))
      hi = mid;
    else
      lo = mid;
  }
  server_accepts(st, b, lo, lo + 1, why, whylen); /* its own message */
  return b->line[lo];
}

/* ------------------------------------------------------------ the flow */

/* A bad line: say it now, remember it on its batch. */
static void bad_line(push_state *st, batch *b, long line, const char *reason,
                     const char *detail)
{
  if (b->nbad == 0) {
    b->bad_line = line;
    snprintf(b->bad_reason, sizeof b->bad_reason, "%s", reason);
  }
  b->nbad++;
  say(st, "line %ld: %s", line, detail);
}

/* Check one input line and add it to b. Returns false only on OOM. */
static bool take_line(push_state *st, batch *b, char *s, size_t n, long line)
{
  while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  size_t lead = 0;
  while (lead < n && (s[lead] == ' ' || s[lead] == '\t'))
    lead++;
  if (lead == n)
    return true; /* blank */
  st->items++;
  if (b->nitems++ == 0)
    b->started_s = now_s();
  char err[200];
  field_info fi;
  bool obj;
  if (!json_check(s + lead, n - lead, st->o->key_field, &fi, &obj, err,
                  sizeof err)) {
    if (strcmp(err, "out of memory") == 0)
      return false;
    bad_line(st, b, line, "invalid JSON", err);
    return true;
  }
  field_state fs = fi.state;
  if (st->o->key_field && fs == FIELD_OK && fi.bytes > MAX_NAME_BYTES) {
    /* the unique index refuses a long key only at insert time, with a raw
     * btree error and no line (the limit: see MAX_NAME_BYTES) */
    char detail[300];
    snprintf(detail, sizeof detail,
             "field \"%s\" is %zu bytes long; a unique key is at most %d "
             "bytes (--unique-key-field)",
             st->o->key_field, fi.bytes, MAX_NAME_BYTES);
    bad_line(st, b, line, "unique key too long", detail);
    return true;
  }
  if (st->o->key_field && fs != FIELD_OK) {
    char detail[300];
    if (!obj)
      snprintf(detail, sizeof detail,
               "not a JSON object, so it has no field \"%s\" "
               "(--unique-key-field)",
               st->o->key_field);
    else if (fs == FIELD_NONE)
      snprintf(detail, sizeof detail,
               "no field \"%s\" (--unique-key-field needs it on every line)",
               st->o->key_field);
    else
      snprintf(detail, sizeof detail,
               "field \"%s\" is not a string or a number "
               "(--unique-key-field)",
               st->o->key_field);
    bad_line(st, b, line, "no usable unique key field", detail);
    return true;
  }
  if (b->nbad > 0)
    return true; /* the batch is rejected anyway: keep no text */
  return batch_add(b, s + lead, n - lead, line);
}

static void rejected_why(const batch *b, char *why, size_t len)
{
  if (b->nbad <= 1)
    snprintf(why, len, "line %ld: %s", b->bad_line, b->bad_reason);
  else
    snprintf(why, len, "line %ld: %s, and %ld more bad line%s", b->bad_line,
             b->bad_reason, b->nbad - 1, b->nbad == 2 ? "" : "s");
}

/* Non-atomic: send one finished batch in its own transaction. Returns
 * false when pushing must stop (a runtime error). */
static bool flush_batch(push_state *st, batch *b)
{
  char why[200];
  bool go_on = true;
  if (b->nbad > 0) {
    rejected_why(b, why, sizeof why);
    add_span(st, b->first_line, b->last_line, SPAN_REJECTED, why);
    st->rejected_items += (long)b->n + b->nbad;
    goto done;
  }
  if (b->n == 0)
    goto done; /* only blank lines */
  batch_close(b);
  tx_ctx c = {.st = st, .b = b, .nb = 1};
  oq_err e = oq_db_transact(st->db, insert_tx, &c);
  if (e == OQ_OK) {
    add_span(st, b->first_line, b->last_line, SPAN_INSERTED, NULL);
    st->inserted += (long)st->nins;
    st->existed += (long)b->n - (long)st->nins;
    print_ids(st, b, 1);
  } else if (e == OQ_ERR_AMBIGUOUS) {
    snprintf(why, sizeof why,
             "unknown whether inserted: %s; a re-run with "
             "--unique-key-field skips what went in",
             oq_db_errmsg(st->db));
    add_span(st, b->first_line, b->last_line, SPAN_UNKNOWN, why);
    go_on = false;
  } else if (data_error(e, oq_db_sqlstate(st->db))) {
    char msg[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", oq_db_errmsg(st->db));
    long bad = bisect_bad_line(st, b, why, sizeof why);
    if (bad > 0) {
      b->bad_line = bad;
      b->nbad = 1;
      snprintf(b->bad_reason, sizeof b->bad_reason, "rejected by the server");
      say(st, "line %ld: rejected by the server: %s", bad, why);
    } else {
      b->bad_line = b->first_line;
      b->nbad = 1;
      snprintf(b->bad_reason, sizeof b->bad_reason, "batch rejected");
      say(st, "lines %ld-%ld: rejected by the server: %s", b->first_line,
          b->last_line, msg);
    }
    rejected_why(b, why, sizeof why);
    add_span(st, b->first_line, b->last_line, SPAN_REJECTED, why);
    st->rejected_items += (long)b->n;
    go_on = oq_db_connected(st->db);
  } else {
    snprintf(why, sizeof why, "%s", oq_db_errmsg(st->db));
    add_span(st, b->first_line, b->last_line, SPAN_NOT_INSERTED, why);
    go_on = false;
  }
done:
  st->done_lines = b->last_line;
  st->done_bytes += b->bytes;
  progress(st, "pushed", false);
  return go_on;
}

/* Print "inserted lines 1-1000, 2001-3000; rejected lines 1001-2000
 * (line 1500: invalid JSON)". */
static void print_summary(push_state *st, double secs)
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
      const span *s = &st->spans[k];
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
    say(st, "nothing to push: no JSON lines on stdin");
  else
    say(st, "%s; %s (%.1fs)", buf, tail, secs);
  free(buf);
}

static void print_json_summary(push_state *st, int rc)
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

/*
 * The one line an interrupted push says: which signal, what was committed,
 * and where to resume. from: the first line not committed after the last
 * batch handled; lines from..st->lines were read but not sent, the input
 * after st->lines was never read. Rejected batches before from are in the
 * summary (they need fixing, not resuming).
 */
static void say_interrupted(push_state *st, long from)
{
  long committed = 0;
  for (size_t k = 0; k < st->nspans; k++)
    if (st->spans[k].kind == SPAN_INSERTED)
      committed += st->spans[k].last - st->spans[k].first + 1;
  const char *sig = interrupted == SIGINT    ? "SIGINT"
                    : interrupted == SIGTERM ? "SIGTERM"
                                             : "a signal";
  char unread[160];
  if (from <= st->lines)
    snprintf(unread, sizeof unread,
             "lines %ld-%ld were read but not sent, and input from line %ld "
             "on was never read",
             from, st->lines, st->lines + 1);
  else
    snprintf(unread, sizeof unread, "input from line %ld on was never read",
             st->lines + 1);
  if (st->o->atomic)
    say(st,
        "interrupted by %s: nothing committed (--atomic inserts all or "
        "nothing); %s; run it again with the whole input",
        sig, unread);
  else
    say(st,
        "interrupted by %s: %ld line%s committed (%ld new item%s); %s; resume "
        "with `tail -n +%ld`",
        sig, committed, committed == 1 ? "" : "s", st->inserted,
        st->inserted == 1 ? "" : "s", unread, from);
}

/* Read stdin. Non-atomic: send each batch as it fills (or when input
 * pauses). Atomic: keep every batch, then send them all in one
 * transaction. Returns the exit code. */
static int bulk(push_state *st)
{
  const push_opts *o = st->o;
  reader rd = {.fd = STDIN_FILENO};
  batch one = {0};
  batch *all = NULL; /* --atomic */
  size_t nall = 0, capall = 0;
  long nbad = 0;
  int rc = CLI_EXIT_OK;
  bool stop = false, read_error = false;
  char *line;
  size_t len;

  struct stat sb;
  if (fstat(STDIN_FILENO, &sb) == 0 && S_ISREG(sb.st_mode)) {
    off_t pos = lseek(STDIN_FILENO, 0, SEEK_CUR);
    if (pos >= 0 && sb.st_size > pos)
      st->total_bytes = (uint64_t)(sb.st_size - pos);
  }
  if (isatty(STDIN_FILENO))
    say(st, "reading JSON lines from the terminal; end with Ctrl-D");
  st->t0 = st->last_draw = now_s();

  batch *cur = &one;
  batch_reset(cur, 1);
  while (!stop) {
    int timeout = cur->nitems > 0 ? IDLE_FLUSH_MS : PLAIN_EVERY_MS;
    if (o->atomic)
      timeout = PLAIN_EVERY_MS;
    int r = reader_line(&rd, timeout, &line, &len);
    if (interrupted) {
      rc = CLI_EXIT_RUNTIME; /* said after the loop (say_interrupted) */
      break;
    }
    if (r == -3)
      continue;
    if (r == -2) { /* input paused */
      if (!o->atomic && cur->nitems > 0) {
        if (!flush_batch(st, cur))
          stop = true;
        batch_reset(cur, st->lines + 1);
      } else {
        progress(st, o->atomic ? "read" : "pushed", false);
      }
      continue;
    }
    if (r == -1 || r == -4) {
      if (r == -4)
        say(st, "line %ld is longer than %u MiB; stopped reading",
            st->lines + 1, MAX_LINE_BYTES >> 20);
      else
        say(st, "cannot read stdin: %s", strerror(errno));
      read_error = true;
      break;
    }
    if (r == 0)
      break;
    st->lines++;
    cur->last_line = st->lines;
    cur->bytes += len + 1;
    long bad_before = cur->nbad;
    if (!take_line(st, cur, line, len, st->lines)) {
      say(st, "out of memory at line %ld", st->lines);
      read_error = true;
      break;
    }
    nbad += cur->nbad - bad_before;
    if (cur->nitems < o->batch) {
      if (o->atomic || (now_s() - cur->started_s) * 1000.0 < MAX_BATCH_AGE_MS)
        continue;
    }
    /* the batch is full */
    if (!o->atomic) {
      if (!flush_batch(st, cur))
        stop = true;
      batch_reset(cur, st->lines + 1);
      if (interrupted)
        stop = true;
      continue;
    }
    if (nall == capall) {
      size_t nc = capall ? capall * 2 : 16;
      batch *na = realloc(all, nc * sizeof *na);
      if (!na) {
        say(st, "out of memory at line %ld", st->lines);
        read_error = true;
        break;
      }
      all = na;
      capall = nc;
    }
    all[nall++] = *cur;
    memset(cur, 0, sizeof *cur);
    batch_reset(cur, st->lines + 1);
    st->done_lines = st->lines;
    st->done_bytes += all[nall - 1].bytes;
    progress(st, "read", false);
  }

  if (!o->atomic) {
    if (!stop && !read_error && rc == CLI_EXIT_OK) {
      if (cur->nitems > 0)
        flush_batch(st, cur);
      else
        extend_last_span(st, st->lines);
    }
    if (stop || read_error || rc != CLI_EXIT_OK) {
      long from = 1;
      if (st->nspans > 0)
        from = st->spans[st->nspans - 1].last + 1;
      char why[64];
      snprintf(why, sizeof why, "%s",
               read_error    ? "input error"
               : interrupted ? "interrupted"
                             : "stopped");
      if (from <= st->lines)
        add_span(st, from, st->lines, SPAN_NOT_INSERTED, why);
      if (interrupted && !read_error)
        say_interrupted(st, from);
      rc = CLI_EXIT_RUNTIME;
    }
    bool rejected = false;
    for (size_t k = 0; k < st->nspans; k++)
      if (st->spans[k].kind != SPAN_INSERTED)
        rejected = true;
    if (rejected)
      rc = CLI_EXIT_RUNTIME;
    goto out;
  }

  /* --atomic */
  if (cur->nitems > 0) {
    if (nall == capall) {
      batch *na = realloc(all, (capall + 1) * sizeof *na);
      if (!na) {
        read_error = true;
      } else {
        all = na;
        capall++;
      }
    }
    if (!read_error) {
      all[nall++] = *cur;
      memset(cur, 0, sizeof *cur);
    }
  }
  if (read_error || rc != CLI_EXIT_OK) {
    add_span(st, 1, st->lines, SPAN_NOT_INSERTED,
             interrupted ? "interrupted; --atomic" : "input error; --atomic");
    if (interrupted && !read_error)
      say_interrupted(st, 1);
    rc = CLI_EXIT_RUNTIME;
    goto out;
  }
  if (nbad > 0) {
    char why[200];
    long first = 0;
    for (size_t k = 0; k < nall && !first; k++)
      if (all[k].nbad)
        first = all[k].bad_line;
    snprintf(why, sizeof why,
             "%ld bad line%s, the first is line %ld; "
             "--atomic inserts nothing",
             nbad, nbad == 1 ? "" : "s", first);
    add_span(st, 1, st->lines, SPAN_REJECTED, why);
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  if (nall == 0)
    goto out;
  for (size_t k = 0; k < nall; k++)
    batch_close(&all[k]);
  st->done_lines = 0;
  st->done_bytes = 0;
  tx_ctx c = {.st = st, .b = all, .nb = nall};
  oq_err e = oq_db_transact(st->db, insert_tx, &c);
  if (e == OQ_OK) {
    add_span(st, 1, st->lines, SPAN_INSERTED, NULL);
    long items = 0;
    for (size_t k = 0; k < nall; k++)
      items += (long)all[k].n;
    st->inserted = (long)st->nins;
    st->existed = items - (long)st->nins;
    print_ids(st, all, nall);
  } else if (e == OQ_ERR_AMBIGUOUS) {
    char why[OQ_ERRBUF_SIZE + 64];
    snprintf(why, sizeof why, "unknown whether inserted: %s",
             oq_db_errmsg(st->db));
    add_span(st, 1, st->lines, SPAN_UNKNOWN, why);
    rc = CLI_EXIT_RUNTIME;
  } else if (data_error(e, oq_db_sqlstate(st->db))) {
    char msg[OQ_ERRBUF_SIZE], why[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", oq_db_errmsg(st->db));
    long bad = 0;
    for (size_t k = 0; k < nall && !bad; k++)
      bad = bisect_bad_line(st, &all[k], why, sizeof why);
    char span_why[OQ_ERRBUF_SIZE + 80];
    if (bad > 0) {
      say(st, "line %ld: rejected by the server: %s", bad, why);
      snprintf(span_why, sizeof span_why,
               "line %ld: rejected by the server; --atomic inserts nothing",
               bad);
    } else {
      snprintf(span_why, sizeof span_why, "rejected by the server: %s", msg);
    }
    add_span(st, 1, st->lines, SPAN_REJECTED, span_why);
    rc = CLI_EXIT_USAGE;
  } else {
    char why[OQ_ERRBUF_SIZE + 32];
    snprintf(why, sizeof why, "%s; --atomic", oq_db_errmsg(st->db));
    add_span(st, 1, st->lines, SPAN_NOT_INSERTED, why);
    rc = cli_exit_for(e) == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
  }
out:
  if (st->tty)
    progress_clear(st);
  else if (st->done_lines != st->last_drawn_lines &&
           now_s() - st->t0 >= PLAIN_EVERY_MS / 1000.0)
    progress(st, o->atomic ? "sent" : "pushed", true);
  if (st->oom) {
    say(st, "out of memory keeping the summary");
    rc = CLI_EXIT_RUNTIME;
  }
  print_summary(st, now_s() - st->t0);
  if (o->json)
    print_json_summary(st, rc);
  batch_free(&one);
  for (size_t k = 0; k < nall; k++)
    batch_free(&all[k]);
  free(all);
  free(rd.buf);
  return rc;
}

/* -------------------------------------------------------- single item */

typedef struct single_ctx {
  oq_enqueue_opts eo;
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_status status;
} single_ctx;

static oq_err single_tx(oq_db *db, void *ud)
{
  single_ctx *c = ud;
  return oq_enqueue(db, &c->eo, c->id, &c->status);
}

static int single(push_state *st)
{
  const push_opts *o = st->o;
  single_ctx c = {.eo = st->eo};
  c.eo.payload = o->payload;
  c.eo.unique_key = o->unique_key;
  c.eo.keep_result = o->wait;
  oq_err e = oq_db_transact(st->db, single_tx, &c);
  if (e != OQ_OK)
    return cli_fail_db(st->db, e, "push", "nothing inserted");
  bool existed = c.status == OQ_ENQUEUE_DUPLICATE;
  if (o->wait) { /* the result instead of the id (--json: both) */
    if (existed) /* cm_say: the key is outside text, escaped */
      cm_say("onceq", "push", NULL,
             "exists: unique key \"%s\" is held by live item %s; waiting "
             "for it",
             o->unique_key, c.id);
    cli_globals wg = {.json = o->json};
    const char *ids[1] = {c.id};
    return cli_wait_ids(st->db, &wg, "push", ids, 1, o->wait_timeout_ms);
  }
  if (o->json) {
    cm_json_obj(&st->j, NULL);
    cm_json_str(&st->j, "id", c.id);
    cm_json_bool(&st->j, "existed", existed);
    cm_json_end(&st->j);
  } else {
    printf("%s\n", c.id);
  }
  fflush(stdout); /* the id first, then the note, on a terminal too */
  if (existed)    /* cm_say: the key is outside text, escaped */
    cm_say("onceq", "push", NULL,
           "exists: unique key \"%s\" is held by live item %s; nothing "
           "inserted",
           o->unique_key, c.id);
  return CLI_EXIT_OK;
}

/* --------------------------------------------------------------- main */

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq push [OPTIONS] PAYLOAD_JSON\n"
          "       onceq push [OPTIONS] < items.jsonl     (bulk)\n"
          "  enqueue one item and print its id; without PAYLOAD_JSON, read\n"
          "  JSON lines from stdin and print the id of each new item\n"
          "options:\n"
          "  --queue Q            queue (default \"default\")\n"
          "  --priority N         higher runs first (default 0)\n"
          "  --delay D            run after D (250ms, 5s, 2m, 1h)\n"
          "  --run-at TS          run at TS (e.g. 2030-01-01T09:00:00Z)\n"
          "  --max-attempts N     dead-lettered after N failures (default %d)\n"
          "  --unique-key K       at most one live item with key K: when it\n"
          "                       exists, print its id (stderr says exists)\n"
          "  -q, --quiet          do not print ids\n"
          "  --wait               wait for the item's outcome and print its\n"
          "                       result instead of its id; exit 3 dead,\n"
          "                       4 cancelled, 5 timeout (see onceq wait)\n"
          "  --timeout D          with --wait: give up after D\n"
          "bulk only:\n"
          "  --batch N            lines per batch and transaction (default "
          "%d)\n"
          "  --unique-key-field F unique_key = each line's field F (string or\n"
          "                       number): a re-run skips lines whose item\n"
          "                       is still live, so nothing goes in twice\n"
          "  --atomic             all lines in one transaction: any bad line\n"
          "                       and nothing is inserted (exit 2); keeps the\n"
          "                       input in memory\n"
          "By default a batch with a bad line is not inserted and the others\n"
          "are; stderr names each bad line and ends with the line ranges\n"
          "inserted and rejected (exit 1). Progress goes to stderr: a redrawn\n"
          "line on a terminal, a plain line every second otherwise.\n"
          "With --json: ids as {\"line\":N,\"id\":\"...\"} lines, then one\n"
          "summary object.\n",
          OQ_DEFAULT_MAX_ATTEMPTS, DEFAULT_BATCH);
}

/* Row callback of the --run-at check: "t" when the time is usable. */
static oq_err run_at_row(void *ud, int ncols, const char *const *vals)
{
  *(bool *)ud = ncols == 1 && vals[0] && strcmp(vals[0], "t") == 0;
  return OQ_OK;
}

/*
 * --run-at must be a finite calendar time a person wrote: it starts with
 * its year (so no 'infinity', 'tomorrow', 'epoch' or 'now', which the
 * server would take), and the server reads it as a time after 1970 and
 * before 100 years from now (so no '4000-01-01 BC'). An item due at
 * infinity can never run. Returns CLI_EXIT_OK or the exit code after one
 * line; nothing is inserted either way.
 */
static int check_run_at(oq_db *db, const char *run_at)
{
  static const char sql[] =
      "SELECT $1::timestamptz > '1970-01-01 00:00:00+00'::timestamptz "
      "AND $1::timestamptz < now() + interval '100 years'";
  bool ok =
      isdigit((unsigned char)run_at[0]) && isdigit((unsigned char)run_at[1]) &&
      isdigit((unsigned char)run_at[2]) && isdigit((unsigned char)run_at[3]);
  if (ok) {
    const char *p[1] = {run_at};
    oq_err e = oq_db_query(db, sql, 1, p, run_at_row, &ok);
    if (e != OQ_OK && e != OQ_ERR_INVALID)
      return cli_fail_db(db, e, "push", "nothing inserted");
    if (e != OQ_OK)
      ok = false;
  }
  if (!ok)
    return cli_fail(CLI_EXIT_USAGE, "push",
                    "--run-at %s is not a usable timestamp; write it like "
                    "2030-01-01T09:00:00Z (ISO 8601, from 1970 to 100 years "
                    "ahead); nothing inserted",
                    run_at);
  return CLI_EXIT_OK;
}

int cmd_push(const cli_globals *g, int argc, char **argv)
{
  push_opts o = {.queue = OQ_DEFAULT_QUEUE,
                 .max_attempts = OQ_DEFAULT_MAX_ATTEMPTS,
                 .batch = DEFAULT_BATCH,
                 .json = g->json,
                 .wait_timeout_ms = -1};
  const char *val = NULL, *delay_text = NULL;
  bool positional_only = false;
  static const char *const once[] = {"--queue",
                                     "--priority",
                                     "--delay",
                                     "--run-at",
                                     "--unique-key",
                                     "--max-attempts",
                                     "--unique-key-field",
                                     "--batch",
                                     "--timeout",
                                     NULL};
  int rc0 = cli_no_repeats("push", argc, argv, once);
  if (rc0 != CLI_EXIT_OK)
    return rc0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!positional_only && a[0] == '-' && a[1] != '\0') {
      if (strcmp(a, "--") == 0) {
        positional_only = true;
      } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
      } else if (strcmp(a, "--atomic") == 0) {
        o.atomic = true;
      } else if (strcmp(a, "--wait") == 0) {
        o.wait = true;
      } else if (cli_opt(argc, argv, &i, "--timeout", &val)) {
        int64_t ms = 0;
        if (!val || oq_duration_parse(val, &ms) != OQ_OK || ms <= 0)
          return cli_usage_error("push",
                                 "--timeout must be a duration above zero "
                                 "like 250ms, 5s, 2m or 1h (got %s)",
                                 val ? val : "nothing");
        o.wait_timeout_ms = (long)ms;
      } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
        o.quiet = true;
      } else if (cli_opt(argc, argv, &i, "--queue", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--queue needs a queue name");
        if (strlen(val) > MAX_NAME_BYTES)
          return cli_usage_error("push",
                                 "--queue is %zu bytes long; a queue name is "
                                 "at most %d bytes",
                                 strlen(val), MAX_NAME_BYTES);
        o.queue = val;
      } else if (cli_opt(argc, argv, &i, "--priority", &val)) {
        if (!cli_parse_int(val, INT32_MIN, INT32_MAX, &o.priority))
          return cli_usage_error("push",
                                 "--priority must be an integer from %d to %d "
                                 "(got %s)",
                                 INT32_MIN, INT32_MAX, val ? val : "nothing");
      } else if (cli_opt(argc, argv, &i, "--delay", &val)) {
        if (!val || oq_duration_parse(val, &o.delay_ms) != OQ_OK ||
            o.delay_ms < 0)
          return cli_usage_error("push",
                                 "--delay must be a duration like 250ms, 5s, "
                                 "2m or 1h (got %s)",
                                 val ? val : "nothing");
        delay_text = val;
      } else if (cli_opt(argc, argv, &i, "--run-at", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--run-at needs a timestamp");
        o.run_at = val;
      } else if (cli_opt(argc, argv, &i, "--unique-key", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--unique-key needs a key");
        if (strlen(val) > MAX_NAME_BYTES)
          return cli_usage_error("push",
                                 "--unique-key is %zu bytes long; a key is at "
                                 "most %d bytes (hash a longer one)",
                                 strlen(val), MAX_NAME_BYTES);
        o.unique_key = val;
      } else if (cli_opt(argc, argv, &i, "--max-attempts", &val)) {
        if (!cli_parse_int(val, 1, INT32_MAX, &o.max_attempts))
          return cli_usage_error("push",
                                 "--max-attempts must be a number >= 1");
      } else if (cli_opt(argc, argv, &i, "--unique-key-field", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--unique-key-field needs a field");
        o.key_field = val;
      } else if (cli_opt(argc, argv, &i, "--batch", &val)) {
        if (!cli_parse_int(val, 1, MAX_BATCH, &o.batch))
          return cli_usage_error("push", "--batch must be from 1 to %d",
                                 MAX_BATCH);
        o.batch_set = true;
      } else {
        return cli_usage_error("push",
                               "unknown option %s (a payload that starts "
                               "with '-' goes after --)",
                               a);
      }
    } else if (o.payload) {
      return cli_usage_error("push",
                             "one PAYLOAD_JSON at a time (quote it: "
                             "'{\"k\": 1}'); for many, pipe JSON lines to "
                             "stdin");
    } else {
      o.payload = a;
    }
  }
  if (delay_text && o.run_at)
    return cli_usage_error("push", "give --delay or --run-at, not both");
  if ((o.wait || o.wait_timeout_ms >= 0) && !o.payload)
    return cli_usage_error("push",
                           "--wait and --timeout are for one PAYLOAD_JSON "
                           "(for many items: onceq wait ID...)");
  if (o.wait_timeout_ms >= 0 && !o.wait)
    return cli_usage_error("push", "--timeout needs --wait");
  if (o.payload) {
    if (o.atomic || o.key_field || o.batch_set)
      return cli_usage_error("push",
                             "--atomic, --unique-key-field and --batch are "
                             "for bulk pushes from stdin");
    char err[200];
    field_info fi;
    bool obj;
    if (!json_check(o.payload, strlen(o.payload), NULL, &fi, &obj, err,
                    sizeof err))
      return cli_fail(CLI_EXIT_USAGE, "push",
                      "PAYLOAD_JSON is not valid JSON (%s); quote it for the "
                      "shell, e.g. '{\"order\": 42}'; nothing inserted",
                      err + strlen("invalid JSON: "));
  } else if (o.unique_key) {
    return cli_usage_error("push",
                           "--unique-key would give every line the same key; "
                           "use --unique-key-field F for bulk pushes");
  }

  int rc = CLI_EXIT_OK;
  push_state st = {.o = &o, .tty = isatty(STDERR_FILENO) != 0};
  st.eo = (oq_enqueue_opts){.queue = o.queue,
                            .priority = (int)o.priority,
                            .delay_ms = o.delay_ms,
                            .run_at = o.run_at,
                            .max_attempts = (int)o.max_attempts};
  cm_json_init(&st.j, stdout);
  st.db = cli_connect(g, "push", &rc);
  if (!st.db)
    return rc;
  if (o.run_at) {
    rc = check_run_at(st.db, o.run_at);
    if (rc != CLI_EXIT_OK)
      goto out;
  }
  if (!o.payload) {
    /* bulk: a missing schema is found before stdin is read */
    oq_err e = oq_db_query(st.db, "SELECT 1 FROM onceq_items LIMIT 0", 0, NULL,
                           NULL, NULL);
    if (e != OQ_OK) {
      rc = cli_fail_db(st.db, e, "push", "nothing read or inserted");
      goto out;
    }
  }
  if (o.payload) {
    rc = single(&st);
  } else {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: reads return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = bulk(&st);
  }
out:
  free(st.ins_ord);
  free(st.ins_id);
  free(st.spans);
  oq_db_close(st.db);
  return rc;
}
