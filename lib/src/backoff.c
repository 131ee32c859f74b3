/*
 * backoff.c: the one retry policy. Capped exponential backoff with jitter
 * scaled *down* from the exponential value, so concurrent retriers that
 * collided spread out instead of colliding again, while the cap still bounds
 * the wait (AWS "Exponential Backoff And Jitter", the full-jitter family).
 */
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

oq_retry_policy oq_retry_policy_tx(void)
{
  oq_retry_policy p = {.base_ms = 5,
                       .cap_ms = 1000,
                       .max_attempts = 0,
                       .max_total_ms = 30000,
                       .jitter = 0.5};
  return p;
}

oq_retry_policy oq_retry_policy_item(void)
{
  oq_retry_policy p = {.base_ms = 1000,
                       .cap_ms = 3600 * 1000,
                       .max_attempts = 0,
                       .max_total_ms = 0,
                       .jitter = 0.1};
  return p;
}

uint64_t oq__xorshift64(uint64_t *state)
{
  uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ULL;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

uint64_t oq_backoff_seed(void)
{
  return oq__seed();
}

uint64_t oq__seed(void)
{
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r && r)
    return r;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
               ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)&ts;
  return s ? s : 1;
}

uint64_t oq_monotonic_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct timespec oq_monotonic_deadline(int ms)
{
  struct timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  at.tv_sec += ms / 1000;
  at.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (at.tv_nsec >= 1000000000L) {
    at.tv_sec++;
    at.tv_nsec -= 1000000000L;
  }
  return at;
}

int oq_backoff_delay_ms(const oq_retry_policy *p, int attempt, uint64_t *rng)
{
  if (attempt < 1)
    attempt = 1;
  double d = p->base_ms > 0 ? p->base_ms : 1;
  for (int i = 1; i < attempt && d < p->cap_ms; i++)
    d *= 2;
  if (p->cap_ms > 0 && d > p->cap_ms)
    d = p->cap_ms;
  if (p->jitter > 0) {
    uint64_t r = p->rand64 ? p->rand64(p->ctx) : oq__xorshift64(rng);
    double u = (double)(r >> 11) / (double)(1ULL << 53); /* [0,1) */
    double j = p->jitter > 1 ? 1 : p->jitter;
    d *= 1.0 - j * u;
  }
  return (int)d;
}

void oq__policy_sleep(const oq_retry_policy *p, int ms)
{
  if (ms <= 0)
    return;
  if (p && p->sleep_ms) {
    p->sleep_ms(p->ctx, ms);
    return;
  }
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}
