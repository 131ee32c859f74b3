/* duration.c: see duration.h. Units: ms, s, m, h (Go's spelling). */
#include <ctype.h>
#include <string.h>

#include "onceq/duration.h"

oq_err oq_duration_parse(const char *text, int64_t *ms)
{
  if (!text || !*text)
    return OQ_ERR_INVALID;
  int64_t total = 0;
  const char *p = text;
  while (*p) {
    if (!isdigit((unsigned char)*p))
      return OQ_ERR_INVALID;
    int64_t v = 0;
    while (isdigit((unsigned char)*p)) {
      v = v * 10 + (*p - '0');
      if (v > (int64_t)1e12)
        return OQ_ERR_INVALID;
      p++;
    }
    int64_t mult;
    if (strncmp(p, "ms", 2) == 0) {
      mult = 1;
      p += 2;
    } else if (*p == 's') {
      mult = 1000;
      p++;
    } else if (*p == 'm') {
      mult = 60 * 1000;
      p++;
    } else if (*p == 'h') {
      mult = 3600 * 1000;
      p++;
    } else {
      return OQ_ERR_INVALID; /* bare number or unknown unit */
    }
    total += v * mult;
    if (total > (int64_t)1e13)
      return OQ_ERR_INVALID;
  }
  *ms = total;
  return OQ_OK;
}
