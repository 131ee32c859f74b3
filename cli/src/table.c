/*
 * table.c: aligned human tables, compact durations and the streaming JSON
 * writer the `onceq` commands print with (table.h).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "table.h"

#define GAP 2             /* spaces between columns */
#define ELLIPSIS "\u2026" /* "…": marks a cut cell */

typedef struct col {
  char *header;
  unsigned flags; /* CLI_COL_* */
} col;

struct cli_table {
  col *cols;
  size_t ncols, cap_cols;
  char **cells; /* row-major, ncols per row */
  size_t ncells, cap_cells;
  bool oom; /* an allocation failed: print refuses */
};

/* Display width of s: its UTF-8 code points. */
static size_t dwidth(const char *s)
{
  size_t n = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80)
      n++;
  return n;
}

/* Byte length of the first w code points of s. */
static size_t dprefix(const char *s, size_t w)
{
  size_t i = 0, n = 0;
  while (s[i]) {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (n == w)
        break;
      n++;
    }
    i++;
  }
  return i;
}

cli_table *cli_table_new(void)
{
  return calloc(1, sizeof(cli_table));
}

void cli_table_free(cli_table *t)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->ncols; i++)
    free(t->cols[i].header);
  for (size_t i = 0; i < t->ncells; i++)
    free(t->cells[i]);
  free(t->cols);
  free(t->cells);
  free(t);
}

void cli_table_col(cli_table *t, const char *header, unsigned flags)
{
  if (!t || t->oom)
    return;
  if (t->ncols == t->cap_cols) {
    size_t cap = t->cap_cols ? t->cap_cols * 2 : 8;
    col *c = realloc(t->cols, cap * sizeof *c);
    if (!c) {
      t->oom = true;
      return;
    }
    t->cols = c;
    t->cap_cols = cap;
  }
  char *h = strdup(header ? header : "");
  if (!h) {
    t->oom = true;
    return;
  }
  t->cols[t->ncols].header = h;
  t->cols[t->ncols].flags = flags;
  t->ncols++;
}

/* Take ownership of text (may be NULL on OOM) as the next cell. */
static void add_owned(cli_table *t, char *text)
{
  if (!text)
    t->oom = true;
  if (t->oom) {
    free(text);
    return;
  }
  if (t->ncells == t->cap_cells) {
    size_t cap = t->cap_cells ? t->cap_cells * 2 : 64;
    char **c = realloc(t->cells, cap * sizeof *c);
    if (!c) {
      t->oom = true;
      free(text);
      return;
    }
    t->cells = c;
    t->cap_cells = cap;
  }
  for (char *p = text; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = ' ';
  t->cells[t->ncells++] = text;
}

void cli_table_cell(cli_table *t, const char *text)
{
  if (!t)
    return;
  add_owned(t, strdup(text ? text : "-"));
}

void cli_table_cellf(cli_table *t, const char *fmt, ...)
{
  if (!t)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf) {
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  add_owned(t, buf);
}

size_t cli_table_rows(const cli_table *t)
{
  return t && t->ncols ? t->ncells / t->ncols : 0;
}

int cli_out_width(FILE *out)
{
  struct winsize ws;
  int fd = fileno(out);
  if (fd >= 0 && isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 &&
      ws.ws_col >= 40)
    return ws.ws_col;
  return 80;
}

/* Print s in a column of width w: cut with "…" when wider, padded unless it
 * is the last column. */
static void put_cell(FILE *out, const char *s, size_t w, unsigned flags,
                     bool last)
{
  size_t dw = dwidth(s);
  if (dw > w) {
    if (w > 0) {
      fwrite(s, 1, dprefix(s, w - 1), out);
      fputs(ELLIPSIS, out);
    }
    return;
  }
  if (flags & CLI_COL_RIGHT)
    fprintf(out, "%*s%s", (int)(w - dw), "", s);
  else if (last)
    fputs(s, out);
  else
    fprintf(out, "%s%*s", s, (int)(w - dw), "");
}

int cli_table_print(const cli_table *t, FILE *out, int width)
{
  if (!t || t->oom || t->ncols == 0)
    return -1;
  if (width <= 0)
    width = cli_out_width(out);
  size_t nc = t->ncols, nrows = t->ncells / nc;
  size_t *w = calloc(nc, sizeof *w), *minw = calloc(nc, sizeof *minw);
  if (!w || !minw) {
    free(w);
    free(minw);
    return -1;
  }
  for (size_t c = 0; c < nc; c++)
    w[c] = minw[c] = dwidth(t->cols[c].header);
  for (size_t r = 0; r < nrows; r++)
    for (size_t c = 0; c < nc; c++) {
      size_t dw = dwidth(t->cells[r * nc + c]);
      if (dw > w[c])
        w[c] = dw;
    }
  for (size_t c = 0; c < nc; c++)
    if (!(t->cols[c].flags & CLI_COL_FLEX))
      minw[c] = w[c];
    else if (minw[c] < 4 && w[c] >= 4)
      minw[c] = 4; /* room for a few characters and the "…" */
  size_t total = GAP * (nc - 1);
  for (size_t c = 0; c < nc; c++)
    total += w[c];
  /* Narrow the widest flex column one step at a time until it fits. */
  while (total > (size_t)width) {
    size_t best = nc;
    for (size_t c = 0; c < nc; c++)
      if (w[c] > minw[c] && (best == nc || w[c] > w[best]))
        best = c;
    if (best == nc)
      break; /* cannot fit: print wider than asked */
    w[best]--;
    total--;
  }
  for (size_t r = 0; r <= nrows; r++) {
    for (size_t c = 0; c < nc; c++) {
      const char *s = r == 0 ? t->cols[c].header : t->cells[(r - 1) * nc + c];
      if (c > 0)
        fprintf(out, "%*s", GAP, "");
      put_cell(out, s, w[c], t->cols[c].flags, c + 1 == nc);
    }
    fputc('\n', out);
  }
  free(w);
  free(minw);
  return 0;
}

/* -------------------------------------------------------- text bits */

/* snprintf for short display texts, where cutting to the buffer is what we
 * want (GCC's -Wformat-truncation would flag each call at -O2). */
static void put(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  (void)n;
}

const char *cli_fmt_dur(double s, char *buf, size_t len)
{
  if (isnan(s)) {
    put(buf, len, "-");
    return buf;
  }
  if (s < 0)
    s = -s;
  if (s < 10) {
    double whole = (double)(long long)(s + 0.5);
    if (s - whole < 0.05 && whole - s < 0.05)
      put(buf, len, "%llds", (long long)whole);
    else
      put(buf, len, "%.1fs", s);
    return buf;
  }
  long long n = (long long)(s + 0.5);
  if (n < 60)
    put(buf, len, "%llds", n);
  else if (n < 600 && n % 60)
    put(buf, len, "%lldm%llds", n / 60, n % 60);
  else if (n < 3600)
    put(buf, len, "%lldm", n / 60);
  else if (n < 86400) {
    long long m = (n % 3600) / 60;
    if (m)
      put(buf, len, "%lldh%lldm", n / 3600, m);
    else
      put(buf, len, "%lldh", n / 3600);
  } else
    put(buf, len, "%lldd", n / 86400);
  return buf;
}

const char *cli_fmt_ago(double since, char *buf, size_t len)
{
  char d[16];
  if (isnan(since)) {
    snprintf(buf, len, "-");
    return buf;
  }
  cli_fmt_dur(since, d, sizeof d);
  if (since >= 0)
    snprintf(buf, len, "%s ago", d);
  else
    snprintf(buf, len, "in %s", d);
  return buf;
}

/* ISO-8601 UTC; with_ms adds ".mmm". */
static const char *fmt_time(double epoch_s, bool with_ms, char *buf, size_t len)
{
  if (isnan(epoch_s) || epoch_s < 0) {
    snprintf(buf, len, "-");
    return buf;
  }
  time_t t = (time_t)epoch_s; /* truncates toward 0: floor for >= 0 */
  int ms = (int)((epoch_s - (double)t) * 1000.0);
  struct tm tm;
  char base[24];
  if (!gmtime_r(&t, &tm) ||
      strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
    snprintf(buf, len, "-");
  else if (with_ms)
    snprintf(buf, len, "%s.%03dZ", base, ms > 999 ? 999 : ms);
  else
    snprintf(buf, len, "%sZ", base);
  return buf;
}

const char *cli_fmt_time(double epoch_s, char *buf, size_t len)
{
  return fmt_time(epoch_s, false, buf, len);
}

bool cli_parse_int(const char *s, long long min, long long max, long long *out)
{
  if (!s || !*s)
    return false;
  const char *p = s;
  if (*p == '-' || *p == '+')
    p++;
  if (!*p)
    return false;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9')
      return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return false;
  if (a[n] == '=') {
    *val = a + n + 1;
    return true;
  }
  if (a[n] != '\0')
    return false;
  if (*i + 1 < argc) {
    *i += 1;
    *val = argv[*i];
  } else {
    *val = NULL;
  }
  return true;
}

double cli_num(const char *s)
{
  if (!s || !*s)
    return NAN;
  char *end = NULL;
  double v = strtod(s, &end);
  return end && *end == '\0' ? v : NAN;
}

bool cli_is_uuid(const char *s)
{
  if (!s || strlen(s) != 36)
    return false;
  for (int i = 0; i < 36; i++) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-')
        return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                 (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

int cli_fail_db(oq_db *db, oq_err e, const char *cmd, const char *suffix)
{
  const char *sep = suffix && *suffix ? "; " : "";
  if (!suffix)
    suffix = "";
  if (e == OQ_ERR_NOMEM)
    return cli_fail(CLI_EXIT_RUNTIME, cmd, "out of memory%s%s", sep, suffix);
  if (e == OQ_ERR_SCHEMA || strcmp(oq_db_sqlstate(db), "42P01") == 0)
    return cli_fail(CLI_EXIT_USAGE, cmd,
                    "the onceq tables are missing in this database; run "
                    "`onceq migrate` first%s%s",
                    sep, suffix);
  return cli_fail(cli_exit_for(e), cmd, "%s%s%s", oq_db_errmsg(db), sep,
                  suffix);
}

/* ------------------------------------------------------------- JSON */

void cli_json_time(cm_json *j, const char *key, double epoch_s)
{
  char buf[40];
  if (isnan(epoch_s))
    cm_json_raw(j, key, NULL);
  else
    cm_json_str(j, key, fmt_time(epoch_s, true, buf, sizeof buf));
}
