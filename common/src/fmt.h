/*
 * fmt.h: text for people, one format each, shared by the CLI, the
 * coordinator's status page and its views: compact durations ("3m5s"),
 * "12s ago" / "in 5m", UTC times in ISO-8601 ("2026-11-22T08:07:15Z"), and
 * the lenient number readers for database text values.
 *
 * Terms: a negative or NAN number of seconds means "unknown" and prints
 * as "-" (a lag with nothing ready, a schedule that never ran).
 *
 * Thread safety: pure functions; buffers are the caller's.
 */
#ifndef ONCEQ_COMMON_FMT_H
#define ONCEQ_COMMON_FMT_H

#include <stddef.h>

/* A compact duration: "0.4s", "5s", "3m5s", "12m", "2h5m", "4d"; "-" when
 * seconds is negative or NAN (unknown). 16 bytes hold any. Returns buf. */
const char *cm_fmt_dur(char *buf, size_t len, double seconds);
/* "12s ago" for seconds_since > 0, "in 5m" for < 0; "-" for NAN. */
const char *cm_fmt_ago(char *buf, size_t len, double seconds_since);
/* UTC ISO-8601 with seconds, "2026-11-22T08:07:15Z", for Unix epoch
 * seconds; "-" when negative or NAN. 24 bytes hold it. Returns buf. */
const char *cm_fmt_utc(char *buf, size_t len, double epoch_s);
/* The same with milliseconds, "2026-11-22T08:07:15.123Z" (JSON). */
const char *cm_fmt_utc_ms(char *buf, size_t len, double epoch_s);

/* A database text value as a number: dflt for NULL, "" or anything that
 * is not wholly a number ("12x"). */
long cm_atol(const char *s, long dflt);
double cm_atof(const char *s, double dflt);

#endif
