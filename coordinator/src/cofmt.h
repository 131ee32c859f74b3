/*
 * cofmt.h: small output helpers shared by stats, schedule and the
 * coordinator: JSON strings, human ages, capped counts and UTC times.
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

/* "850ms", "3.2s", "12m5s", "3h4m", "2d3h"; "-" when seconds < 0. */
void co_fmt_age(char *buf, size_t len, double seconds);

/* "1234", or "100000+" past the cap; "-" when n < 0 (unknown). */
void co_fmt_count(char *buf, size_t len, long n);

/* "2026-11-22 07:50:01 UTC" for Unix seconds; "-" when t <= 0. */
void co_fmt_utc(char *buf, size_t len, double epoch_s);

/* A rate per minute: "-" when < 0 (unknown), "12.5", "1234"; past
 * CO_COUNT_CAP (a rate from capped counts) "100000+". */
void co_fmt_rate(char *buf, size_t len, double per_min);

#endif
