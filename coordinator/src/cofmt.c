/* cofmt.c: output helpers (cofmt.h). */
#include <math.h>

#include "cofmt.h"

void co_fmt_count(char *buf, size_t len, long n)
{
  if (n < 0)
    snprintf(buf, len, "-");
  else if (n > CO_COUNT_CAP)
    snprintf(buf, len, "%ld+", CO_COUNT_CAP);
  else
    snprintf(buf, len, "%ld", n);
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
