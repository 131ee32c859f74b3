/*
 * test_hooks.h: fault injection for tests only (oq__ names, not exported
 * by libonceq.so). Tests reach it with oq_add_test(... INTERNAL).
 */
#ifndef ONCEQ_TEST_HOOKS_H
#define ONCEQ_TEST_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "onceq/db.h"
#include "onceq/heartbeat.h"

/* While paused no heartbeat is sent (the fence check still runs): a
 * stalled worker, without stopping the process. */
void oq__heartbeat_pause(oq_heartbeat *hb, bool paused);

/* Statements this handle has sent (each statement of a pipeline counts;
 * the Parse of a prepared statement does not): what a test of round trips
 * counts, e.g. the checks of 50 waiters (it_lib_wait_fanout). */
uint64_t oq__db_statements(const oq_db *db);

/* fn(ud) runs on db's thread each time a claim on db is about to send a
 * keyed queue's claim with its key lock (claim.c, keyed_stmt): a test
 * holds a claim there. NULL: none. */
void oq__claim_keyed_hook(oq_db *db, void (*fn)(void *ud), void *ud);

#endif
