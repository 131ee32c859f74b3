/*
 * fence_margin.c: the fence margin follows --kill-grace (executor.h,
 * wk_fence_margin_ms; docs/design.md §4a: the margin covers the kill grace
 * of children), within [OQ_FENCE_MARGIN_MS, expiry - 3 x interval], and
 * wk_fence_grace_ms says what a child gets at a fence. No database.
 */
#include "config.h"
#include "executor.h"
#include "handler.h"
#include "oq_test.h"

static wk_config cfg_of(const char *handler, int64_t grace_ms,
                        int64_t interval_ms, int64_t expiry_ms)
{
  wk_config c;
  memset(&c, 0, sizeof c);
  c.handler = wk_handler_named(handler);
  ASSERT(c.handler != NULL);
  c.kill_grace_ms = grace_ms;
  c.heartbeat_interval_ms = interval_ms;
  c.session_expiry_ms = expiry_ms;
  return c;
}

int main(void)
{
  ASSERT_EQ(WK_FENCE_SLACK_MS, 500);
  /* the defaults (grace 5 s, beat 1 s, expiry 5 s): capped at 5 - 3 */
  wk_config c = cfg_of("exec", 5000, 1000, 5000);
  ASSERT_EQ(wk_fence_margin_ms(&c), 2000);
  ASSERT_EQ(wk_fence_grace_ms(&c), 1500);
  /* room for all of it: grace + 500 */
  c = cfg_of("exec", 5000, 1000, 8500);
  ASSERT_EQ(wk_fence_margin_ms(&c), 5500);
  ASSERT_EQ(wk_fence_grace_ms(&c), 5000);
  c = cfg_of("exec", 1500, 1000, 6000);
  ASSERT_EQ(wk_fence_margin_ms(&c), 2000);
  ASSERT_EQ(wk_fence_grace_ms(&c), 1500);
  /* a short grace keeps the default margin (never below it) */
  c = cfg_of("exec", 200, 1000, 5000);
  ASSERT_EQ(wk_fence_margin_ms(&c), OQ_FENCE_MARGIN_MS);
  ASSERT_EQ(wk_fence_grace_ms(&c), 200);
  /* the shortest expiry allowed (3 x interval + 1 s): the default margin */
  c = cfg_of("exec", 5000, 200, 1600);
  ASSERT_EQ(wk_fence_margin_ms(&c), OQ_FENCE_MARGIN_MS);
  ASSERT_EQ(wk_fence_grace_ms(&c), OQ_FENCE_MARGIN_MS - 500);
  /* a huge grace is capped, not overflowed */
  c = cfg_of("exec", (int64_t)1 << 40, 1000, 86400000);
  ASSERT_EQ(wk_fence_margin_ms(&c), 86400000 - 3000);
  /* --http and --sql start no child: the default margin */
  c = cfg_of("http", 5000, 1000, 20000);
  ASSERT_EQ(wk_fence_margin_ms(&c), OQ_FENCE_MARGIN_MS);
  c = cfg_of("sql", 5000, 1000, 20000);
  ASSERT_EQ(wk_fence_margin_ms(&c), OQ_FENCE_MARGIN_MS);
  /* every margin passes the library's check of the session settings */
  int64_t graces[] = {1, 500, 5000, 60000};
  int64_t beats[] = {200, 1000, 5000};
  for (size_t g = 0; g < 4; g++) {
    for (size_t b = 0; b < 3; b++) {
      int64_t expiry = 3 * beats[b] + 1000;
      for (int k = 0; k < 3; k++, expiry *= 2) {
        c = cfg_of("exec", graces[g], beats[b], expiry);
        oq_session_opts so = {.heartbeat_interval_ms = (int)beats[b],
                              .expiry_ms = (int)expiry,
                              .fence_margin_ms = wk_fence_margin_ms(&c)};
        char err[256];
        ASSERT_EQ(oq_session_validate(&so, err, sizeof err), OQ_OK);
      }
    }
  }
  printf("ok\n");
  return 0;
}
