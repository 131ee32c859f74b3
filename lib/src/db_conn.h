/*
 * db_conn.h: what libonceq's modules call on the connection (db_conn.c):
 * the one error setter, the simple protocol, notifications, the policy,
 * per-connection slots, a result row as JSON.
 * Included through internal.h; see db_state.h for the connection files.
 */
#ifndef ONCEQ_DB_CONN_H
#define ONCEQ_DB_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

/* The one error setter: records code, SQLSTATE (may be NULL) and a
 * printf-style message on db, scrubbing the password. Returns code. */
oq_err oq__db_fail(oq_db *db, oq_err code, const char *sqlstate,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Clear the error state (called at the start of every operation). */
void oq__db_clear(oq_db *db);
/* Run a statement through the simple query protocol (BEGIN/ROLLBACK and
 * migration scripts). */
oq_err oq__db_simple(oq_db *db, const char *sql);
/* Reconnect with backoff until the policy's total time runs out. */
oq_err oq__db_reconnect_patiently(oq_db *db);
/* oq_db_set_give_up's function says to stop now: retry loops end at once
 * (as when their time is up) instead of retrying a call nobody waits for. */
bool oq__db_given_up(oq_db *db);
/* Called once per notification oq__db_notifies consumes: its channel and
 * payload ("" when none), valid during the call only. */
typedef void (*oq__notify_fn)(void *ud, const char *channel,
                              const char *payload);
/* oq_db_wait_notify that hands each notification to fn (may be NULL)
 * instead of throwing its payload away. timeout_ms <= 0 never blocks: it
 * reads what the socket holds and returns. */
oq_err oq__db_notifies(oq_db *db, int timeout_ms, oq__notify_fn fn, void *ud,
                       int *notified);
/* The db's retry policy and per-connection PRNG state. */
const oq_retry_policy *oq__db_policy(const oq_db *db);
uint64_t *oq__db_rng(oq_db *db);
/* Connection options a thread can copy to open its own connection. */
const oq_db_opts *oq__db_opts(const oq_db *db);
/* Forget the statements prepared on the connection: a new connection has
 * none, and one that lost them (26000) or refuses them must not be told
 * their names again (the cache prepares under new ones). */
void oq__db_forget_prepared(oq_db *db);
/* Count a transaction restart taken outside oq_db_transact (metrics). */
void oq__db_count_restart(oq_db *db);

/* Per-connection memory other modules keep on a db (a db belongs to one
 * thread): each module owns its slot's contents, allocates it on first use
 * as one free()-able block, and db frees it when closed. */
typedef enum oq__db_slot_id {
  OQ__DB_SLOT_CLAIM, /* claim.c: which queue goes first, the test hook */
  OQ__DB_SLOT_ACK,   /* ack.c: items whose ack ended ambiguous */
  OQ__DB_SLOT__COUNT
} oq__db_slot_id;
/* The slot id of db (never NULL; *slot NULL until the module sets it). */
void **oq__db_slot(oq_db *db, oq__db_slot_id id);

struct pg_result;
/* Row row of a finished result through oq__row_json. NULL when row does
 * not exist or out of memory. */
char *oq__pgresult_row_json(const struct pg_result *res, int row);

#endif
