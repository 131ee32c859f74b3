/*
 * claim_size.c: claims sized by the work (worker/src/claim_size.c,
 * docs/worker.md "How much a worker claims"): the conservative start, a
 * fast --sql getting thousands, a handler of seconds one item per
 * executor plus one, --batch as the ceiling of claim rounds and ack
 * batches, no claim while little is lacking, and the smoothed item time
 * following a change of handler speed. No database, no clock.
 */
#include <stdio.h>

#include "claim_size.h"
#include "oq_test.h"

int main(void)
{
  wk_claim_size cs;

  /* nothing measured: one item per executor, ack batches of one */
  wk_claim_size_init(&cs, 4, 1000);
  ASSERT_EQ(wk_claim_size_hold(&cs), 4);
  ASSERT_EQ(wk_claim_size_want(&cs, 0), 4);
  ASSERT_EQ(wk_claim_size_batch(&cs), 1);

  /* a fast --sql: batches of 1,000 in 40 ms (40 us an item): the hold is
   * at its maximum, rounds and ack batches at the ceiling */
  wk_claim_size_observe(&cs, 1000, 40000);
  ASSERT_EQ(wk_claim_size_hold(&cs), WK_CLAIM_HOLD_MAX);
  ASSERT_EQ(wk_claim_size_want(&cs, 0), 1000);
  ASSERT_EQ(wk_claim_size_want(&cs, 500), 1000);
  ASSERT_EQ(wk_claim_size_batch(&cs), 1000);
  /* less than a quarter lacking while something is held: wait */
  ASSERT_EQ(wk_claim_size_want(&cs, WK_CLAIM_HOLD_MAX - 499), 0);
  ASSERT_EQ(wk_claim_size_want(&cs, WK_CLAIM_HOLD_MAX - 500), 500);
  ASSERT_EQ(wk_claim_size_want(&cs, WK_CLAIM_HOLD_MAX + 10), 0);

  /* the first report of a batch of one (a commit, 2 ms) sizes the next
   * batches at 50 and the hold at 4 + 4 x 50 */
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1, 2000);
  ASSERT_EQ(wk_claim_size_batch(&cs), 50);
  ASSERT_EQ(wk_claim_size_hold(&cs), 204);

  /* --batch is the ceiling: rounds and ack batches of at most 64 */
  wk_claim_size_init(&cs, 4, 64);
  wk_claim_size_observe(&cs, 64, 640);
  ASSERT_EQ(wk_claim_size_want(&cs, 0), 64);
  ASSERT_EQ(wk_claim_size_batch(&cs), 64);

  /* a 500 ms handler, 2 executors: hold 2 + ceil(2 x 100 / 500) = 3, ack
   * batches of one; a 3 s handler: one per executor plus one */
  wk_claim_size_init(&cs, 2, 1000);
  wk_claim_size_observe(&cs, 1, 500000);
  ASSERT_EQ(wk_claim_size_hold(&cs), 3);
  ASSERT_EQ(wk_claim_size_want(&cs, 0), 3);
  ASSERT_EQ(wk_claim_size_want(&cs, 2), 1);
  ASSERT_EQ(wk_claim_size_want(&cs, 3), 0);
  ASSERT_EQ(wk_claim_size_batch(&cs), 1);
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1, 3000000);
  ASSERT_EQ(wk_claim_size_hold(&cs), 5);

  /* a 1 ms --http handler, 4 executors: 4 + 400 */
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1, 1000);
  ASSERT_EQ(wk_claim_size_hold(&cs), 404);
  ASSERT_EQ(wk_claim_size_batch(&cs), 100);

  /* the handler slows down from 1 ms to 500 ms: within ten reports the
   * hold is back to one per executor plus one */
  for (int i = 0; i < 10; i++)
    wk_claim_size_observe(&cs, 1, 500000);
  ASSERT_LE(wk_claim_size_hold(&cs), 6);
  ASSERT_EQ(wk_claim_size_batch(&cs), 1);
  /* and speeds up again: within ten reports thousands again */
  for (int i = 0; i < 10; i++)
    wk_claim_size_observe(&cs, 1000, 40000);
  ASSERT_EQ(wk_claim_size_hold(&cs), WK_CLAIM_HOLD_MAX);

  /* an executor's turn (wk_claim_size_take) is what it runs within the
   * horizon, whatever the other executors do: a fast --sql executor takes
   * a whole ceiling of a 1,000-item claim even with three others idle
   * (it took a quarter, 250, when the queue was shared among the idle)
   * (one ack commit for 1,000 items; the next claim feeds the next
   * executor), so an ack transaction carries what the measurement says
   * instead of a quarter of a claim */
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1000, 40000);
  ASSERT_EQ(wk_claim_size_take(&cs, 1000, 1000), 1000);
  ASSERT_EQ(wk_claim_size_take(&cs, 300, 1000), 300);
  ASSERT_EQ(wk_claim_size_take(&cs, 2000, 1000), 1000);
  ASSERT_EQ(wk_claim_size_take(&cs, 0, 1000), 0);
  /* a 500 us --sql statement: batches of 200, so a claim of 804 still
   * spreads over the four executors (200 each: the spread comes from the
   * horizon); one item at a time for a per-item handler (max 1) */
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1, 500);
  ASSERT_EQ(wk_claim_size_take(&cs, 804, 1000), 200);
  ASSERT_EQ(wk_claim_size_take(&cs, 804, 1), 1);
  /* nothing measured yet: one item, so the first report comes soon */
  wk_claim_size_init(&cs, 4, 1000);
  ASSERT_EQ(wk_claim_size_take(&cs, 50, 1000), 1);

  /* a keyed turn: an even share of what is in flight, so a chain of keys
   * spreads over the executors (1,000 keys, 4 executors: 250 each, not
   * the 1,000 a fast --sql turn takes), in turns of
   * WK_CLAIM_KEYED_TURN_MIN at least (262 keys: one turn, not 256 and 6;
   * 500: two), never more than the turn's own most, at least 1 */
  wk_claim_size_init(&cs, 4, 1000);
  wk_claim_size_observe(&cs, 1000, 40000);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 1000, 1000), 250);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 1001, 1000), 251);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 4000, 1000), 1000);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 1000, 100), 100);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 262, 1000), 262);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 500, 1000), 250);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 3, 1000), 3);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 0, 1000), 1);
  ASSERT_EQ(wk_claim_size_keyed_share(&cs, 1000, 0), 0);

  /* degenerate input: no items is no report, a zero time counts as 1 us,
   * --concurrency/--batch below 1 count as 1 */
  wk_claim_size_init(&cs, 0, 0);
  wk_claim_size_observe(&cs, 0, 123);
  ASSERT_EQ(wk_claim_size_hold(&cs), 1);
  wk_claim_size_observe(&cs, 5, 0);
  ASSERT_EQ(wk_claim_size_want(&cs, 0), 1);
  ASSERT_EQ(wk_claim_size_batch(&cs), 1);
  ASSERT_EQ(wk_claim_size_hold(&cs), WK_CLAIM_HOLD_MAX);

  printf("unit_worker_claim_size: ok\n");
  return 0;
}
