/*
 * db_state.h: the connection (struct oq_db) and its declared states, shared
 * by the four connection files and nothing else (the only header besides
 * them that names libpq):
 *
 *   db_conn.c      the connection: open, close, reconnect, errors, the
 *                  round trip (send, await within the deadline),
 *                  LISTEN/NOTIFY
 *   db_pipeline.c  pipelines: many statements under one Sync
 *   db_prepared.c  the prepared-statement cache
 *   db_tx.c        statements and transactions: oq_db_exec/query, the
 *                  transaction runner, the restart retries
 *
 * Each file uses only those listed above it (no circle).
 *
 * The connection's state is four small enums instead of flags, each value
 * commented with the file that moves a connection into it (after pg_cron's
 * task states). Everything else in struct oq_db is configuration, counters
 * or the error details.
 */
#ifndef ONCEQ_DB_STATE_H
#define ONCEQ_DB_STATE_H

#include <libpq-fe.h>

#include "internal.h"

/* The link to the server. conn is NULL exactly when it is CLOSED or
 * CLOSED_BY_COPY. */
typedef enum oq__db_link {
  OQ__DB_CLOSED,         /* not connected yet, a failed connect, or dropped
                            (oq__db_drop: the deadline passed, the connection
                            broke, a pipeline was half sent; db_conn.c,
                            db_pipeline.c) */
  OQ__DB_CLOSED_BY_COPY, /* dropped because a statement began a COPY, which
                            nothing would feed or read (db_conn.c,
                            oq__db_await); the next failure report says so
                            and moves to CLOSED (oq__db_fail_result) */
  OQ__DB_OPEN,           /* connected (db_conn.c, connect_now); libpq may
                            still find it broken (CONNECTION_BAD) */
  OQ__DB_READ_ONLY       /* connected, but the server answered a write with
                            25006 (oq__db_fail_result): it takes none (a
                            demoted old primary, a standby). conn still
                            works for the calls under way (a pipeline's
                            ROLLBACK); oq_db_connected says no, so callers
                            connect again, to the read-write host of a
                            multi-host list */
} oq__db_link;

/* The transaction runner's BEGIN. Whether a transaction is open is libpq's
 * to say (PQtransactionStatus); this is only what we still owe it. */
typedef enum oq__db_tx {
  OQ__DB_TX_NONE,      /* no BEGIN owed: outside oq_db_transact, or its
                          BEGIN was sent (db_tx.c send_and_await, commit,
                          rollback; db_conn.c oq__db_flush_begin) */
  OQ__DB_TX_BEGIN_OWED /* oq_db_transact began (db_tx.c): the BEGIN goes with
                          the transaction's first statement, in the same
                          round trip (db_tx.c send_and_await), or alone
                          before the calls that cannot carry it (simple
                          protocol, pipelines: oq__db_flush_begin); a
                          transaction that sent nothing commits nothing */
} oq__db_tx;

/* When oq_db_transact sends its BEGIN. Once AT_ONCE, for good. */
typedef enum oq__db_begin {
  OQ__DB_BEGIN_WITH_FIRST, /* with the first statement (the default) */
  OQ__DB_BEGIN_AT_ONCE     /* oq_db_pgconn handed the raw connection out
                              (db_conn.c): raw libpq may come first, so every
                              BEGIN goes at once */
} oq__db_begin;

/* What stands between us and the server: decided at each connect
 * (db_conn.c, detect_pooler), except POOLER_UNNAMED, which lasts. */
typedef enum oq__db_route {
  OQ__DB_DIRECT,        /* the server itself */
  OQ__DB_POOLER,        /* a pooler: the backend pid announced is not the
                           server backend's (detect_pooler). Pooled traits;
                           named statements under this connection's nonce;
                           a full cache takes new names (db_prepared.c) */
  OQ__DB_POOLER_UNNAMED /* a transaction pooler: a statement we prepared
                           vanished before its Bind (db_prepared.c,
                           oq__db_vanished). Statements run unnamed, on
                           every reconnect too */
} oq__db_route;

/* db_prepared.c's cache: SQL prepared on this connection as
 * "oq_p<nonce>_<gen>_<slot>"; reset on connect. */
typedef struct oq__db_prepared_cache {
  char *sql[OQ__DB_PREPARED_MAX]; /* the text in each slot, NULL: free */
  int cols[OQ__DB_PREPARED_MAX];  /* columns each returns, -1 until
                                     described */
  unsigned next;                  /* the slot evicted when full */
  unsigned gen;   /* in the names: a forgotten set never collides */
  int last;       /* the slot named last: never the next evicted */
  int before;     /* the slot named before it, distinct: not evicted
                     either (a batched --sql round names three: its
                     handler statement, the claim check, the next-item
                     statement, one after the other) */
  unsigned nonce; /* random per connection, in the names: no other client's
                     statement can share one, even where a pooler passes
                     names between server connections */
} oq__db_prepared_cache;

struct oq_db {
  PGconn *conn;              /* NULL unless link is OQ__DB_OPEN */
  bool (*give_up)(void *ud); /* oq_db_set_give_up; NULL: never */
  void *give_up_ud;
  oq__db_link link;
  oq__db_tx tx;
  oq__db_begin begin;
  oq__db_route route;
  oq__db_prepared_cache prep;
  oq_engine engine;
  oq_db_opts opts; /* copies of the strings below */
  char *conninfo;  /* as given; may hold a password; never printed */
  char *app_name;
  char *secrets[2];       /* password and sslpassword from the conninfo, for
                             scrubbing; NULL when absent */
  char masked[1024];      /* conninfo with its passwords as *** */
  oq_retry_policy retry;  /* restarts and reconnects */
  uint64_t rng;           /* xorshift state for jitter */
  unsigned host_first;    /* multi-host conninfo: the host that answered
                             last (oq_db_opts.host_hint when not shared) */
  uint64_t restarts;      /* 40001/40P01 re-runs taken */
  uint64_t statements;    /* statements sent on this handle, for the tests
                             that count round trips (test_hooks.h) */
  bool async_commits;     /* oq_db_set_async_commits: single statements
                             outside a transaction carry synchronous_commit =
                             off */
  bool claim_next;        /* oq__db_claim_next: the next single statement is
                             a claim or a batch ack, planned with
                             OQ__PLAN_SETTINGS (PostgreSQL) */
  bool plan_in_tx;        /* oq__db_plan_next: and inside a transaction too */
  const char *claim_lock; /* oq__db_claim_next_locked: the lock statement
                             sent ahead of that claim, instead of the
                             settings alone; NULL: none */
  const char *const *claim_lock_args; /* its $2.. (the caller's) */
  int claim_lock_nargs;
  void *slots[OQ__DB_SLOT__COUNT]; /* other modules' per-connection
                                      memory (oq__db_slot): freed here */
  oq_err last;                     /* last error code */
  char sqlstate[6];                /* last SQLSTATE or "" */
  char errmsg[OQ_ERRBUF_SIZE];
};

/* ---- db_conn.c: the round trip the other connection files build on ---- */

/* Close the server connection (PQfinish) and move to OQ__DB_CLOSED. */
void oq__db_drop(oq_db *db);
/* Turn a failed result into an oq_err on db. A NULL result or a bad
 * connection is a lost connection whatever the SQLSTATE says. Does not
 * clear res. */
oq_err oq__db_fail_result(oq_db *db, PGresult *res, const char *what);
/* Collect the answer to what was just sent within the deadline: NULL with
 * *timed_out when it passed (the connection is dropped). */
PGresult *oq__db_await(oq_db *db, bool *timed_out);
/* Wait (within until_ms, 0: no limit) until a result can be read without
 * blocking. false: the deadline passed or the connection failed. */
bool oq__db_wait_readable(oq_db *db, uint64_t until_ms, bool *timed_out);
/* The connection was closed at its deadline: record that on db. */
oq_err oq__db_deadline_passed(oq_db *db, const char *what);
/* sql through the simple protocol, answered within the deadline. */
PGresult *oq__db_exec_simple(oq_db *db, const char *sql, bool *timed_out);
/* Rows a command affected (PQcmdTuples), or -1 when unknown. */
long oq__db_affected_rows(PGresult *res);
/* Drop a connection left unusable, keeping libpq's reason (OQ_ERR_CONN). */
void oq__db_give_up(oq_db *db);
/* Send an owed BEGIN on its own, for the calls that cannot carry it (the
 * simple protocol, the pipelines). OQ_OK when none is owed. */
oq_err oq__db_flush_begin(oq_db *db);

/* ---- db_pipeline.c ----------------------------------------------------- */

/* Wait for a short pipeline's Sync and leave pipeline mode; false: failed
 * (the caller gives the connection up). */
bool oq__db_pipeline_end(oq_db *db, bool *timed_out);
/* The same, handing over (*err, for PQclear) the first error that came
 * before the Sync: the implicit transaction's COMMIT failed. */
bool oq__db_pipeline_end_err(oq_db *db, bool *timed_out, PGresult **err);

/* ---- db_prepared.c ----------------------------------------------------- */

/* Whether sql has a name in the cache already: prepared by an earlier
 * call on this connection (false behind a transaction pooler, where
 * nothing is named). */
bool oq__db_prepared_cached(const oq_db *db, const char *sql);
/* oq__db_prepare_once with the failure's wording `what`. */
oq_err oq__db_prepare_as(oq_db *db, const char *sql, int nparams,
                         const unsigned int *types, char *name, size_t namelen,
                         int *ncols, const char *what);
/* Our prepared statements went away or no longer fit: forget them and
 * make the failure on db a restart (OQ_ERR_RETRY). */
oq_err oq__db_lost_prepared(oq_db *db);

#endif
