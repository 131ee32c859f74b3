/*
 * logsink.h: the worker's log lines on stderr, one per event, as text
 * (key=value) or JSON for log shippers. Installed as libonceq's sink.
 *
 * Thread safety: lines are written whole under a mutex.
 */
#ifndef ONCEQ_WORKER_LOGSINK_H
#define ONCEQ_WORKER_LOGSINK_H

#include <stdbool.h>

#include "onceq/log.h"

/* Install the sink (before any thread starts). */
void wk_logsink_install(oq_log_level level, bool json);

#endif
