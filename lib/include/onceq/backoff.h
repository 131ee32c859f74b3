/*
 * backoff.h: the one retry policy (capped exponential backoff with jitter)
 * used for transaction restarts, reconnects and item retries.
 *
 * Terms: "attempt" is 1 for the first retry's wait. The clock and the
 * randomness are injectable so tests can check the schedule exactly.
 *
 * Thread safety: a policy is read-only after set-up and may be shared;
 * the rng state passed to oq_backoff_delay_ms belongs to one thread.
 */
#ifndef ONCEQ_BACKOFF_H
#define ONCEQ_BACKOFF_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_retry_policy {
  int base_ms;      /* first wait, before jitter */
  int cap_ms;       /* no wait is longer than this */
  int max_attempts; /* give up after this many retries; 0 = unlimited */
  int max_total_ms; /* give up once this much time was spent; 0 = unlimited */
  double jitter;    /* 0..1: the wait is scaled by (1 - jitter * U[0,1)) */
  /* Injectable for tests; NULL means the real monotonic clock / PRNG. */
  uint64_t (*now_ms)(void *ctx);
  uint64_t (*rand64)(void *ctx);
  void (*sleep_ms)(void *ctx, int ms);
  void *ctx;
} oq_retry_policy;

/* Defaults for transaction restarts: 5 ms base, 1 s cap, 30 s total.
 * Blocks: never (this and every function below: pure, or reads the clock). */
oq_retry_policy oq_retry_policy_tx(void);
/* Defaults for item retries after a failed attempt: 1 s base, 1 h cap. */
oq_retry_policy oq_retry_policy_item(void);

/*
 * The wait before retry number `attempt` (1-based), in milliseconds:
 * min(cap, base * 2^(attempt-1)) scaled down by the jitter. `rng` is a
 * per-thread xorshift state (any non-zero seed) used when p->rand64 is NULL.
 */
int oq_backoff_delay_ms(const oq_retry_policy *p, int attempt, uint64_t *rng);

/* A seed for the rng state of oq_backoff_delay_ms: random per process and
 * per call (getrandom, else clock, pid and address), so a fleet's retries
 * do not fall on the same instants. Never 0. */
uint64_t oq_backoff_seed(void);

/* Monotonic milliseconds (CLOCK_MONOTONIC); what the policy uses by default. */
uint64_t oq_monotonic_ms(void);

/* The CLOCK_MONOTONIC instant ms milliseconds from now, for
 * pthread_cond_timedwait on a condition variable that uses that clock
 * (pthread_condattr_setclock): the one place that carries the
 * nanoseconds over into seconds. */
struct timespec oq_monotonic_deadline(int ms);

#ifdef __cplusplus
}
#endif
#endif
