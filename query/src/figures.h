/*
 * figures.h: the figures of stats and the status page: capped counts and
 * rates per minute (durations and times are common/src/fmt.h).
 *
 * Terms: a capped count is the result of count(*) over a LIMIT cap+1
 * subquery; a value above QV_COUNT_CAP means "more than QV_COUNT_CAP".
 *
 * Thread safety: pure functions; the FILE is the caller's.
 */
#ifndef ONCEQ_QUERY_FIGURES_H
#define ONCEQ_QUERY_FIGURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Counts stop here: count(*) FROM (SELECT 1 ... LIMIT QV_COUNT_CAP + 1). */
#define QV_COUNT_CAP 100000L

/* "1234", or "100000+" past the cap; "-" when n < 0 (unknown). */
void qv_fmt_count(char *buf, size_t len, long n);

/* A rate per minute: "-" when < 0 (unknown), "12.5", "1234"; past
 * QV_COUNT_CAP (a rate from capped counts) "100000+". */
void qv_fmt_rate(char *buf, size_t len, double per_min);

/* Characters of a payload the read views (`onceq list`, /api/dead) and the
 * dead-letter webhook show: 16 KiB of its JSON text. The statements read
 * left(payload::text, QV_PAYLOAD_SHOWN + 1), so a payload of up to 1 MiB
 * (schema v4) never travels whole; the extra character says it was cut.
 * docs/operations.md and docs/enqueue.md, "Payload size". */
#define QV_PAYLOAD_SHOWN 16384
#define QV_PAYLOAD_READ "left(payload::text, 16385)"

/* The bytes of the first QV_PAYLOAD_SHOWN characters (UTF-8, as left()
 * counts them) of text, a payload as QV_PAYLOAD_READ read it; *cut: text
 * has more than that, so those bytes are a cut payload (not JSON). */
size_t qv_payload_shown(const char *text, bool *cut);

#endif
