/*
 * traits.c: the engine trait table (traits.h). Every branch on what the
 * engine can do reads it, never oq_db_engine: the engine picks SQL text
 * (dialect.c), the traits pick the control flow. The coordinator's lease is
 * a row (onceq_leases) on both engines, so it needs no trait. A table and
 * its pure lookups: the connection's traits (oq_db_traits) are db_conn.c's,
 * which asks this file, never the other way round.
 */
#include <string.h>

#include "internal.h"
#include "onceq/traits.h"

static const oq_engine_traits table[] = {
    [OQ_ENGINE_POSTGRES] = {.name = "postgres",
                            .listen_notify = true,
                            .advisory_lock = true,
                            .transactional_ddl = true,
                            .multi_queue_claim = true,
                            .session_settings = true,
                            .stat_views = true,
                            .poll_ms = 1000},
    /* CockroachDB: no LISTEN/NOTIFY and no advisory locks; schema changes
     * in explicit transactions are limited; SKIP LOCKED needs v24.1.5+
     * (docs/cockroachdb.md). The 150 ms poll stands in for NOTIFY. */
    [OQ_ENGINE_COCKROACH] = {.name = "cockroachdb",
                             .listen_notify = false,
                             .advisory_lock = false,
                             .transactional_ddl = false,
                             .multi_queue_claim = false,
                             .session_settings = false,
                             .stat_views = false,
                             .poll_ms = 150},
};

/* PostgreSQL through a connection pooler (oq_db_pooled): nothing may live
 * in the server session outside a transaction, since a transaction pooler
 * hands the next one to any server connection. LISTEN would listen on a
 * server connection we may never see again: poll (a direct connection,
 * the daemons' --listen-db, brings wake-ups back); migrations take a
 * transaction advisory lock; no session SET. */
static const oq_engine_traits pooled = {.name = "postgres-pooled",
                                        .listen_notify = false,
                                        .advisory_lock = false,
                                        .transactional_ddl = true,
                                        .multi_queue_claim = true,
                                        .session_settings = false,
                                        .stat_views = true,
                                        .poll_ms = 200};

const oq_engine_traits *oq_engine_traits_of(oq_engine engine)
{
  return engine == OQ_ENGINE_COCKROACH ? &table[OQ_ENGINE_COCKROACH]
                                       : &table[OQ_ENGINE_POSTGRES];
}

const oq_engine_traits *
oq__engine_traits_pick(oq_engine engine, const char *override, bool pooled_conn)
{
  if (override && strcmp(override, "cockroachdb") == 0)
    return &table[OQ_ENGINE_COCKROACH];
  if (engine != OQ_ENGINE_COCKROACH && pooled_conn)
    return &pooled;
  return oq_engine_traits_of(engine);
}
