/*
 * err.h: the error codes every fallible onceq call returns, and what to do
 * about each.
 *
 * Codes name the *kind* of failure so callers can branch on them; the
 * human-readable detail (message, SQLSTATE) lives on the handle the call
 * was made with (oq_db_errmsg / oq_db_sqlstate). Passwords never appear in
 * messages.
 *
 * Each code below carries its row of the error table: the text
 * oq_strerror() returns for it, what it means, and what to do. The table
 * in docs/c-api.md repeats these rows word for word, and oq_strerror's
 * texts (lib/src/err.c) are the ones written here; the readme_coverage
 * test checks both.
 *
 * Thread safety: oq_strerror is pure and may be called from any thread.
 */
#ifndef ONCEQ_ERR_H
#define ONCEQ_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define OQ_MUST_CHECK __attribute__((warn_unused_result))
#else
#define OQ_MUST_CHECK
#endif

typedef enum oq_err {
  /* oq_strerror: "ok"
   * means: success */
  OQ_OK = 0,
  /* oq_strerror: "out of memory"
   * means: an allocation failed
   * do: treat as fatal */
  OQ_ERR_NOMEM,
  /* oq_strerror: "invalid argument or input"
   * means: bad argument or bad input data (e.g. payload that is not JSON)
   * do: fix the caller; retrying the same input fails again */
  OQ_ERR_INVALID,
  /* oq_strerror: "bad configuration"
   * means: bad settings or conninfo
   * do: fix the configuration; the message says what */
  OQ_ERR_CONFIG,
  /* oq_strerror: "connection failed or lost"
   * means: could not connect, or the connection was lost (or closed at the
   *     deadline: no answer within `oq_db_opts.deadline_ms`)
   * do: `oq_db_reconnect` with backoff, then go on; an interrupted ack is
   *     reconciled by calling `oq_ack` again */
  OQ_ERR_CONN,
  /* oq_strerror: "authentication failed"
   * means: the server rejected the credentials (SQLSTATE class 28)
   * do: fix the user or password; do not retry in a loop */
  OQ_ERR_AUTH,
  /* oq_strerror: "schema missing or out of date"
   * means: onceq tables missing, too old, or newer than this library
   * do: run `onceq migrate` (or upgrade onceq when the schema is newer; the
   *     message says which) */
  OQ_ERR_SCHEMA,
  /* oq_strerror: "transaction restarts exhausted"
   * means: serialization failures (40001/40P01) went on past the retry policy
   * do: heavy contention: retry later; on PostgreSQL prefer READ COMMITTED */
  OQ_ERR_RETRY,
  /* oq_strerror: "commit outcome unknown"
   * means: the commit's outcome is unknown and reconciling could not reach the
   *     database
   * do: keep the item and call `oq_ack` again when the database is back: it
   *     reconciles first and never acknowledges twice */
  OQ_ERR_AMBIGUOUS,
  /* oq_strerror: "claim lost"
   * means: the item is no longer claimed by this session
   * do: your ack rolled back; drop the item (it is released to others, or
   *     already acknowledged) and stop any external work on it */
  OQ_ERR_CLAIM_LOST,
  /* oq_strerror: "session lost"
   * means: the session row is gone (reaped), or the session expired on its own
   *     clock; the library marks the session lost itself (a claim that finds
   *     its row gone or expired, 22012, too)
   * do: stop all work, free the session and open a new one; the reap releases
   *     what it held */
  OQ_ERR_SESSION_LOST,
  /* oq_strerror: "unique violation"
   * means: unique violation
   * do: from your own SQL: usually an expected duplicate. `oq_enqueue` reports
   *     an existing `unique_key` as `OQ_ENQUEUE_DUPLICATE` (with `OQ_OK`) and
   *     returns this only if the key kept changing hands: try again */
  OQ_ERR_CONFLICT,
  /* oq_strerror: "timed out"
   * means: the server cancelled a statement (statement_timeout, 57014) or a
   *     lock wait (lock_timeout, 55P03), or `oq_wait`'s timeout passed. The
   *     client-side deadline (`oq_db_opts.deadline_ms`) closes the connection
   *     instead: `OQ_ERR_CONN`
   * do: retry with backoff; after `oq_wait`, the unsettled items are still
   *     pending */
  OQ_ERR_TIMEOUT,
  /* oq_strerror: "SQL error"
   * means: any other server error
   * do: read `oq_db_sqlstate` / `oq_db_errmsg` */
  OQ_ERR_SQL,
  /* oq_strerror: "callback failed"
   * means: your callback reported failure (or `oq_wait`'s stop callback stopped
   *     it)
   * do: the attempt failed: `oq_fail` it */
  OQ_ERR_CALLBACK,
  /* oq_strerror: "session fenced"
   * means: the session fenced itself: its last landed heartbeat is older than
   *     expiry minus the fence margin (`oq_claim` refuses)
   * do: stop external work, claim again once a heartbeat lands
   *     (`oq_session_state_get` says `OQ_SESSION_LIVE`) */
  OQ_ERR_FENCED,
  OQ_ERR__COUNT /* number of codes; not an error */
} oq_err;

/* Static text for a code ("claim lost", ...; the oq_strerror column above).
 * Never NULL; "unknown error" for a value outside the enum. Blocks: never. */
const char *oq_strerror(oq_err err);

#ifdef __cplusplus
}
#endif
#endif
