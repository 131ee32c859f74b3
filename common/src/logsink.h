/*
 * logsink.h: the daemons' log lines on stderr (onceq-worker and
 * `onceq coordinator` log alike), one per event, as text (key=value) or
 * JSON for log shippers. Installed as libonceq's sink, which itself never
 * writes to stderr.
 *
 * Thread safety: lines are written whole under a mutex.
 */
#ifndef ONCEQ_COMMON_LOGSINK_H
#define ONCEQ_COMMON_LOGSINK_H

#include <stdbool.h>

#include "onceq/log.h"

/* Install the sink (before any thread starts). */
void cm_logsink_install(oq_log_level level, bool json);

#endif
