/*
 * signals.h: the daemons' signal handling, one rule for both: the
 * handlers only count, the loop acts. SIGTERM and SIGINT are counted
 * into the caller's counter: the first asks for a drain or a clean stop,
 * the second for a stop now; the daemon's loop reads the count at least
 * every second. SIGPIPE is ignored (a peer that hangs up is an error
 * return, not a death).
 *
 * Thread safety: install once on the main thread before other threads
 * start; the counter is written by the handler only, but the kernel runs
 * the handler on whichever thread it picks (an executor, the heartbeat,
 * a libcurl resolver), so the counter is an atomic, not a volatile
 * sig_atomic_t: a lock-free atomic may be touched from a handler (C11
 * 7.14.1.1p5), and its loads in the loop are ordered with that write
 * (TSan flagged the volatile one as a race in it_worker_bad_flags).
 */
#ifndef ONCEQ_COMMON_SIGNALS_H
#define ONCEQ_COMMON_SIGNALS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef atomic_int cm_signal_count;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
               "a signal handler may only touch a lock-free atomic");

/* Count SIGTERM and SIGINT into *count (capped at 100), ignore SIGPIPE.
 * count must outlive the process's use of the handlers. */
void cm_signals_install(cm_signal_count *count);

/* Sleep until the monotonic deadline (oq_monotonic_ms) in slices of at
 * most 100 ms; false as soon as *count is non-zero. */
bool cm_nap_until(uint64_t deadline_ms, const cm_signal_count *count);

#endif
