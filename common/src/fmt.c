/* fmt.c: durations, times and numbers as text (fmt.h). */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fmt.h"

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

const char *cm_fmt_dur(char *buf, size_t len, double s)
{
  if (isnan(s) || s < 0) {
    put(buf, len, "-");
    return buf;
  }
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

const char *cm_fmt_ago(char *buf, size_t len, double since)
{
  char d[16];
  if (isnan(since)) {
    put(buf, len, "-");
    return buf;
  }
  cm_fmt_dur(d, sizeof d, fabs(since));
  if (since >= 0)
    put(buf, len, "%s ago", d);
  else
    put(buf, len, "in %s", d);
  return buf;
}

/* ISO-8601 UTC; with_ms adds ".mmm". */
static const char *fmt_time(char *buf, size_t len, double epoch_s, bool with_ms)
{
  if (isnan(epoch_s) || epoch_s < 0) {
    put(buf, len, "-");
    return buf;
  }
  time_t t = (time_t)epoch_s; /* truncates toward 0: floor for >= 0 */
  int ms = (int)((epoch_s - (double)t) * 1000.0);
  struct tm tm;
  char base[24];
  if (!gmtime_r(&t, &tm) ||
      strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
    put(buf, len, "-");
  else if (with_ms)
    put(buf, len, "%s.%03dZ", base, ms > 999 ? 999 : ms);
  else
    put(buf, len, "%sZ", base);
  return buf;
}

const char *cm_fmt_utc(char *buf, size_t len, double epoch_s)
{
  return fmt_time(buf, len, epoch_s, false);
}

const char *cm_fmt_utc_ms(char *buf, size_t len, double epoch_s)
{
  return fmt_time(buf, len, epoch_s, true);
}

long cm_atol(const char *s, long dflt)
{
  if (!s || !*s)
    return dflt;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  return end && *end == '\0' ? v : dflt;
}

double cm_atof(const char *s, double dflt)
{
  if (!s || !*s)
    return dflt;
  char *end = NULL;
  double v = strtod(s, &end);
  return end && *end == '\0' ? v : dflt;
}
