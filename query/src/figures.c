/* figures.c: output helpers (figures.h). */
#include <math.h>

#include "figures.h"

_Static_assert(QV_PAYLOAD_SHOWN == 16384, "QV_PAYLOAD_READ's length");

size_t qv_payload_shown(const char *text, bool *cut)
{
  size_t chars = 0, i = 0;
  *cut = false;
  if (!text)
    return 0;
  for (; text[i]; i++) {
    if (((unsigned char)text[i] & 0xC0) == 0x80)
      continue; /* a continuation byte: same character */
    if (chars == QV_PAYLOAD_SHOWN) {
      *cut = true;
      break;
    }
    chars++;
  }
  return i;
}

void qv_fmt_count(char *buf, size_t len, long n)
{
  if (n < 0)
    snprintf(buf, len, "-");
  else if (n > QV_COUNT_CAP)
    snprintf(buf, len, "%ld+", QV_COUNT_CAP);
  else
    snprintf(buf, len, "%ld", n);
}

void qv_fmt_rate(char *buf, size_t len, double per_min)
{
  if (per_min < 0 || isnan(per_min))
    snprintf(buf, len, "-");
  else if (per_min > (double)QV_COUNT_CAP)
    snprintf(buf, len, "%ld+", QV_COUNT_CAP); /* from capped counts */
  else if (per_min >= 100)
    snprintf(buf, len, "%.0f", per_min);
  else
    snprintf(buf, len, "%.1f", per_min);
}
