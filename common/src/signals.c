/*
 * signals.c: the daemons' signal counting (signals.h).
 */
#include <string.h>
#include <time.h>

#include "onceq/onceq.h"
#include "signals.h"

/* The handler needs a global: one counter per process. */
static cm_signal_count *counter;

static void on_signal(int sig)
{
  (void)sig;
  if (counter && atomic_load(counter) < 100)
    atomic_fetch_add(counter, 1);
}

void cm_signals_install(cm_signal_count *count)
{
  counter = count;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

bool cm_nap_until(uint64_t deadline_ms, const cm_signal_count *count)
{
  while (!*count) {
    uint64_t now = oq_monotonic_ms();
    if (now >= deadline_ms)
      return true;
    uint64_t left = deadline_ms - now;
    long slice = left < 100 ? (long)left : 100;
    struct timespec ts = {0, slice * 1000000L};
    nanosleep(&ts, NULL);
  }
  return false;
}
