/* cofmt.c: output helpers (cofmt.h). */
#include <math.h>
#include <stdint.h>

#include "cofmt.h"
#include "cron.h"

void co_fmt_age(char *buf, size_t len, double s)
{
  if (s < 0 || isnan(s)) {
    snprintf(buf, len, "-");
    return;
  }
  if (s < 1) {
    snprintf(buf, len, "%dms", (int)(s * 1000));
    return;
  }
  if (s < 60) {
    snprintf(buf, len, "%.1fs", s);
    return;
  }
  long t = (long)s;
  if (t < 3600)
    snprintf(buf, len, "%ldm%lds", t / 60, t % 60);
  else if (t < 86400)
    snprintf(buf, len, "%ldh%ldm", t / 3600, t % 3600 / 60);
  else
    snprintf(buf, len, "%ldd%ldh", t / 86400, t % 86400 / 3600);
}

void co_fmt_count(char *buf, size_t len, long n)
{
  if (n < 0)
    snprintf(buf, len, "-");
  else if (n > CO_COUNT_CAP)
    snprintf(buf, len, "%ld+", CO_COUNT_CAP);
  else
    snprintf(buf, len, "%ld", n);
}

void co_fmt_utc(char *buf, size_t len, double epoch_s)
{
  if (!(epoch_s > 0)) {
    snprintf(buf, len, "-");
    return;
  }
  int y, mo, d, h, mi, s, wd;
  co_utc_to_civil((int64_t)floor(epoch_s), &y, &mo, &d, &h, &mi, &s, &wd);
  snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d UTC", y, mo, d, h, mi, s);
}

void co_fmt_rate(char *buf, size_t len, double per_min)
{
  if (per_min < 0 || isnan(per_min))
    snprintf(buf, len, "-");
  else if (per_min > (double)CO_COUNT_CAP)
    snprintf(buf, len, "%ld+", CO_COUNT_CAP); /* from capped counts */
  else if (per_min >= 100)
    snprintf(buf, len, "%.0f", per_min);
  else
    snprintf(buf, len, "%.1f", per_min);
}
