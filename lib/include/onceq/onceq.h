/*
 * onceq.h: the whole public API of libonceq. Link with -lonceq
 * (pkg-config onceq).
 *
 * Each handle (oq_db, oq_session, ...) is documented in its own header;
 * every header states its thread-safety rules.
 */
#ifndef ONCEQ_H
#define ONCEQ_H

#include "onceq/version.h" /* generated: ONCEQ_VERSION */

#include "onceq/err.h"
#include "onceq/backoff.h"
#include "onceq/log.h"
#include "onceq/db.h"
#include "onceq/traits.h"
#include "onceq/migrate.h"
#include "onceq/session.h"
#include "onceq/heartbeat.h"
#include "onceq/reaper.h"
#include "onceq/item.h"
#include "onceq/partition.h"
#include "onceq/ack.h"
#include "onceq/enqueue.h"
#include "onceq/duration.h"
#include "onceq/text.h"
#include "onceq/wait.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library's version string (ONCEQ_VERSION of the built library). */
const char *oq_version(void);
#ifdef __cplusplus
}
#endif
#endif
