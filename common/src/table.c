/*
 * table.c: aligned human tables fitted to a width (table.h).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "table.h"

#define GAP 2             /* spaces between columns */
#define ELLIPSIS "\u2026" /* "…": marks a cut cell */

typedef struct col {
  char *header;
  unsigned flags; /* CM_COL_* */
} col;

struct cm_table {
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

cm_table *cm_table_new(void)
{
  return calloc(1, sizeof(cm_table));
}

void cm_table_free(cm_table *t)
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

void cm_table_col(cm_table *t, const char *header, unsigned flags)
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
static void add_owned(cm_table *t, char *text)
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

void cm_table_cell(cm_table *t, const char *text)
{
  if (!t)
    return;
  add_owned(t, strdup(text ? text : "-"));
}

void cm_table_cellf(cm_table *t, const char *fmt, ...)
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

size_t cm_table_rows(const cm_table *t)
{
  return t && t->ncols ? t->ncells / t->ncols : 0;
}

int cm_out_width(FILE *out)
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
  if (flags & CM_COL_RIGHT)
    fprintf(out, "%*s%s", (int)(w - dw), "", s);
  else if (last)
    fputs(s, out);
  else
    fprintf(out, "%s%*s", s, (int)(w - dw), "");
}

int cm_table_print(const cm_table *t, FILE *out, int width)
{
  if (!t || t->oom || t->ncols == 0)
    return -1;
  if (width <= 0)
    width = cm_out_width(out);
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
    if (!(t->cols[c].flags & CM_COL_FLEX))
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
