/*
 * promtext.c: owns the mechanics of the Prometheus text exposition format
 * 0.0.4 (promtext.h): the snprintf-style output cursor, HELP/TYPE lines,
 * label escaping, float formatting and the cut to whole lines. Which series
 * exist, and their values, belong to the callers.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promtext.h"

void cm_prom_out_init(cm_prom_out *o, char *buf, size_t len)
{
  o->buf = buf;
  o->len = len;
  o->need = 0;
  if (len > 0)
    buf[0] = '\0';
}

void cm_prom_printf(cm_prom_out *o, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  /* Past the end, keep counting: the caller sizes its next try from need. */
  if (o->need < o->len)
    n = vsnprintf(o->buf + o->need, o->len - o->need, fmt, ap);
  else
    n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->need += (size_t)n;
}

void cm_prom_help_type(cm_prom_out *o, const char *name, const char *help,
                       const char *type)
{
  cm_prom_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void cm_prom_counter(cm_prom_out *o, const char *name, const char *help,
                     uint64_t v)
{
  cm_prom_help_type(o, name, help, "counter");
  cm_prom_printf(o, "%s %llu\n", name, (unsigned long long)v);
}

void cm_prom_gauge(cm_prom_out *o, const char *name, const char *help,
                   long long v)
{
  cm_prom_help_type(o, name, help, "gauge");
  cm_prom_printf(o, "%s %lld\n", name, v);
}

void cm_prom_info(cm_prom_out *o, const char *name, const char *help,
                  const char *version)
{
  cm_prom_help_type(o, name, help, "gauge");
  cm_prom_printf(o, "%s{version=\"", name);
  cm_prom_label_value(o, version);
  cm_prom_printf(o, "\"} 1\n");
}

void cm_prom_label_value(cm_prom_out *o, const char *s)
{
  for (; *s; s++) {
    if (*s == '\\')
      cm_prom_printf(o, "\\\\");
    else if (*s == '"')
      cm_prom_printf(o, "\\\"");
    else if (*s == '\n')
      cm_prom_printf(o, "\\n");
    else
      cm_prom_printf(o, "%c", *s);
  }
}

void cm_prom_fmt_float(char *dst, size_t len, double v)
{
  if (isnan(v)) {
    snprintf(dst, len, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(dst, len, "%s", v > 0 ? "+Inf" : "-Inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    double a = fabs(v);

    snprintf(dst, len, "%.*g", prec, v);
    if (strtod(dst, NULL) != v)
      continue;
    /* %.1g writes 10 as "1e+01": take more digits to get "10". */
    if (strchr(dst, 'e') && a >= 1e-4 && a < 1e15 && prec < 17)
      continue;
    return;
  }
}

size_t cm_prom_render_lines(size_t (*render)(void *ud, char *buf, size_t len),
                            void *ud, char *buf, size_t len)
{
  size_t need, end;

  if (!buf || len == 0)
    return 0;
  buf[0] = '\0';
  if (!ud)
    return 0;
  need = render(ud, buf, len);
  if (need < len)
    return need;
  end = len - 1; /* vsnprintf kept buf[0..len-2] and a NUL */
  while (end > 0 && buf[end - 1] != '\n')
    end--;
  buf[end] = '\0';
  return end;
}
