/*
 * claim_size.h: how many items the worker claims, sized by the work
 * (docs/worker.md, "How much a worker claims"). The executors report how
 * long their handlers took (per item, or per batch for the pipelined --sql
 * ack); from that measured time per item, the executor count and a short
 * horizon this module says how many items the worker should hold (running
 * plus queued), how many the next claim round asks for, and how many items
 * one --sql ack transaction carries.
 *
 * Terms:
 *  - item time: an executor's time per item, smoothed (an EWMA of its
 *    logarithm over the reports); for a batch, the batch's time divided by
 *    its items;
 *  - horizon: WK_CLAIM_HORIZON_MS; a worker holds what its executors can
 *    start within it: one item per executor now, plus the items that the
 *    executors finish (and so start) within the horizon;
 *  - ceiling: --batch; no claim round and no ack batch is larger.
 *
 * Before any report the sizing is conservative: one item per executor,
 * one item per ack batch. Pure: no clock (the caller measures), no
 * database; tested by unit_worker_claim_size.
 *
 * Thread safety: none inside; the worker keeps its one wk_claim_size under
 * wk.mu (runtime.h).
 */
#ifndef ONCEQ_WORKER_CLAIM_SIZE_H
#define ONCEQ_WORKER_CLAIM_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Work a worker holds ahead, in ms of its executors' time. Short, so that
 * a fleet shares a small backlog of slow items (a worker holds no item
 * that another one could start sooner), long enough that one claim round
 * trip (about 1 ms) and one ack commit amortise over many fast items. */
#define WK_CLAIM_HORIZON_MS 100
/* Items held at most, whatever the rate (memory, and the time a drain or
 * a lost session takes to give them back). */
#define WK_CLAIM_HOLD_MAX 2000
/* The weight of a new report in the smoothed (log) item time: about the
 * last four reports count, so a change of handler speed shows within a few
 * items (or batches). */
#define WK_CLAIM_EWMA_WEIGHT 0.25
/* Keyed items in flight are split into turns of at least this many
 * (wk_claim_size_keyed_share): each turn is a chain of its own, with a
 * commit and statements per link, so a small one costs more than its
 * parallelism gains. keys_bench's --partitioned leg (4 workers of 4
 * executors, 250 keys each, on 2 cores) fell from 0.60x to 0.49x of its
 * unkeyed drain with turns of 63 items, and to 0.52x when 262 keys in
 * flight were cut into turns of 256 and 6. */
#define WK_CLAIM_KEYED_TURN_MIN 200

typedef struct wk_claim_size {
  int executors;    /* --concurrency */
  int ceiling;      /* --batch: most items per claim round and ack batch */
  double item_us;   /* smoothed executor time per item (us); 0: none yet */
  uint64_t reports; /* reports taken (diagnostics) */
} wk_claim_size;

/* Set up cs for `executors` executors and a ceiling of `ceiling` items
 * (both at least 1; smaller values count as 1). */
void wk_claim_size_init(wk_claim_size *cs, int executors, int ceiling);

/* An executor ran `items` items (one handler call, or one --sql batch) in
 * `elapsed_us` microseconds of its own time. items 0 is ignored; a time of
 * 0 counts as 1 us (a clock's resolution). */
void wk_claim_size_observe(wk_claim_size *cs, size_t items,
                           uint64_t elapsed_us);

/* Items to hold (running, queued and being acknowledged): one per
 * executor, plus what the executors finish within the horizon at the
 * measured item time; at most WK_CLAIM_HOLD_MAX, at least `executors`. */
int wk_claim_size_hold(const wk_claim_size *cs);

/* Items the next claim round asks for while `held` are held: what the hold
 * lacks, at most the ceiling. 0 (do not claim yet) while it lacks less
 * than a quarter of the hold and something is held: claims of one or two
 * items cost a round trip and a commit each. */
int wk_claim_size_want(const wk_claim_size *cs, int held);

/* Items one pipelined --sql ack transaction carries at most: what one
 * executor runs within the horizon, at least 1, at most the ceiling. */
int wk_claim_size_batch(const wk_claim_size *cs);

/* Items an executor takes for its next turn from `queued` queued items, for
 * a handler that runs at most `max` per turn (1, or --batch for --sql):
 * what it runs within the horizon (wk_claim_size_batch), at most `max` and
 * `queued`, at least 1 when anything is queued. Not a share of the queue
 * among idle executors: the horizon already spreads a claim larger than
 * one executor's turn, and a smaller one is finished within the horizon by
 * one executor in one ack transaction (one commit instead of several).
 * Keyed items are the exception: wk_claim_size_keyed_share. */
size_t wk_claim_size_take(const wk_claim_size *cs, size_t queued, size_t max);

/* The most a turn that starts with a keyed item takes: `max`, at most an
 * even share of the `inflight` items among as many turns as there are
 * executors, but turns of WK_CLAIM_KEYED_TURN_MIN items at least (one turn
 * below twice that), at least 1. Keyed items are a chain (each ack brings
 * its keys' next items,
 * a key of 20 items is 20 turns in a row), so a drain lasts as long as its
 * largest turns: keys_bench's keyed drain gave one executor 723 of its
 * 1,000 keys, whose turns took about 26 ms each while others idled. */
size_t wk_claim_size_keyed_share(const wk_claim_size *cs, size_t inflight,
                                 size_t max);

#endif
