/*
 * internal.h: declarations shared between libonceq's modules (oq__ names).
 * Nothing here is public API; tests that include it are unit tests of
 * internals.
 */
#ifndef ONCEQ_INTERNAL_H
#define ONCEQ_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onceq/onceq.h"

#define OQ__UNUSED(x) (void)(x)

/* ---- sqlstate.c: the one SQLSTATE classification table ---------------- */

/* The oq_err kind for a SQLSTATE (OQ_ERR_SQL when not special). */
oq_err oq__sqlstate_classify(const char *sqlstate);
/* 40001 / 40P01: the transaction may simply be run again. */
bool oq__sqlstate_is_restart(const char *sqlstate);
/* 26000 / 0A000 / 42P05: a statement we prepared is gone from the server
 * (DISCARD ALL, a pooler), can no longer run ("cached plan must not change
 * result type"), or its name is taken: forget them and prepare again
 * (prepare_once acts on 42P05 only: its 0A000 means "not supported"). */
bool oq__sqlstate_prepared_gone(const char *sqlstate);
/* The codes modules outside the table compare with or report, by name (the
 * text lives in sqlstate.c only; the style lint checks it). */
typedef enum oq__sqlstate_name {
  OQ__SQLSTATE_FEATURE_NOT_SUPPORTED,  /* 0A000 */
  OQ__SQLSTATE_INVALID_STATEMENT_NAME, /* 26000: no such prepared stmt */
  OQ__SQLSTATE_DUPLICATE_PREPARED,     /* 42P05: the name is taken */
  OQ__SQLSTATE_FOREIGN_KEY_VIOLATION,  /* 23503 */
  OQ__SQLSTATE_DIVISION_BY_ZERO,       /* 22012 */
  OQ__SQLSTATE__COUNT
} oq__sqlstate_name;
/* The five characters of name ("" for a value out of range). */
const char *oq__sqlstate_code(oq__sqlstate_name name);
/* Whether sqlstate (may be NULL) is name. */
bool oq__sqlstate_is(const char *sqlstate, oq__sqlstate_name name);

/* ---- db.c: error setter and internals other modules use --------------- */

/* The one error setter: records code, SQLSTATE (may be NULL) and a
 * printf-style message on db, scrubbing the password. Returns code. */
oq_err oq__db_fail(oq_db *db, oq_err code, const char *sqlstate,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Clear the error state (called at the start of every operation). */
void oq__db_clear(oq_db *db);
/* Run a statement through the simple query protocol (BEGIN/ROLLBACK and
 * migration scripts). */
oq_err oq__db_simple(oq_db *db, const char *sql);
/*
 * Run one statement as its own implicit transaction, re-running it on
 * 40001/40P01 per the db's retry policy (claim, heartbeat, reap, batch ack
 * are single statements; on CockroachDB the server retries them too).
 */
oq_err oq__db_query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected);
/* Reconnect with backoff until the policy's total time runs out. */
oq_err oq__db_reconnect_patiently(oq_db *db);
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
/* Sleep per the policy's injectable sleep. */
void oq__policy_sleep(const oq_retry_policy *p, int ms);
/* Connection options a thread can copy to open its own connection. */
const oq_db_opts *oq__db_opts(const oq_db *db);
/* One statement of a pipeline (oq__db_pipeline). */
typedef struct oq__pstmt {
  const char *sql;
  const char *prepared; /* when set: run this prepared statement instead */
  int nparams;
  const unsigned int *types; /* may be NULL: infer */
  const char *const *params;
  oq_row_fn rows; /* may be NULL: rows discarded */
  void *ud;
  char **first_row; /* may be NULL; else out: the first row as JSON
                       (oq__pgresult_row_json, free()), NULL: no row */
  /* may be NULL; else called when every earlier statement's results are
   * in, before this one is sent (its params may depend on them). The
   * transaction stays open meanwhile: one more round trip, not a commit.
   * A non-OK return fails the pipeline at this statement. */
  oq_err (*before)(void *before_ud, struct oq__pstmt *self);
  void *before_ud;
  long affected; /* out: rows affected/returned, -1 unknown */
} oq__pstmt;

/*
 * Send n statements in one pipeline (libpq pipeline mode: one Sync, so one
 * round trip for all of them) and collect their results, each within the
 * connection's deadline. *failed gets the index of the first statement that
 * failed, or -1. Statements after a failure are not run (the server skips
 * them until the Sync). Returns OQ_OK when all succeeded; the first
 * failure's error otherwise (details on db). A connection lost before every
 * result arrived gives OQ_ERR_AMBIGUOUS when no statement had failed yet
 * and the last statement had been sent (it, a COMMIT, may have run), else
 * OQ_ERR_CONN. A statement with a before hook splits the pipeline in two
 * round trips (the Sync only follows the last statement).
 */
oq_err oq__db_pipeline(oq_db *db, oq__pstmt *stmts, size_t n, long *failed);

/*
 * Prepare sql on db's connection unless it is already (by text), and put
 * its name in name. Statements repeated per item (a batch's handler
 * statement, the claim check) are then parsed and planned once per
 * connection instead of once per item. At most OQ__DB_PREPARED_MAX per
 * connection; a reconnect forgets them. *ncols (may be NULL) gets the
 * number of columns the statement returns (0: no rows, e.g. an INSERT
 * without RETURNING).
 */
#define OQ__DB_PREPARED_MAX 16
oq_err oq__db_prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols);

/*
 * oq_db_query and oq__db_query_retry through a statement prepared once per
 * connection (oq__db_prepare_once): for the few library statements that
 * run per claim or per ack, so the server parses and plans them
 * once (a 1-row claim: about 1 ms less, measured in docs/benchmarks.md).
 * A Parse error fails as "query failed", like the unprepared call.
 */
oq_err oq__db_query_prepared(oq_db *db, const char *sql, int nparams,
                             const char *const *params, oq_row_fn fn, void *ud,
                             long *affected);
oq_err oq__db_query_prepared_retry(oq_db *db, const char *sql, int nparams,
                                   const char *const *params, oq_row_fn fn,
                                   void *ud, long *affected);

/* Forget what oq__db_prepare_once prepared (the server lost it: 26000). */
void oq__db_forget_prepared(oq_db *db);

/* A statement of ours vanished before its Bind (26000): a transaction
 * pooler is in the way; db runs unnamed statements from now on, on every
 * reconnect too, and logs so once. */
void oq__db_vanished(oq_db *db);

/* Parse sql unnamed and describe it in one pipeline (one Sync, so one
 * server connection even behind a transaction pooler); nothing runs.
 * *nparams_out and *ncols_out may be NULL. `what` heads the error. */
OQ_MUST_CHECK oq_err oq__db_describe_unnamed(oq_db *db, const char *sql,
                                             int nparams,
                                             const unsigned int *types,
                                             int *nparams_out, int *ncols_out,
                                             const char *what);

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

/* ---- session.c --------------------------------------------------------- */

/* OQ_OK when s may claim now; OQ_ERR_SESSION_LOST or OQ_ERR_FENCED with
 * the reason on db otherwise. Every claim form checks this first. */
oq_err oq__session_usable(oq_db *db, const oq_session *s);
/* The state at monotonic time now_ms (oq_session_state_get uses now). */
oq_session_state oq__session_state_at(const oq_session *s, uint64_t now_ms);
/* The heartbeat (or a claim's foreign-key error) found the row gone. The
 * state is atomic, so the library marks it through a const handle. */
void oq__session_mark_lost(const oq_session *s);
/* A heartbeat sent at sent_ms landed. Ignored once the session is lost. */
void oq__session_mark_ok(oq_session *s, uint64_t sent_ms);

/* ---- dialect.c: all SQL text, per engine ------------------------------ */

typedef enum oq__stmt {
  OQ__SQL_CLAIM,
  OQ__SQL_CLAIM_PARTS,
  OQ__SQL_ACK,
  OQ__SQL_ACK_HISTORY,
  OQ__SQL_ACK_BATCH,
  OQ__SQL_ACK_BATCH_HISTORY,
  OQ__SQL_ACK_MANY_CHECK,
  OQ__SQL_ACK_MANY_CHECK_HISTORY,
  OQ__SQL_ITEM_CLAIM_OF,
  OQ__SQL_ITEMS_CLAIMED_BY_US,
  OQ__SQL_FAIL_RETRY,
  OQ__SQL_FAIL_DEAD,
  OQ__SQL_RELEASE,
  OQ__SQL_CLAIMS_OF_SESSION,
  OQ__SQL_ENQUEUE,
  OQ__SQL_ENQUEUE_FIND_KEY,
  OQ__SQL_SESSION_OPEN,
  OQ__SQL_SESSION_END,
  OQ__SQL_HEARTBEAT,
  OQ__SQL_REAP_SESSIONS,
  OQ__SQL_REAP_EXHAUSTED,
  OQ__SQL_PARTS_JOIN,
  OQ__SQL_PARTS_LEAVE,
  OQ__SQL_PARTS_SNAPSHOT,
  OQ__SQL_PARTS_TAKE,
  OQ__SQL_PARTS_GIVE_UP,
  OQ__SQL_PARTS_GIVE_UP_ALL,
  OQ__SQL_PARTS_INFLIGHT,
  OQ__SQL_PARTS_GET,
  OQ__SQL_PARTS_SET,
  OQ__SQL_PARTS_OWNERS,
  OQ__SQL_PARTS_MEMBERS,
  OQ__SQL_PARTS_SLOT_COUNTS,
  OQ__SQL_MIGRATIONS_TABLE,
  OQ__SQL_MIGRATIONS_VERSION,
  OQ__SQL_MIGRATIONS_RECORD,
  OQ__SQL_MIGRATE_LOCK,
  OQ__SQL_MIGRATE_UNLOCK,
  /* results and waiting (wait.c, ack.c; schema v3) */
  OQ__SQL_ACK_KEEP,
  OQ__SQL_ACK_BATCH_KEEP,
  OQ__SQL_ACK_MANY_CHECK_KEEP,
  OQ__SQL_WAIT_OPT_IN,
  OQ__SQL_WAIT_STATE,
  OQ__SQL_ENQUEUE_KEEP_RESULT,
  OQ__SQL__COUNT
} oq__stmt;

/* The SQL text of stmt for engine (never NULL). */
const char *oq__sql(oq_engine engine, oq__stmt stmt);
/* The engine a server is, from its crdb_version parameter (NULL on PG). */
oq_engine oq__dialect_detect(const char *crdb_version);
/* Build a text[] literal {"a","b"} for queues; malloc'd, NULL on OOM. */
char *oq__text_array(const char *const *elems, size_t n);

/* ---- ack.c: a handler that wrote its own row ------------------------- */

/* The claim check found no row while the item is still claimed by the
 * session (read after the rollback): the handler's own writes deleted or
 * unclaimed its onceq_items row. Sets db's error (OQ_ERR_CALLBACK: a failed
 * attempt, for oq_fail) with a message that says so and how to fix it. */
oq_err oq__touched_own_row(oq_db *db, const char *item);

/* ---- ack.c: acks whose commit outcome is unknown --------------------- */

/* oq_ack (or a batch) gave up on item_id with OQ_ERR_AMBIGUOUS: remember
 * it, so the next ack of that item on this db reconciles first. take()
 * returns whether item_id was remembered, and forgets it. */
void oq__ack_set_ambiguous(oq_db *db, const char *item_id);
bool oq__ack_take_ambiguous(oq_db *db, const char *item_id);

/* ---- ack.c: results (schema v3) -------------------------------------- */

/* A copy of result cut past what the ack statements keep (they bound it to
 * OQ_RESULT_MAX_CHARS and flag truncated); NULL for NULL or out of memory.
 * Free with free(). */
char *oq__result_bounded(const char *result);
/* The text[] literal of n results for the batch acks: results[i] (NULL
 * entries are SQL NULL), or all for every item when results is NULL.
 * malloc'd; NULL on out of memory. */
char *oq__results_array(const char *const *results, const char *all, size_t n);
/* The bool[] literal of n flags ("{t,f}"): flags[i], or all for every one
 * when flags is NULL; malloc'd, NULL on out of memory. */
char *oq__flags_array(const bool *flags, bool all, size_t n);

/* ---- rowjson.c -------------------------------------------------------- */

/* One row as a JSON object text ({"col": value, ...}; rowjson.c has the
 * type rules), for the result a --sql handler keeps: ncols columns with
 * their names, type oids and texts (vals[c] NULL: SQL NULL). malloc'd (free
 * with free()); NULL when out of memory. */
char *oq__row_json(int ncols, const char *const *names,
                   const unsigned int *types, const char *const *vals);

/* ---- db.c: a result row as JSON --------------------------------------- */

struct pg_result;
/* Row row of a finished result through oq__row_json. NULL when row does
 * not exist or out of memory. */
char *oq__pgresult_row_json(const struct pg_result *res, int row);

/* ---- claim.c ------------------------------------------------------- */

/* Whether a multi-queue claim on db runs one statement per queue (on
 * CockroachDB, or when forced), and which queue goes first this time (it
 * moves on by one per call; a db belongs to one thread). */
bool oq__claim_per_queue(oq_db *db);
unsigned oq__claim_turn(oq_db *db);
/* Test hook: claim queue by queue on PostgreSQL too, so a real server
 * exercises that loop. */
void oq__claim_force_per_queue(oq_db *db, bool on);

/* ---- partition.c / claim.c: partitioned claims ------------------------ */

/* A slot range [lo, hi) to claim from. */
typedef struct oq__slot_range {
  int lo, hi;
} oq__slot_range;

/* The session p's last round was for ("" before the first). */
const char *oq__parts_session(const oq_parts *p);
/* The claimable runs of parts (*nown of them) and the orphan runs
 * (*norphan, claimed only for items ready longer than *orphan_after_ms),
 * as slot ranges. *first is where to start in the claimable runs: it moves
 * on by one each call, so every run gets its turn at the front. */
const oq__slot_range *oq__parts_runs(oq_parts *p, size_t *nown, size_t *first,
                                     const oq__slot_range **orphans,
                                     size_t *norphan, int *orphan_after_ms);

/* ---- migrate.c --------------------------------------------------------- */

/* Run a CockroachDB-style script (no function bodies; ";" at the end of a
 * line ends a statement) one implicit statement at a time: restart errors
 * are retried, a refused zone setting (CONFIGURE ZONE) is logged and
 * skipped, any other failure stops the script. */
oq_err oq__migrate_run_statements(oq_db *db, const char *script);
/* Call fn on each statement of a migration script (";" at a line's end,
 * outside $$ bodies; comment-only statements skipped); cuts script in
 * place; stops at fn's first error. */
oq_err oq__migrate_each_statement(char *script,
                                  oq_err (*fn)(void *ud, const char *stmt),
                                  void *ud);

/* ---- schema_embed.c (generated) ------------------------------------- */
#include "schema_embed.h"

/* ---- conninfo.c ------------------------------------------------------ */

/* The one masking rule (conninfo.c's opening comment): which bytes of s
 * are credentials. OQ__MASK_CONNINFO: s is one conninfo (a URL or
 * key=value); OQ__MASK_TEXT: free text with URLs or "password=" inside. */
typedef enum { OQ__MASK_CONNINFO, OQ__MASK_TEXT } oq__mask_mode;
/* hide[i] is 1 for each hidden byte of s; free with free; NULL when out of
 * memory. */
unsigned char *oq__mask_marks(const char *s, oq__mask_mode mode);
/* s into out (outlen bytes, NUL-terminated, truncated to fit) with each
 * run of hidden bytes as "***"; hide NULL (out of memory) gives "***". */
void oq__mask_render(const char *s, const unsigned char *hide, char *out,
                     size_t outlen);
/* Flatten a multi-line libpq message into one line, in place. */
void oq__one_line(char *buf);

/* ---- conninfo.c: text helpers ----------------------------------------- */

/* A result column as int: NULL, garbage or out of range give 0 (the server
 * sends well-formed integers; this only keeps a bad value from being UB). */
int oq__int(const char *text);

/* ---- traits.c --------------------------------------------------------- */

/* The traits for engine under an override value (NULL: none), on a
 * connection through a pooler or not (oq_db_pooled): the pure rule behind
 * oq_db_traits (onceq/traits.h), unit-tested on its own. */
const oq_engine_traits *oq__engine_traits_pick(oq_engine engine,
                                               const char *override,
                                               bool pooled_conn);

/* ---- backoff.c -------------------------------------------------------- */
uint64_t oq__xorshift64(uint64_t *state);
uint64_t oq__seed(void);

#endif
