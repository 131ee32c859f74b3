/*
 * cofmt.h: the figures of stats and the status page: capped counts and
 * rates per minute (durations and times are common/src/fmt.h).
 *
 * Terms: a capped count is the result of count(*) over a LIMIT cap+1
 * subquery; a value above CO_COUNT_CAP means "more than CO_COUNT_CAP".
 *
 * Thread safety: pure functions; the FILE is the caller's.
 */
#ifndef ONCEQ_COORD_COFMT_H
#define ONCEQ_COORD_COFMT_H

#include <stddef.h>
#include <stdio.h>

/* Counts stop here: count(*) FROM (SELECT 1 ... LIMIT CO_COUNT_CAP + 1). */
#define CO_COUNT_CAP 100000L

/* "1234", or "100000+" past the cap; "-" when n < 0 (unknown). */
void co_fmt_count(char *buf, size_t len, long n);

/* A rate per minute: "-" when < 0 (unknown), "12.5", "1234"; past
 * CO_COUNT_CAP (a rate from capped counts) "100000+". */
void co_fmt_rate(char *buf, size_t len, double per_min);

#endif
