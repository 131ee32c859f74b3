/*
 * test_hooks.h: fault injection for tests only (oq__ names, not exported
 * by libonceq.so). Tests reach it with oq_add_test(... INTERNAL).
 */
#ifndef ONCEQ_TEST_HOOKS_H
#define ONCEQ_TEST_HOOKS_H

#include <stdbool.h>

#include "onceq/heartbeat.h"

/* While paused no heartbeat is sent (the fence check still runs): a
 * stalled worker, without stopping the process. */
void oq__heartbeat_pause(oq_heartbeat *hb, bool paused);

#endif
