/*
 * backoff.c (unit): the one retry policy's schedule.
 *
 * Without jitter the waits are exactly base, 2*base, 4*base, ... capped at
 * cap_ms, for any attempt number (no overflow). With jitter j and an
 * injected rand64 the wait is d * (1 - j * U) with U in [0,1) taken from
 * the random bits; the test feeds powers of two (U = 0, 1/4, 1/2, 3/4),
 * which every top-bits mapping (r / 2^64, (r >> 11) * 2^-53,
 * (r >> 32) / 2^32) turns into the same U, so the values are exact.
 */
#include "oq_test.h"

#include <limits.h>

/* Injected randomness: returns *(uint64_t *)ctx and counts calls. */
typedef struct fake_rng {
  uint64_t value;
  int calls;
} fake_rng;

static uint64_t fake_rand64(void *ctx)
{
  fake_rng *f = ctx;
  f->calls++;
  return f->value;
}

static void test_no_jitter(void)
{
  oq_retry_policy p = oq_retry_policy_tx();
  p.base_ms = 8;
  p.cap_ms = 1024;
  p.jitter = 0.0;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int want = 8;
  for (int attempt = 1; attempt <= 20; attempt++) {
    int d = oq_backoff_delay_ms(&p, attempt, &rng);
    ASSERT_EQ(d, want);
    if (want < 1024)
      want *= 2;
  }
  /* Far past the cap: still the cap (no shift/multiply overflow). */
  const int big[] = {31, 32, 33, 63, 64, 65, 100, 1000, INT_MAX};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    ASSERT_EQ(oq_backoff_delay_ms(&p, big[i], &rng), 1024);

  /* A cap that is not a power-of-two multiple of base. */
  p.base_ms = 5;
  p.cap_ms = 1000;
  const int sched[] = {5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000};
  for (int a = 1; a <= 10; a++)
    ASSERT_EQ(oq_backoff_delay_ms(&p, a, &rng), sched[a - 1]);

  /* The item policy's hour cap with a 1 s base overflows int at ~31. */
  oq_retry_policy item = oq_retry_policy_item();
  item.jitter = 0.0;
  ASSERT_EQ(oq_backoff_delay_ms(&item, 1, &rng), item.base_ms);
  ASSERT_EQ(oq_backoff_delay_ms(&item, 2, &rng), 2 * item.base_ms);
  ASSERT_EQ(oq_backoff_delay_ms(&item, 40, &rng), item.cap_ms);
  ASSERT_EQ(oq_backoff_delay_ms(&item, INT_MAX, &rng), item.cap_ms);
}

static void test_injected_jitter(void)
{
  fake_rng f = {0, 0};
  oq_retry_policy p = oq_retry_policy_tx();
  p.base_ms = 8;
  p.cap_ms = 1024;
  p.jitter = 0.5;
  p.rand64 = fake_rand64;
  p.ctx = &f;
  uint64_t rng = 12345;

  /* U = 0, 1/4, 1/2, 3/4 -> factor 1, 7/8, 3/4, 5/8. */
  const uint64_t r[] = {0, 1ull << 62, 1ull << 63, 3ull << 62};
  const int num[] = {8, 7, 6, 5}; /* factor * 8 */
  int d = 8;
  for (int attempt = 1; attempt <= 10; attempt++) { /* 8 .. 1024, cap */
    for (int k = 0; k < 4; k++) {
      f.value = r[k];
      int calls = f.calls;
      int got = oq_backoff_delay_ms(&p, attempt, &rng);
      if (got != d / 8 * num[k])
        OQT_FAIL("attempt %d, rand64 %#llx: got %d, want %d (d=%d, "
                 "jitter 0.5)",
                 attempt, (unsigned long long)r[k], got, d / 8 * num[k], d);
      ASSERT(f.calls > calls); /* the injected source was used */
    }
    /* U just below 1: the smallest wait, still >= d * (1 - 0.5). */
    f.value = UINT64_MAX;
    int got = oq_backoff_delay_ms(&p, attempt, &rng);
    ASSERT_LE(d / 2, got);
    ASSERT_LE(got, d);
    if (d < 1024)
      d *= 2;
  }

  /* Full jitter: U = 1/2 halves the wait. */
  p.jitter = 1.0;
  f.value = 1ull << 63;
  ASSERT_EQ(oq_backoff_delay_ms(&p, 3, &rng), 16);
  f.value = 0;
  ASSERT_EQ(oq_backoff_delay_ms(&p, 3, &rng), 32);
}

static void test_builtin_rng(void)
{
  oq_retry_policy p = oq_retry_policy_tx();
  p.base_ms = 100;
  p.cap_ms = 100000;
  p.jitter = 0.5;
  p.rand64 = NULL;
  uint64_t rng = 42, rng2 = 42;
  int lo = INT_MAX, hi = 0;
  for (int i = 0; i < 1000; i++) {
    int attempt = 1 + i % 8;
    int d = 100 << (attempt - 1);
    int got = oq_backoff_delay_ms(&p, attempt, &rng);
    int again = oq_backoff_delay_ms(&p, attempt, &rng2);
    ASSERT_EQ(got, again); /* same seed, same schedule */
    ASSERT_LE(d / 2, got);
    ASSERT_LE(got, d);
    if (attempt == 1) {
      lo = got < lo ? got : lo;
      hi = got > hi ? got : hi;
    }
  }
  ASSERT_NE(rng, 42);    /* the state advanced */
  ASSERT(hi - lo >= 20); /* the jitter really spreads the waits */
}

static void test_defaults(void)
{
  oq_retry_policy tx = oq_retry_policy_tx();
  ASSERT(tx.base_ms > 0);
  ASSERT(tx.cap_ms >= tx.base_ms);
  ASSERT(tx.jitter >= 0.0 && tx.jitter <= 1.0);
  ASSERT(tx.max_attempts >= 0);
  ASSERT(tx.max_total_ms >= 0);
  /* As documented in backoff.h: 5 ms base, 1 s cap, 30 s total. */
  ASSERT_EQ(tx.base_ms, 5);
  ASSERT_EQ(tx.cap_ms, 1000);
  ASSERT_EQ(tx.max_total_ms, 30000);

  oq_retry_policy item = oq_retry_policy_item();
  ASSERT(item.base_ms > 0);
  ASSERT(item.cap_ms >= item.base_ms);
  ASSERT(item.jitter >= 0.0 && item.jitter <= 1.0);
  /* 1 s base, 1 h cap. */
  ASSERT_EQ(item.base_ms, 1000);
  ASSERT_EQ(item.cap_ms, 3600000);
}

static void test_monotonic(void)
{
  uint64_t a = oq_monotonic_ms();
  oqt_sleep_ms(30);
  uint64_t b = oq_monotonic_ms();
  ASSERT(b >= a + 25);
  ASSERT(b < a + 10000);
}

int main(void)
{
  test_defaults();
  test_no_jitter();
  test_injected_jitter();
  test_builtin_rng();
  test_monotonic();
  printf("PASS unit_lib_backoff\n");
  return 0;
}
