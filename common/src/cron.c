/*
 * cron.c: parses 5-field cron expressions into bit sets and walks the UTC
 * calendar to the next matching minute. See cron.h for the syntax.
 *
 * The calendar arithmetic is Howard Hinnant's days_from_civil /
 * civil_from_days (public domain), so no libc time zone state is touched
 * and the functions stay pure.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cron.h"

/* ---- calendar ---------------------------------------------------------- */

/* Days since 1970-01-01 of the civil date y-m-d. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;                                  /* [0, 399] */
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1; /* [0, 365] */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; /* [0, 146096] */
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t yy = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yy + (*m <= 2));
}

static int64_t floor_div(int64_t a, int64_t b)
{
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

int64_t cm_utc_from_civil(int y, int mon, int d, int h, int min, int s)
{
  return days_from_civil(y, mon, d) * 86400 + (int64_t)h * 3600 +
         (int64_t)min * 60 + s;
}

void cm_utc_to_civil(int64_t t, int *y, int *mon, int *d, int *h, int *min,
                     int *s, int *wday)
{
  int64_t days = floor_div(t, 86400);
  int64_t rem = t - days * 86400;
  civil_from_days(days, y, mon, d);
  *h = (int)(rem / 3600);
  *min = (int)(rem % 3600 / 60);
  *s = (int)(rem % 60);
  /* 1970-01-01 was a Thursday (4) */
  int64_t w = (days + 4) % 7;
  *wday = (int)(w < 0 ? w + 7 : w);
}

static int days_in_month(int y, int m)
{
  static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
    return 29;
  return dim[m - 1];
}

/* ---- parsing ----------------------------------------------------------- */

typedef struct field_def {
  const char *name;         /* for messages */
  int lo, hi;               /* inclusive value range */
  const char *const *names; /* 3-letter names for lo.., or NULL */
} field_def;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may",
                                          "jun", "jul", "aug", "sep", "oct",
                                          "nov", "dec", NULL};
static const char *const wday_names[] = {"sun", "mon", "tue", "wed",
                                         "thu", "fri", "sat", NULL};

static const field_def fields[5] = {
    {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},
    {"day of month", 1, 31, NULL},
    {"month", 1, 12, month_names},
    /* 7 is accepted as Sunday and folded to 0 */
    {"day of week", 0, 7, wday_names},
};

/* Read a number or a name at *p; advances *p. 0 ok, -1 bad. */
static int read_value(const field_def *f, const char **p, int *v)
{
  const char *s = *p;
  if (isdigit((unsigned char)*s)) {
    int n = 0, digits = 0;
    while (isdigit((unsigned char)*s) && digits < 4) {
      n = n * 10 + (*s - '0');
      s++;
      digits++;
    }
    if (isdigit((unsigned char)*s))
      return -1;
    *v = n;
    *p = s;
    return 0;
  }
  if (f->names && isalpha((unsigned char)s[0]) &&
      isalpha((unsigned char)s[1]) && isalpha((unsigned char)s[2]) &&
      !isalpha((unsigned char)s[3])) {
    for (int i = 0; f->names[i]; i++) {
      if (tolower((unsigned char)s[0]) == f->names[i][0] &&
          tolower((unsigned char)s[1]) == f->names[i][1] &&
          tolower((unsigned char)s[2]) == f->names[i][2]) {
        *v = f->lo + i;
        *p = s + 3;
        return 0;
      }
    }
  }
  return -1;
}

/* Parse one field's text (NUL-terminated) into a 64-bit set. */
static int parse_field(const field_def *f, const char *text, uint64_t *bits,
                       char *err, size_t errlen)
{
  uint64_t set = 0;
  const char *p = text;
  for (;;) {
    int lo, hi, step = 1;
    if (*p == '*') {
      lo = f->lo;
      hi = f->hi == 7 ? 6 : f->hi; /* "*" in day of week: 0-6 */
      p++;
    } else {
      if (read_value(f, &p, &lo) != 0)
        goto bad;
      hi = lo;
      if (*p == '-') {
        p++;
        if (read_value(f, &p, &hi) != 0)
          goto bad;
      } else if (*p == '/') {
        hi = f->hi == 7 ? 6 : f->hi; /* "N/S": N to the maximum */
      }
    }
    if (*p == '/') {
      p++;
      if (!isdigit((unsigned char)*p))
        goto bad;
      step = 0;
      for (int digits = 0; isdigit((unsigned char)*p); p++, digits++) {
        if (digits >= 3)
          goto bad;
        step = step * 10 + (*p - '0');
      }
      if (step < 1) {
        snprintf(err, errlen, "%s field '%s': a step must be at least 1",
                 f->name, text);
        return -1;
      }
    }
    if (*p != ',' && *p != '\0')
      goto bad;
    if (lo < f->lo || lo > f->hi || hi < f->lo || hi > f->hi) {
      snprintf(err, errlen, "%s field '%s': values must be %d-%d", f->name,
               text, f->lo, f->hi);
      return -1;
    }
    if (lo > hi) {
      snprintf(err, errlen,
               "%s field '%s': range %d-%d runs backwards; write it as "
               "two ranges",
               f->name, text, lo, hi);
      return -1;
    }
    for (int v = lo; v <= hi; v += step)
      set |= (uint64_t)1 << (f->hi == 7 && v == 7 ? 0 : v);
    if (*p == '\0')
      break;
    p++; /* ',' */
    if (*p == '\0')
      goto bad;
  }
  *bits = set;
  return 0;
bad:
  snprintf(err, errlen,
           "%s field '%s' is not valid; use *, N, N-M, lists a,b and steps "
           "*/S or N-M/S%s",
           f->name, text,
           f->names == month_names  ? " (months 1-12 or jan-dec)"
           : f->names == wday_names ? " (days 0-7 or sun-sat)"
                                    : "");
  return -1;
}

static const struct {
  const char *name;
  const char *expr;
} macros[] = {
    {"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

int cm_cron_parse(const char *expr, cm_cron *out, char *err, size_t errlen)
{
  char buf[256];
  char *tok[6];
  int n = 0;
  cm_cron c;
  memset(&c, 0, sizeof c);
  if (!expr) {
    snprintf(err, errlen, "no cron expression given");
    return -1;
  }
  while (isspace((unsigned char)*expr))
    expr++;
  if (expr[0] == '@') {
    for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++) {
      size_t len = strlen(macros[i].name);
      if (strncmp(expr, macros[i].name, len) == 0) {
        const char *rest = expr + len;
        while (isspace((unsigned char)*rest))
          rest++;
        if (*rest == '\0')
          return cm_cron_parse(macros[i].expr, out, err, errlen);
      }
    }
    snprintf(err, errlen,
             "cron '%.64s': unknown macro; use @hourly, @daily, @weekly, "
             "@monthly or @yearly, or 5 fields",
             expr);
    return -1;
  }
  if (strlen(expr) >= sizeof buf) {
    snprintf(err, errlen, "cron expression too long");
    return -1;
  }
  snprintf(buf, sizeof buf, "%s", expr);
  for (char *p = buf; *p;) {
    while (isspace((unsigned char)*p))
      *p++ = '\0';
    if (!*p)
      break;
    if (n == 6)
      break;
    tok[n++] = p;
    while (*p && !isspace((unsigned char)*p))
      p++;
  }
  if (n != 5) {
    snprintf(err, errlen,
             "cron '%.64s' has %s%d field%s; expected 5: minute hour "
             "day-of-month month day-of-week (quote it)",
             expr, n == 6 ? "more than " : "", n == 6 ? 5 : n,
             n == 1 ? "" : "s");
    return -1;
  }
  uint64_t bits[5];
  for (int i = 0; i < 5; i++)
    if (parse_field(&fields[i], tok[i], &bits[i], err, errlen) != 0)
      return -1;
  c.minutes = bits[0];
  c.hours = (uint32_t)bits[1];
  c.mdays = (uint32_t)bits[2];
  c.months = (uint16_t)bits[3];
  c.wdays = (uint8_t)bits[4];
  c.mday_star = tok[2][0] == '*';
  c.wday_star = tok[4][0] == '*';

  /* Reject what can never fire (e.g. Feb 30): 50 years covers every
   * calendar combination (leap days recur within 8 years, weekday/date
   * pairs within 28). */
  int64_t next;
  if (cm_cron_next(&c, 0, &next) != 0) {
    snprintf(err, errlen,
             "cron '%.64s' never fires (no such day in the months it "
             "names)",
             expr);
    return -1;
  }
  *out = c;
  return 0;
}

/* ---- next occurrence --------------------------------------------------- */

static bool day_matches(const cm_cron *c, int mday, int wday)
{
  bool dm = (c->mdays >> mday) & 1u;
  bool wm = (c->wdays >> wday) & 1u;
  if (c->mday_star || c->wday_star)
    return dm && wm;
  return dm || wm;
}

int cm_cron_next(const cm_cron *c, int64_t after_s, int64_t *next_s)
{
  /* the next whole minute after after_s */
  int64_t t = floor_div(after_s, 60) * 60 + 60;
  int y, mon, d, h, mi, s, wd;
  cm_utc_to_civil(t, &y, &mon, &d, &h, &mi, &s, &wd);
  int64_t day = floor_div(t, 86400);
  int start_h = h, start_m = mi;
  /* bounded: one step per day (months skip ahead), at most ~50 years */
  for (int steps = 0; steps < 50 * 366; steps++) {
    if (!((c->months >> mon) & 1u)) {
      /* first day of the next month */
      if (++mon > 12) {
        mon = 1;
        y++;
      }
      d = 1;
      day = days_from_civil(y, mon, 1);
      start_h = start_m = 0;
      continue;
    }
    wd = (int)(((day + 4) % 7 + 7) % 7);
    if (day_matches(c, d, wd)) {
      for (int hh = start_h; hh < 24; hh++) {
        if (!((c->hours >> hh) & 1u))
          continue;
        for (int mm = hh == start_h ? start_m : 0; mm < 60; mm++) {
          if ((c->minutes >> mm) & 1u) {
            *next_s = day * 86400 + hh * 3600 + mm * 60;
            return 0;
          }
        }
      }
    }
    /* the next day */
    day++;
    start_h = start_m = 0;
    if (++d > days_in_month(y, mon)) {
      d = 1;
      if (++mon > 12) {
        mon = 1;
        y++;
      }
    }
  }
  return -1;
}
