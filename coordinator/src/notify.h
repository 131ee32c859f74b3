/*
 * notify.h: dead-job webhooks, sent by the coordinator leader. Each item in
 * onceq_dead whose notified_at is NULL is POSTed as one JSON object to
 * --notify-url (libcurl), oldest first, with the header
 * `Idempotency-Key: <item id>.<died_at, microseconds since the epoch>`:
 * one key per death, so an item brought back by `onceq retry` that dies
 * again is a new notification with a new key.
 *
 * Delivery is AT LEAST ONCE, and each item is recorded as notified EXACTLY
 * ONCE: notified_at is set only after the receiver answered, by
 * oq_dead_mark_notified (onceq/dead.h), a conditional UPDATE of the row
 * (id, died_at) WHERE notified_at IS NULL.
 * If the leader dies between the 2xx and that UPDATE (or a deposed leader
 * was mid-request), the next leader POSTs the item again with the same
 * Idempotency-Key, so a receiver that keeps the keys it has seen makes the
 * effect exactly once. Marking BEFORE the POST would instead lose the
 * notification in that window (at most once); a lost dead-job alert is
 * worse than a duplicate one with a key to drop it by.
 *
 * Answers:
 *  - 2xx: notified (notify_status = the status);
 *  - 400, 409, 410, 413, 415, 422: the receiver rejects THIS item; it is
 *    marked notified with that status (logged as an error) so that one bad
 *    item cannot block the rest;
 *  - anything else (3xx, 401, 403, 404, 408, 429, 5xx, timeouts,
 *    connection errors): the receiver or the URL is not right; the pass
 *    stops and the next one waits with capped exponential backoff (1 s
 *    doubling to 5 min, jitter), while the item stays first in line.
 *
 * Time: a pass starts no new request once it has spent its budget (the
 * coordinator gives it one --interval) and leaves the rest, in order, to
 * the next pass; it sends at least one item per pass. So a slow receiver
 * delays retention and schedules by at most the budget plus one request
 * (--notify-timeout), not by a whole batch of requests.
 *
 * Thread safety: a notifier (and its CURL handle) belongs to one thread.
 */
#ifndef ONCEQ_COORD_NOTIFY_H
#define ONCEQ_COORD_NOTIFY_H

#include "signals.h"
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

typedef struct co_notifier co_notifier;

/* Items per pass at most: the pass also ends at the first retryable
 * failure, and when its time budget is spent. */
#define CO_NOTIFY_BATCH 100

/*
 * A notifier for url (http:// or https://), each request limited to
 * timeout_ms. NULL with one line in err when the URL is unusable (exit 2)
 * or on out-of-memory. Free with co_notifier_free.
 */
co_notifier *co_notifier_new(const char *url, int timeout_ms, char *err,
                             size_t errlen);
void co_notifier_free(co_notifier *n);

/* The URL with any user:password replaced by ***, for logs. */
const char *co_notifier_shown_url(const co_notifier *n);

/*
 * One pass, unless the backoff after a failure is still running. No new
 * request starts once budget_ms have passed since the pass began (the
 * first always does). A request in flight is abandoned within about a
 * second of *stop becoming non-zero.
 * *sent / *failed get the items settled and the failed attempts.
 * Database errors are returned (reported on db); HTTP failures are not
 * errors of the pass.
 */
OQ_MUST_CHECK oq_err co_notify_run(co_notifier *n, oq_db *db,
                                   const cm_signal_count *stop,
                                   int64_t budget_ms, long *sent, long *failed);

#endif
