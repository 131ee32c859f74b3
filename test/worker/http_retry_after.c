/*
 * http_retry_after.c: unit test of wk_http_parse_retry_after (no network).
 * Retry-After is delta-seconds or an HTTP-date (IMF-fixdate, RFC 850 or
 * asctime); the result is a delay in milliseconds, capped at one hour, 0 for
 * a date in the past and -1 for anything unparseable.
 */
#include <time.h>

#include "handler_http.h"
#include "oq_test.h"

#define NOW 784111777L /* Sun, 06 Nov 1994 08:49:37 GMT */
#define HOUR_MS 3600000

static void check(const char *value, long now, int want)
{
  int got = wk_http_parse_retry_after(value, now);
  if (got != want)
    OQT_FAIL("Retry-After \"%s\": got %d, want %d", value ? value : "(null)",
             got, want);
}

static void test_delta_seconds(void)
{
  check("0", NOW, 0);
  check("2", NOW, 2000);
  check("120", NOW, 120000);
  check(" 120\t", NOW, 120000); /* optional whitespace around the value */
  check("007", NOW, 7000);
  check("3599", NOW, 3599000);
  check("3600", NOW, HOUR_MS);
  check("3601", NOW, HOUR_MS);                             /* capped */
  check("2147483648", NOW, HOUR_MS);                       /* past INT_MAX */
  check("99999999999999999999999999999999", NOW, HOUR_MS); /* no overflow */
}

static void test_dates(void)
{
  /* the same instant in the three forms: 10 s ahead */
  check("Sun, 06 Nov 1994 08:49:47 GMT", NOW, 10000);
  check("Sunday, 06-Nov-94 08:49:47 GMT", NOW, 10000);
  check("Sun Nov  6 08:49:47 1994", NOW, 10000);
  /* exactly now, and names in another case */
  check("Sun, 06 Nov 1994 08:49:37 GMT", NOW, 0);
  check("sun, 06 NOV 1994 08:49:47 GMT", NOW, 10000);
  /* across a day, month and year boundary */
  check("Thu, 01 Jan 1970 00:01:00 GMT", 0, 60000);
  check("Sat, 01 Jan 2000 00:00:30 GMT", 946684799L, 31000);
  /* a leap day */
  check("Thu, 29 Feb 1996 00:00:05 GMT", 825552000L, 5000);
  /* the past: retry now */
  check("Sun, 06 Nov 1994 08:49:36 GMT", NOW, 0);
  check("Fri, 01 Jan 1971 00:00:00 GMT", NOW, 0);
  check("Sunday, 06-Nov-94 08:00:00 GMT", NOW, 0);
  /* far future: capped */
  check("Sun, 06 Nov 1994 09:49:38 GMT", NOW, HOUR_MS);
  check("Fri, 31 Dec 9999 23:59:59 GMT", NOW, HOUR_MS);
  check("Wed, 29 Feb 2096 12:00:00 GMT", NOW, HOUR_MS);
  /* RFC 850 two-digit year: within 50 years ahead, or the last century */
  check("Friday, 01-Jan-21 00:00:10 GMT", 1609459200L, 10000); /* 2021 */
  check("Friday, 01-Jan-99 00:00:10 GMT", 1609459200L, 0);     /* 1999 */
}

static void test_garbage(void)
{
  check(NULL, NOW, -1);
  check("", NOW, -1);
  check("   ", NOW, -1);
  check("-1", NOW, -1);
  check("+5", NOW, -1);
  check("1.5", NOW, -1);
  check("5s", NOW, -1);
  check("2 3", NOW, -1);
  check("soon", NOW, -1);
  check("0x10", NOW, -1);
  check("Sun, 06 Nov 1994 08:49:47 PST", NOW, -1);   /* only GMT */
  check("Sun, 06 Nov 1994 08:49:47", NOW, -1);       /* no zone */
  check("Sun, 06 Nov 1994 08:49:47 GMT x", NOW, -1); /* trailing junk */
  check("Sun, 6 Nov 1994 08:49:47 GMT", NOW, -1);    /* 2-digit day */
  check("Sun, 06 Foo 1994 08:49:47 GMT", NOW, -1);   /* month */
  check("Xyz, 06 Nov 1994 08:49:47 GMT", NOW, -1);   /* weekday */
  check("Sun, 32 Nov 1994 08:49:47 GMT", NOW, -1);   /* day */
  check("Sun, 31 Nov 1994 08:49:47 GMT", NOW, -1);   /* 30-day month */
  check("Wed, 29 Feb 1995 08:49:47 GMT", NOW, -1);   /* not a leap year */
  check("Thu, 29 Feb 1900 08:49:47 GMT", NOW, -1);   /* not a leap year */
  check("Sun, 00 Nov 1994 08:49:47 GMT", NOW, -1);
  check("Sun, 06 Nov 1994 24:00:00 GMT", NOW, -1); /* hour */
  check("Sun, 06 Nov 1994 08:60:00 GMT", NOW, -1); /* minute */
  check("Sun, 06 Nov 1994 08:49:61 GMT", NOW, -1); /* second */
  check("Sun, 06 Nov 94 08:49:47 GMT", NOW, -1);   /* 2-digit year */
  check("Sunday, 06-Nov-1994 08:49:47 GMT", NOW, -1);
  check("Sun Nov 6 08:49:47 1994", NOW, -1); /* asctime pads */
  check("Sun Nov  6 08:49:47 1994 GMT", NOW, -1);
  check("2024-01-01T00:00:00Z", NOW, -1); /* not an HTTP-date */
}

/* Against the real clock, as the handler calls it. */
static void test_real_clock(void)
{
  time_t now = time(NULL);
  time_t later = now + 30;
  struct tm tm;
  char date[64];
  ASSERT(gmtime_r(&later, &tm) != NULL);
  /* C locale: English names, as an HTTP server sends them */
  ASSERT(strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0);
  check(date, (long)now, 30000);
}

int main(void)
{
  test_delta_seconds();
  test_dates();
  test_garbage();
  test_real_clock();
  printf("ok\n");
  return 0;
}
