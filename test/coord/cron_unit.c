/*
 * cron_unit.c: the coordinator's cron parser and next-occurrence walk
 * (common/src/cron.c), no database. Fixed cases with known answers,
 * then the walk against a brute-force minute-by-minute search through
 * libc's gmtime_r, and the calendar conversions against timegm-free
 * round trips.
 */
#include <time.h>

#include "cron.h"
#include "oq_test.h"

static int64_t T(int y, int mo, int d, int h, int mi)
{
  return cm_utc_from_civil(y, mo, d, h, mi, 0);
}

static void must_reject(const char *expr, const char *why_contains)
{
  cm_cron c;
  char err[256] = "";
  if (cm_cron_parse(expr, &c, err, sizeof err) == 0)
    OQT_FAIL("cron '%s' was accepted; it must be rejected", expr);
  ASSERT_CONTAINS(err, why_contains);
}

static cm_cron must_parse(const char *expr)
{
  cm_cron c;
  char err[256] = "";
  if (cm_cron_parse(expr, &c, err, sizeof err) != 0)
    OQT_FAIL("cron '%s' rejected: %s", expr, err);
  return c;
}

/* next(expr, from) == want */
static void next_is(const char *expr, int64_t from, int64_t want)
{
  cm_cron c = must_parse(expr);
  int64_t got = 0;
  if (cm_cron_next(&c, from, &got) != 0)
    OQT_FAIL("cron '%s': no next time after %lld", expr, (long long)from);
  if (got != want) {
    int y, mo, d, h, mi, s, wd;
    cm_utc_to_civil(got, &y, &mo, &d, &h, &mi, &s, &wd);
    OQT_FAIL("cron '%s' after %lld: got %lld (%04d-%02d-%02d %02d:%02d), "
             "want %lld",
             expr, (long long)from, (long long)got, y, mo, d, h, mi,
             (long long)want);
  }
}

static void test_rejects(void)
{
  must_reject("", "0 fields");
  must_reject("* * * *", "4 fields");
  must_reject("* * * * * *", "more than 5");
  must_reject("60 * * * *", "minute field '60': values must be 0-59");
  must_reject("* 24 * * *", "hour field");
  must_reject("* * 0 * *", "day of month field");
  must_reject("* * 32 * *", "day of month field");
  must_reject("* * * 13 *", "month field");
  must_reject("* * * * 8", "day of week field");
  must_reject("5-1 * * * *", "runs backwards");
  must_reject("*/0 * * * *", "step must be at least 1");
  must_reject("a * * * *", "minute field 'a' is not valid");
  must_reject("1,,2 * * * *", "is not valid");
  must_reject("1, * * * *", "is not valid");
  must_reject("* * * foo *", "jan-dec");
  must_reject("* * * * funday", "sun-sat");
  must_reject("1-2-3 * * * *", "is not valid");
  must_reject("@reboot", "unknown macro");
  must_reject("0 0 30 2 *", "never fires");
  must_reject("0 0 31 4,6,9,11 *", "never fires");
  must_reject("99999 * * * *", "is not valid");
}

static void test_fields(void)
{
  cm_cron c = must_parse("0 0 * jan,JUL mon-fri");
  ASSERT_EQ(c.months, (1u << 1) | (1u << 7));
  ASSERT_EQ(c.wdays, 0x3e); /* Monday..Friday */
  c = must_parse("*/15 */6 1-10/3 * 7");
  ASSERT_EQ(c.minutes,
            (1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45));
  ASSERT_EQ(c.hours, (1u << 0) | (1u << 6) | (1u << 12) | (1u << 18));
  ASSERT_EQ(c.mdays, (1u << 1) | (1u << 4) | (1u << 7) | (1u << 10));
  ASSERT_EQ(c.wdays, 1); /* 7 is Sunday, folded to 0 */
  ASSERT(!c.mday_star);
  ASSERT(c.wday_star == false);
  c = must_parse("5/20 * * * *");
  ASSERT_EQ(c.minutes, (1ull << 5) | (1ull << 25) | (1ull << 45));
  c = must_parse("  0   3   *  *  *  ");
  ASSERT_EQ(c.hours, 1u << 3);
  ASSERT(c.mday_star && c.wday_star);
  c = must_parse("* * * * *");
  ASSERT_EQ(c.minutes, (1ull << 60) - 1);
  ASSERT_EQ(c.wdays, 0x7f);
  ASSERT_EQ(c.mdays, 0xfffffffeu);
  ASSERT_EQ(c.months, 0x1ffe);
}

static void test_next(void)
{
  /* the next whole minute, strictly after */
  next_is("* * * * *", T(2024, 2, 28, 23, 59) + 30, T(2024, 2, 29, 0, 0));
  next_is("* * * * *", T(2024, 2, 28, 23, 59), T(2024, 2, 29, 0, 0));
  next_is("*/15 * * * *", T(2024, 3, 1, 10, 7), T(2024, 3, 1, 10, 15));
  next_is("*/15 * * * *", T(2024, 3, 1, 10, 15), T(2024, 3, 1, 10, 30));
  next_is("*/15 * * * *", T(2024, 3, 1, 23, 50), T(2024, 3, 2, 0, 0));
  next_is("5/20 * * * *", T(2024, 3, 1, 10, 6), T(2024, 3, 1, 10, 25));
  /* leap day: every 4 years (2100 is not a leap year) */
  next_is("0 0 29 2 *", T(2024, 3, 1, 0, 0), T(2028, 2, 29, 0, 0));
  next_is("0 0 29 2 *", T(2096, 3, 1, 0, 0), T(2104, 2, 29, 0, 0));
  /* 2024-03-01 is a Friday */
  next_is("0 9 * * mon-fri", T(2024, 3, 1, 9, 0), T(2024, 3, 4, 9, 0));
  next_is("0 0 * * 7", T(2024, 3, 1, 0, 0), T(2024, 3, 3, 0, 0));
  next_is("0 0 * * 0", T(2024, 3, 1, 0, 0), T(2024, 3, 3, 0, 0));
  /* both day fields restricted: EITHER matches (1st of month OR Monday) */
  next_is("0 0 1 * 1", T(2024, 3, 1, 0, 0), T(2024, 3, 4, 0, 0));
  next_is("0 0 1 * 1", T(2024, 3, 25, 0, 0), T(2024, 4, 1, 0, 0));
  /* a '*' day field: BOTH must (odd days AND Monday) */
  next_is("0 0 */2 * 1", T(2024, 3, 1, 0, 0), T(2024, 3, 11, 0, 0));
  /* month and year roll-over */
  next_is("0 0 1 * *", T(2024, 1, 31, 12, 0), T(2024, 2, 1, 0, 0));
  next_is("30 23 31 12 *", T(2024, 12, 31, 23, 30), T(2025, 12, 31, 23, 30));
  next_is("0 12 * feb *", T(2024, 3, 1, 0, 0), T(2025, 2, 1, 12, 0));
  next_is("0 0 31 * *", T(2024, 4, 1, 0, 0), T(2024, 5, 31, 0, 0));
  /* macros */
  next_is("@hourly", T(2024, 3, 1, 10, 30), T(2024, 3, 1, 11, 0));
  next_is("@daily", T(2024, 3, 1, 10, 30), T(2024, 3, 2, 0, 0));
  next_is("@weekly", T(2024, 3, 1, 10, 30), T(2024, 3, 3, 0, 0));
  next_is("@monthly", T(2024, 3, 1, 10, 30), T(2024, 4, 1, 0, 0));
  next_is("@yearly", T(2024, 3, 1, 10, 30), T(2025, 1, 1, 0, 0));
  /* before 1970 */
  next_is("0 0 1 1 *", T(1969, 6, 1, 0, 0), T(1970, 1, 1, 0, 0));
}

/* Calendar conversions against gmtime_r, across a wide span (step: a
 * prime number of seconds so every time of day and weekday is hit). */
static void test_calendar(void)
{
  int n = 0;
  for (int64_t t = -2208988800LL; t < 4102444800LL; t += 7777777, n++) {
    struct tm tm;
    time_t tt = (time_t)t;
    ASSERT(gmtime_r(&tt, &tm) != NULL);
    int y, mo, d, h, mi, s, wd;
    cm_utc_to_civil(t, &y, &mo, &d, &h, &mi, &s, &wd);
    ASSERT_EQ(y, tm.tm_year + 1900);
    ASSERT_EQ(mo, tm.tm_mon + 1);
    ASSERT_EQ(d, tm.tm_mday);
    ASSERT_EQ(h, tm.tm_hour);
    ASSERT_EQ(mi, tm.tm_min);
    ASSERT_EQ(s, tm.tm_sec);
    ASSERT_EQ(wd, tm.tm_wday);
    ASSERT_EQ(cm_utc_from_civil(y, mo, d, h, mi, s), t);
  }
  ASSERT(n > 800);
}

/* The brute force the walk must agree with: every minute, gmtime_r, the
 * Vixie day rule. */
static bool matches(const cm_cron *c, int64_t t)
{
  struct tm tm;
  time_t tt = (time_t)t;
  gmtime_r(&tt, &tm);
  bool dm = (c->mdays >> tm.tm_mday) & 1u;
  bool wm = (c->wdays >> tm.tm_wday) & 1u;
  bool day = (c->mday_star || c->wday_star) ? (dm && wm) : (dm || wm);
  return ((c->minutes >> tm.tm_min) & 1u) && ((c->hours >> tm.tm_hour) & 1u) &&
         ((c->months >> (tm.tm_mon + 1)) & 1u) && day;
}

static void test_against_brute_force(void)
{
  static const char *const exprs[] = {
      "* * * * *",    "*/7 * * * *",     "13 */5 * * *",
      "0 0 1,15 * *", "0 0 * * 1-5",     "30 4 1 * 0",
      "0 0 13 * fri", "59 23 28-31 * *", "0-10/3 8-17 * 1,6 *",
      "15 14 1 * *",  "0 22 * * 1-5",    "23 0-23/2 * * *",
      "5 4 * * sun",  "0 0,12 1 */2 *",  "0 0 29 2 *",
  };
  static const int64_t starts[] = {0, 951782400 /* 2000-02-29 */, 1709251199,
                                   1735689540, 4070908800LL};
  int checked = 0;
  for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
    cm_cron c = must_parse(exprs[i]);
    for (size_t j = 0; j < sizeof starts / sizeof starts[0]; j++) {
      int64_t from = starts[j], got;
      ASSERT_EQ(cm_cron_next(&c, from, &got), 0);
      /* brute force up to 9 years of minutes, only as far as needed */
      int64_t want = -1;
      for (int64_t t = (from / 60) * 60 + 60; t <= got; t += 60)
        if (matches(&c, t)) {
          want = t;
          break;
        }
      if (want != got)
        OQT_FAIL("cron '%s' after %lld: walk says %lld, brute force %lld",
                 exprs[i], (long long)from, (long long)got, (long long)want);
      /* and a chain of 20 occurrences, each the next of the previous */
      int64_t t = got;
      for (int k = 0; k < 20; k++) {
        int64_t n2;
        ASSERT_EQ(cm_cron_next(&c, t, &n2), 0);
        ASSERT(n2 > t);
        ASSERT(matches(&c, n2));
        for (int64_t u = t + 60; u < n2 && u < t + 60 * 60 * 24 * 3; u += 60)
          if (matches(&c, u))
            OQT_FAIL("cron '%s': %lld matches but next(%lld) = %lld", exprs[i],
                     (long long)u, (long long)t, (long long)n2);
        t = n2;
        checked++;
      }
    }
  }
  ASSERT_EQ(checked, 15 * 5 * 20);
}

int main(void)
{
  test_rejects();
  test_fields();
  test_next();
  test_calendar();
  test_against_brute_force();
  printf("cron: all checks passed\n");
  return 0;
}
