/*
 * cron.h: standard 5-field cron expressions ("minute hour day-of-month month
 * day-of-week") and the next time one fires. Pure functions, no database.
 *
 * Terms:
 *  - field syntax: `*`, `N`, `N-M`, lists `a,b,c`, steps `*` + `/S`,
 *    `N-M/S` and `N/S` (N to the field's maximum, every S). Months may be
 *    written jan..dec and days of the week sun..sat (either case); day of
 *    week 0 and 7 are both Sunday. Macros: @yearly (@annually), @monthly,
 *    @weekly, @daily (@midnight), @hourly.
 *  - day rule (Vixie cron, what crontab(5) documents): when both the
 *    day-of-month and day-of-week fields are restricted (neither starts
 *    with `*`), a day matches if EITHER matches; otherwise both must.
 *  - times are Unix seconds, evaluated in UTC; occurrences fall on whole
 *    minutes.
 *
 * Thread safety: pure functions over caller-owned structs.
 */
#ifndef ONCEQ_COMMON_CRON_H
#define ONCEQ_COMMON_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cm_cron {
  uint64_t minutes; /* bit m: minute m (0-59) matches */
  uint32_t hours;   /* bit h: hour h (0-23) */
  uint32_t mdays;   /* bit d: day of month d (1-31) */
  uint16_t months;  /* bit m: month m (1-12) */
  uint8_t wdays;    /* bit w: weekday w (0-6, Sunday = 0) */
  bool mday_star;   /* day-of-month field started with '*' */
  bool wday_star;   /* day-of-week field started with '*' */
} cm_cron;

/*
 * Parse expr into *out. Returns 0, or -1 with one line in err naming the
 * field and what is wrong. An expression that can never fire (for
 * example "0 0 30 2 *") is rejected too.
 */
int cm_cron_parse(const char *expr, cm_cron *out, char *err, size_t errlen);

/*
 * The first time strictly after after_s (Unix seconds) at which c fires:
 * 0 and *next_s set, or -1 when there is none within 50 years (never, for
 * an expression cm_cron_parse accepted).
 */
int cm_cron_next(const cm_cron *c, int64_t after_s, int64_t *next_s);

/* Broken-down UTC time <-> Unix seconds, for callers and tests (proleptic
 * Gregorian calendar, any year). */
int64_t cm_utc_from_civil(int y, int mon, int d, int h, int min, int s);
void cm_utc_to_civil(int64_t t, int *y, int *mon, int *d, int *h, int *min,
                     int *s, int *wday);

#endif
