/*
 * traits.h: what an engine can do, as data (docs/cockroachdb.md, "Engine
 * traits"). The SQL text of a statement depends on the engine
 * (oq_db_engine); the control flow around it depends on these traits, so
 * the CockroachDB control flow can run against PostgreSQL in tests.
 *
 * ONCEQ_ENGINE_TRAITS=cockroachdb (a test and diagnostic switch, not a
 * production setting) gives a PostgreSQL connection the CockroachDB traits:
 * polling instead of LISTEN/NOTIFY, no advisory lock, migrations statement
 * by statement, claims one queue per statement, and no per-connection
 * session settings (every transaction runs at the database's isolation
 * level, restarts retried by the client). Any other value, or unset: each
 * connection has its own engine's traits. CockroachDB connections always
 * have the CockroachDB traits.
 */
#ifndef ONCEQ_TRAITS_H
#define ONCEQ_TRAITS_H

#include <stdbool.h>
#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_TRAITS_ENV "ONCEQ_ENGINE_TRAITS"

typedef struct oq_engine_traits {
  const char *name; /* "postgres" | "cockroachdb" */
  /* LISTEN/NOTIFY wake workers and waiters; else they poll */
  bool listen_notify;
  /* a session advisory lock serialises concurrent migration runs; else
   * they rely on idempotent DDL (IF NOT EXISTS) */
  bool advisory_lock;
  /* a migration runs as one transaction; else statement by statement, each
   * its own implicit transaction, retried on restarts */
  bool transactional_ddl;
  /* one claim statement covers every queue (SKIP LOCKED); else one
   * statement per queue, in turn */
  bool multi_queue_claim;
  /* hot connections set their own READ COMMITTED (heartbeat, partition
   * rounds) and asynchronous claim commits; else they keep the database
   * default, and single statements rely on restart retries */
  bool session_settings;
  /* the pg_stat_* statistics views (table-wide rates in stats) */
  bool stat_views;
  /* the worker's default poll period, milliseconds */
  int poll_ms;
} oq_engine_traits;

/* The traits of an engine (the table, no override). Never NULL.
 * Blocks: never (like the two below: a table lookup and one getenv). */
const oq_engine_traits *oq_engine_traits_of(oq_engine engine);
/* The traits db runs with: its engine's, or CockroachDB's when
 * ONCEQ_ENGINE_TRAITS=cockroachdb. Never NULL. */
const oq_engine_traits *oq_db_traits(const oq_db *db);

#ifdef __cplusplus
}
#endif

#endif
