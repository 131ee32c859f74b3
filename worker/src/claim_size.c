/*
 * claim_size.c: claims sized by the work (claim_size.h).
 */
#include <math.h>

#include "claim_size.h"

void wk_claim_size_init(wk_claim_size *cs, int executors, int ceiling)
{
  cs->executors = executors > 0 ? executors : 1;
  cs->ceiling = ceiling > 0 ? ceiling : 1;
  cs->item_us = 0;
  cs->reports = 0;
}

void wk_claim_size_observe(wk_claim_size *cs, size_t items, uint64_t elapsed_us)
{
  if (items == 0)
    return;
  double us = (double)(elapsed_us > 0 ? elapsed_us : 1) / (double)items;
  /* the first report replaces the conservative start outright: waiting
   * for an average to forget "unknown" would keep fast handlers on tiny
   * claims for no reason */
  if (cs->reports == 0)
    cs->item_us = us;
  else /* smoothed on a log scale: item times span 10 us to seconds, and a
        * handler 1,000 times slower or faster is followed as quickly */
    cs->item_us = exp(log(cs->item_us) +
                      WK_CLAIM_EWMA_WEIGHT * (log(us) - log(cs->item_us)));
  cs->reports++;
}

/* Items the executors finish within the horizon at the measured item
 * time: all of them together, or one alone. Only after a report
 * (item_us > 0). */
static double per_horizon(const wk_claim_size *cs, bool all)
{
  double n = WK_CLAIM_HORIZON_MS * 1000.0 / cs->item_us;
  return all ? n * cs->executors : n;
}

int wk_claim_size_hold(const wk_claim_size *cs)
{
  if (cs->item_us <= 0)
    return cs->executors; /* nothing measured: one item per executor */
  double more = ceil(per_horizon(cs, true));
  double hold = cs->executors + more;
  if (hold > WK_CLAIM_HOLD_MAX)
    hold = WK_CLAIM_HOLD_MAX;
  return hold > cs->executors ? (int)hold : cs->executors;
}

int wk_claim_size_want(const wk_claim_size *cs, int held)
{
  int hold = wk_claim_size_hold(cs);
  int lack = hold - (held > 0 ? held : 0);
  if (lack <= 0)
    return 0;
  if (held > 0 && hold >= 4 && lack < hold / 4)
    return 0;
  return lack < cs->ceiling ? lack : cs->ceiling;
}

int wk_claim_size_batch(const wk_claim_size *cs)
{
  if (cs->item_us <= 0)
    return 1; /* nothing measured: one item, so the first report comes soon */
  double b = floor(per_horizon(cs, false));
  if (b < 1)
    return 1;
  return b < cs->ceiling ? (int)b : cs->ceiling;
}

size_t wk_claim_size_keyed_share(const wk_claim_size *cs, size_t inflight,
                                 size_t max)
{
  size_t ex = cs->executors > 0 ? (size_t)cs->executors : 1;
  size_t turns = inflight / WK_CLAIM_KEYED_TURN_MIN;
  if (turns > ex)
    turns = ex;
  if (turns < 1)
    turns = 1;
  size_t share = (inflight + turns - 1) / turns;
  if (share < 1)
    share = 1;
  return share < max ? share : max;
}

size_t wk_claim_size_take(const wk_claim_size *cs, size_t queued, size_t max)
{
  size_t sized = (size_t)wk_claim_size_batch(cs);
  if (sized < max)
    max = sized;
  if (max < 1)
    max = 1;
  return max < queued ? max : queued;
}
