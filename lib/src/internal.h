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
/* The codes modules outside the table compare with or report are named in
 * onceq/sqlstate.h (oq_sqlstate; oq_sqlstate_code gives the text, which
 * lives in sqlstate.c only; the style lint checks it). Whether sqlstate
 * (may be NULL) is code: */
bool oq__sqlstate_is(const char *sqlstate, oq_sqlstate code);

/* ---- the connection files (db_state.h says which is which) ----------- */

#include "db_conn.h"
#include "db_pipeline.h"
#include "db_prepared.h"
#include "db_tx.h"

/* ---- session.c --------------------------------------------------------- */

/* OQ_OK when s may claim now; OQ_ERR_SESSION_LOST or OQ_ERR_FENCED with
 * the reason on db otherwise. Every claim form checks this first. */
oq_err oq__session_usable(oq_db *db, const oq_session *s);
/* The state at monotonic time now_ms (oq_session_state_get uses now). */
oq_session_state oq__session_state_at(const oq_session *s, uint64_t now_ms);
/* The heartbeat (or a claim's session lock) found the row gone. The
 * state is atomic, so the library marks it through a const handle. */
void oq__session_mark_lost(const oq_session *s);
/* Delete sessions with del_sql (a DELETE FROM onceq_sessions ... RETURNING
 * id::text) and release every item they held, in one transaction (reaper.c;
 * schema v8). *deleted / *released (may be NULL): rows deleted, items
 * released; *ids (may be NULL): the deleted ids, malloc'ed, free with
 * free(). */
oq_err oq__sessions_delete(oq_db *db, const char *del_sql, int nparams,
                           const char *const *params, int *deleted,
                           long *released, char (**ids)[OQ_UUID_LEN + 1]);
/* A heartbeat sent at sent_ms landed. Ignored once the session is lost. */
void oq__session_mark_ok(oq_session *s, uint64_t sent_ms);

/* ---- dialect.c: all SQL text, per engine ------------------------------ */

/* The slots one key lock stripe covers (dialect.c, OQ__SQL_KEY_LOCK). */
#define OQ_KEY_LOCK_SLOTS 64

/* How the library's prepared claims and acks are planned on PostgreSQL
 * (db_tx.c, where the reasons are), set in their transaction by a prelude
 * (db_tx.c, ack_many.c); a keyed claim's key lock sets the same values
 * itself, unless its $1 is NULL (dialect.c, OQ__SQL_KEY_LOCK). Each is
 * X(setting, value). */
#define OQ__PLAN_SETTINGS_LIST(X)                                              \
  X("jit", "off")                                                              \
  ", " X("plan_cache_mode", "force_generic_plan") ", " X(                      \
      "enable_seqscan", "off") ", " X("enable_bitmapscan", "off")
#define OQ__SET_LOCAL(setting, value)                                          \
  "set_config('" setting "', '" value "', true)"
#define OQ__PLAN_SETTINGS OQ__PLAN_SETTINGS_LIST(OQ__SET_LOCAL)

typedef enum oq__stmt {
  OQ__SQL_CLAIM,
  OQ__SQL_CLAIM_PARTS,
  /* the ack family: one claim check, history and result rows (ack.c,
   * ack_many.c; schema v3) */
  OQ__SQL_ACK,
  OQ__SQL_ACK_BATCH,
  OQ__SQL_ACK_MANY,
  /* the batched ack's next items (ack_many.c): the acknowledged items'
   * keys, read before the check; the next items, claimed after it
   * (PostgreSQL only) */
  OQ__SQL_ACK_KEYS,
  OQ__SQL_ACK_NEXT,
  OQ__SQL_ITEM_CLAIM_OF,
  OQ__SQL_ITEMS_CLAIMED_BY_US,
  OQ__SQL_FAIL_RETRY,
  OQ__SQL_FAIL_DEAD,
  OQ__SQL_RELEASE,
  OQ__SQL_CLAIMS_OF_SESSION,
  OQ__SQL_ENQUEUE,
  OQ__SQL_ENQUEUE_MANY,
  OQ__SQL_ENQUEUE_FIND_KEY,
  /* cancel.c, retention.c, retry.c */
  OQ__SQL_CANCEL_LOCK,
  OQ__SQL_CANCEL_CLASSIFY,
  OQ__SQL_CANCEL,
  OQ__SQL_RETAIN_DONE,
  OQ__SQL_RETAIN_DEAD,
  OQ__SQL_RETAIN_RESULTS,
  OQ__SQL_RETRY_IDS,
  OQ__SQL_RETRY_ALL,
  OQ__SQL_RETRY_KEPT,
  OQ__SQL_RETRY_LOCK,
  OQ__SQL_RETRY_CHECK,
  OQ__SQL_SESSION_OPEN,
  OQ__SQL_SESSION_END,
  OQ__SQL_HEARTBEAT,
  OQ__SQL_REAP_SESSIONS,
  OQ__SQL_RELEASE_SESSIONS,
  OQ__SQL_RELEASE_ORPHANS,
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
  OQ__SQL_WAIT_OPT_IN,
  OQ__SQL_WAIT_STATE,
  OQ__SQL_ENQUEUE_KEEP_RESULT,
  OQ__SQL_QUEUE_PAUSE,
  OQ__SQL_QUEUE_GET,
  OQ__SQL_QUEUE_SET_LIMIT,
  OQ__SQL_QUEUE_LIMITED,
  OQ__SQL_QUEUE_LIMIT_LOCK,
  OQ__SQL_QUEUE_RUNNING,
  OQ__SQL_QUEUE_RATE_TAKE,
  OQ__SQL_QUEUE_SET_RATE,
  OQ__SQL_CLAIM_LIMITED,
  /* a keyed queue's claim under its key locks (claim.c, keyed_stmt) */
  OQ__SQL_KEY_LOCK,
  OQ__SQL_CLAIM_KEYED,
  OQ__SQL_CLAIM_PARTS_KEYED,
  OQ__SQL__COUNT
} oq__stmt;

/*
 * "Still claimed by session $2", in the statements that name their rows by
 * id (the acks, a failure's retry or dead-letter, a release, the keys read
 * before a keyed ack: lib/src/dialect.c). Spelled with IS TRUE (the same
 * truth in a WHERE: NULL is no match) so that PostgreSQL cannot read the
 * rows through onceq_items_claim, whose partial predicate `claim IS NOT
 * NULL` it does not imply (predtest.c proves no such implication for a
 * boolean test). With `claim = $2` the planner took the claim index
 * whenever the table was last analyzed with nothing claimed (a backlog
 * enqueued, then worked), estimating one row where the session holds
 * thousands, and filtered each of them against the id array: a linear
 * `= ANY` per row in the generic plan of a prepared statement; the
 * DELETE's scan of a batch of 1,000 from a session holding 4,000 took
 * 23.6 ms instead of 4.0 by the primary key (PostgreSQL 15; 13 and 18
 * plan it alike; it_lib_ack_plan checks the plans on all three, with a
 * control that the old text still misleads). `boolean IS TRUE` is one of
 * PostgreSQL's comparison predicates (docs, "Comparison Functions and
 * Operators") and in CockroachDB's grammar (pkg/sql/parser/sql.y, `a_expr
 * IS TRUE`, read as IS NOT DISTINCT FROM true); CockroachDB's plans for it
 * are not checked here.
 */
#define OQ__STILL_CLAIMED "(claim = $2::uuid) IS TRUE"

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

/* ---- claim.c ------------------------------------------------------- */

/* Whether a multi-queue claim on db runs one statement per queue (on
 * CockroachDB, or when forced), and which queue goes first this time (it
 * moves on by one per call; a db belongs to one thread). */
bool oq__claim_per_queue(oq_db *db);
unsigned oq__claim_turn(oq_db *db);
/* Test hook: claim queue by queue on PostgreSQL too, so a real server
 * exercises that loop. */
void oq__claim_force_per_queue(oq_db *db, bool on);

/* Items from the rows of a statement that returns a claim's columns (id,
 * queue, payload, attempts, max_attempts, priority, created_us,
 * claimed_us, part, ordering_key), as oq_claim builds them: an oq_row_fn whose
 * ud is an oq__item_rows (zeroed before the first row). The items are the
 * caller's (oq_items_free(r.items, r.n)); r.nomem when a row was dropped
 * for want of memory (the statement claimed it all the same). */
typedef struct oq__item_rows {
  oq_item *items;
  size_t n, cap;
  bool nomem;
} oq__item_rows;
oq_err oq__item_rows_add(void *ud, int ncols, const char *const *v);

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
/* Sleep per the policy's injectable sleep. */
void oq__policy_sleep(const oq_retry_policy *p, int ms);
uint64_t oq__xorshift64(uint64_t *state);
uint64_t oq__seed(void);

#endif
