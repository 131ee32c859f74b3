/*
 * db.h: a database connection handle (oq_db), the transaction runner and
 * the error details every other module reports through.
 *
 * Terms:
 *  - conninfo: a libpq URL (postgresql://...) or key=value string.
 *  - engine: PostgreSQL or CockroachDB, detected once per connection.
 *  - restart: SQLSTATE 40001/40P01 (CockroachDB "restart transaction"); the
 *    transaction runner rolls back and runs the whole transaction again.
 *  - ambiguous commit: COMMIT was sent but no answer came back (40003 or the
 *    connection dropped); the runner never re-runs blindly, it returns
 *    OQ_ERR_AMBIGUOUS and the caller reconciles (see ack.h).
 *
 * Passwords never appear in any message this module produces.
 *
 * Thread safety: an oq_db is NOT thread-safe. Give each thread its own.
 */
#ifndef ONCEQ_DB_H
#define ONCEQ_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "onceq/backoff.h"
#include "onceq/err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pg_conn; /* libpq's PGconn */

typedef struct oq_db oq_db;

typedef enum oq_engine {
  OQ_ENGINE_POSTGRES = 0,
  OQ_ENGINE_COCKROACH = 1
} oq_engine;

/* Size that always fits one onceq error line. */
#define OQ_ERRBUF_SIZE 512

typedef struct oq_db_opts {
  /* URL or key=value. NULL/"": ONCEQ_DATABASE_URL, then DATABASE_URL, then
   * libpq's own defaults (PGHOST, PGUSER, ...). */
  const char *conninfo;
  const char *application_name; /* NULL: "onceq" */
  int connect_timeout_s;        /* 0: 5; with a deadline, half of it,
                                   2 to 5 s. Per host of a multi-host
                                   list (libpq tries them in turn) */
  const oq_retry_policy *retry; /* restarts/reconnects; NULL: tx default */
  int deadline_ms;              /* 0: none. Longest wait for one statement's
                                   answer: past it the connection is closed
                                   (OQ_ERR_CONN; COMMIT: OQ_ERR_AMBIGUOUS).
                                   Also sets tcp_user_timeout. */
  /* May be NULL. A multi-host conninfo with target_session_attrs
   * read-write or primary: which of its hosts (0 = the first) answered
   * last, and the host the next connect tries first (then the others, in
   * their order). Point every handle a program opens with this conninfo at
   * one counter, kept for as long as they live (read and written
   * atomically): after a failover, the first connection that finds the new
   * primary spares the others the connect_timeout on the old one. Without
   * it each handle remembers its own. Ignored for one host, other
   * target_session_attrs, and a value past the list. */
  unsigned *host_hint;
} oq_db_opts;

/*
 * Connect. On success *out is a handle to free with oq_db_close. On failure
 * *out is NULL, nothing needs cleaning up, and errbuf (if not NULL) holds
 * one line naming the problem and the fix, with any password masked.
 * Blocks: connecting (name lookup, TCP, TLS, authentication, one query to
 * detect the engine); bounded by connect_timeout_s and the deadline; cancel by:
 * none needed, it returns within them.
 */
OQ_MUST_CHECK oq_err oq_db_open(const oq_db_opts *opts, oq_db **out,
                                char *errbuf, size_t errlen);
/* Close and free. NULL is allowed.
 * Blocks: never waits for the server. */
void oq_db_close(oq_db *db);

/* Drop the connection and connect again with the same options.
 * Blocks: like oq_db_open, one attempt; cancel by: none needed. */
OQ_MUST_CHECK oq_err oq_db_reconnect(oq_db *db);
/* Give up waiting for the server before the deadline: once a statement's
 * answer is 1 s late, fn(ud) is asked every 100 ms, and true ends the wait
 * as the deadline does (the connection is closed: OQ_ERR_CONN, or
 * OQ_ERR_AMBIGUOUS when a COMMIT was sent). For a caller whose answer has
 * stopped mattering, e.g. an executor whose session was lost: an ack would
 * be rejected anyway, and a silent dead server would hold the thread until
 * the deadline. fn NULL: never. fn runs on the calling thread; set it
 * between calls. Blocks: never. */
void oq_db_set_give_up(oq_db *db, bool (*fn)(void *ud), void *ud);
/* Non-zero when the connection is up.
 * Blocks: never (this and the accessors below read the handle). */
int oq_db_connected(const oq_db *db);

oq_engine oq_db_engine(const oq_db *db);
/* true when a connection pooler (pgbouncer, PgCat, ...) stands between db
 * and the server: found when the connection is made (the backend pid the
 * pooler announced is not the server's) or when a prepared statement
 * vanished before its Bind. Such a connection keeps no session state
 * outside a transaction: oq_db_traits gives it no LISTEN/NOTIFY, no
 * session settings and no session advisory lock, and once a prepared
 * statement vanishes (a transaction pooler) its statements run unnamed
 * (docs/deployment.md, "Poolers and high availability"). */
bool oq_db_pooled(const oq_db *db);
/* on: every single statement db runs outside a transaction commits without
 * waiting for the WAL flush, through a set_config('synchronous_commit',
 * 'off', true) sent with it (same round trip, same implicit transaction),
 * so nothing outlives that statement: what a session SET does on a direct
 * connection, for a pooled one (the worker's claims, docs/design.md §3).
 * PostgreSQL only; lasts across reconnects. Blocks: never. */
void oq_db_set_async_commits(oq_db *db, bool on);
/* The last error's message (one line, password masked) and SQLSTATE ("" if
 * none). Valid until the next call on this handle. */
const char *oq_db_errmsg(const oq_db *db);
const char *oq_db_sqlstate(const oq_db *db);
/* Transaction restarts (40001/40P01) taken since open: for tests/metrics. */
uint64_t oq_db_restarts(const oq_db *db);
/* The conninfo with the password replaced by "***": safe to print. */
const char *oq_db_masked_conninfo(const oq_db *db);

/* The underlying libpq connection, for callers that want raw libpq inside an
 * ack or enqueue transaction. Owned by db; do not PQfinish it. */
struct pg_conn *oq_db_pgconn(oq_db *db);

/* Run one statement with text parameters (NULL entries are SQL NULL); the
 * result is discarded. *affected (may be NULL) gets the row count. COPY ...
 * FROM STDIN / TO STDOUT is not supported here or in any call that runs SQL:
 * OQ_ERR_SQL, and the connection is closed (oq_db_reconnect).
 * Blocks: one statement, not retried; bounded by the deadline; cancel by: the
 * deadline (an oq_db belongs to one thread, so no other thread can cancel it).
 */
OQ_MUST_CHECK oq_err oq_db_exec(oq_db *db, const char *sql, int nparams,
                                const char *const *params, long *affected);

/* Like oq_db_exec with declared parameter types (PostgreSQL type OIDs, 0 =
 * infer), so a statement may use any subset of its parameters.
 * Blocks: one statement, not retried; bounded by the deadline; cancel by: the
 * deadline. */
OQ_MUST_CHECK oq_err oq_db_exec_typed(oq_db *db, const char *sql, int nparams,
                                      const unsigned int *types,
                                      const char *const *params,
                                      long *affected);

/* oq_db_exec_typed that also returns the first row as a JSON object
 * (column name -> value; numbers, booleans and json as such, the rest as
 * strings), or NULL when there is no row. Free *row_json with free().
 * Blocks: one statement, not retried; bounded by the deadline; cancel by: the
 * deadline. */
OQ_MUST_CHECK oq_err oq_db_exec_typed_json(oq_db *db, const char *sql,
                                           int nparams,
                                           const unsigned int *types,
                                           const char *const *params,
                                           char **row_json);

/* oq_db_exec_typed_json for a statement run again and again (a handler's):
 * parsed and planned once per connection, in the connection's cache of
 * prepared statements (unnamed behind a transaction pooler), like the
 * library's own per-item statements. The cache knows a statement by its
 * text: pass one text with the same types every time. A prepared statement
 * lost under it gives OQ_ERR_RETRY, and the next call runs it again: 26000
 * (a DISCARD ALL or DEALLOCATE, or a pooler) is taken for a transaction
 * pooler, and the connection's statements run unnamed from then on (with a
 * warning); 0A000 from a statement prepared by an earlier call (the server
 * dropped its cached plan, "cached plan must not change result type")
 * makes the next call prepare it anew, and 0A000 from one prepared in the
 * same call is the statement's own failure (OQ_ERR_SQL).
 * Blocks: one statement, plus its Prepare on a connection's first call
 * (and a DEALLOCATE when the cache is full), each bounded by the deadline;
 * not retried; cancel by: the deadline. */
OQ_MUST_CHECK oq_err oq_db_exec_prepared_json(oq_db *db, const char *sql,
                                              int nparams,
                                              const unsigned int *types,
                                              const char *const *params,
                                              char **row_json);

/* Type OIDs for oq_db_exec_typed. */
#define OQ_OID_INT4 23u
#define OQ_OID_TEXT 25u
#define OQ_OID_UUID 2950u
#define OQ_OID_JSONB 3802u

/*
 * Wake-ups (PostgreSQL LISTEN/NOTIFY). oq_db_listen subscribes this
 * connection to channel; OQ_ERR_CONFIG on CockroachDB, which has no LISTEN
 * (poll instead). oq_db_wait_notify waits up to timeout_ms for any
 * notification: *notified is set when one (or more) arrived; all pending
 * ones are consumed. A lost connection gives OQ_ERR_CONN (reconnect and
 * listen again).
 * Blocks: one statement; bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_db_listen(oq_db *db, const char *channel);
/* Blocks: up to timeout_ms waiting for a notification; cancel by: a short
 * timeout_ms, called in a loop. */
OQ_MUST_CHECK oq_err oq_db_wait_notify(oq_db *db, int timeout_ms,
                                       int *notified);
/* oq_db_wait_notify that also ends when wake_fd (a pipe or eventfd of the
 * caller's; < 0: none) is readable, so a thread can wait for a NOTIFY and
 * for an event of its own process at once. It reads nothing from wake_fd:
 * the caller empties it. *notified says only whether a notification came.
 * Blocks: up to timeout_ms; cancel by: writing to wake_fd. */
OQ_MUST_CHECK oq_err oq_db_wait_notify_or(oq_db *db, int timeout_ms,
                                          int wake_fd, int *notified);

/* Called once per result row with the row's text values (NULL = SQL NULL).
 * Return OQ_OK to go on; anything else stops and is returned. */
typedef oq_err (*oq_row_fn)(void *ud, int ncols, const char *const *vals);
/* Run one statement and hand each row to fn (may be NULL).
 * Blocks: one statement plus fn on each row, not retried; bounded by the
 * deadline (and fn); cancel by: return an error from fn, or the deadline. */
OQ_MUST_CHECK oq_err oq_db_query(oq_db *db, const char *sql, int nparams,
                                 const char *const *params, oq_row_fn fn,
                                 void *ud);

/* The body of a transaction: may run more than once (restarts), so it must
 * not keep effects outside the transaction between runs. */
typedef oq_err (*oq_tx_fn)(oq_db *db, void *ud);

/*
 * BEGIN; fn(db, ud); COMMIT. On 40001/40P01 anywhere (including COMMIT) it
 * rolls back, waits per the retry policy and runs fn again. A failure from
 * fn rolls back and is returned. A lost answer to COMMIT returns
 * OQ_ERR_AMBIGUOUS: the caller must reconcile, not re-run.
 * Blocks: fn and COMMIT, rerun on restarts; bounded by the deadline per
 * statement and the retry policy in all (max_total_ms; 30 s by default), fn's
 * own time included; cancel by: return an error from fn.
 */
OQ_MUST_CHECK oq_err oq_db_transact(oq_db *db, oq_tx_fn fn, void *ud);

/* Where to connect when no --db is given: ONCEQ_DATABASE_URL, then
 * DATABASE_URL, else "" (libpq defaults). Never NULL; not owned.
 * Blocks: never. */
const char *oq_conninfo_from_env(void);

/* Copy conninfo into out with any password replaced by "***".
 * Blocks: never. */
void oq_conninfo_mask(const char *conninfo, char *out, size_t outlen);

/* Mask a password in a conninfo in place, keeping its length (padded with
 * spaces, or all '*' if the masked form is longer), so a process's argv
 * (ps, /proc/PID/cmdline) does not show it.
 * Blocks: never. */
void oq_conninfo_mask_in_place(char *conninfo);

#ifdef __cplusplus
}
#endif
#endif
