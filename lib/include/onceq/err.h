/*
 * err.h: the error codes every fallible onceq call returns.
 *
 * Codes name the *kind* of failure so callers can branch on them; the
 * human-readable detail (message, SQLSTATE) lives on the handle the call
 * was made with (oq_db_errmsg / oq_db_sqlstate).
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
  OQ_OK = 0,
  OQ_ERR_NOMEM,        /* an allocation failed */
  OQ_ERR_INVALID,      /* bad argument or bad input data (e.g. payload JSON) */
  OQ_ERR_CONFIG,       /* bad settings or conninfo; fix the configuration */
  OQ_ERR_CONN,         /* could not connect, or the connection was lost */
  OQ_ERR_AUTH,         /* the server rejected the credentials (class 28) */
  OQ_ERR_SCHEMA,       /* onceq tables missing or too old: run onceq migrate */
  OQ_ERR_RETRY,        /* 40001/40P01 kept happening past the retry policy */
  OQ_ERR_AMBIGUOUS,    /* commit outcome unknown and not yet reconciled */
  OQ_ERR_CLAIM_LOST,   /* the item is no longer claimed by this session */
  OQ_ERR_SESSION_LOST, /* the session row is gone (reaped) or expired */
  OQ_ERR_CONFLICT,     /* unique violation */
  OQ_ERR_TIMEOUT,      /* statement or operation timed out */
  OQ_ERR_SQL,          /* any other server error; see the SQLSTATE */
  OQ_ERR_CALLBACK,     /* a user callback reported failure */
  OQ_ERR_FENCED,       /* the session fenced itself (heartbeat overdue on
                          its own clock); it may become live again */
  OQ_ERR__COUNT        /* number of codes; not an error */
} oq_err;

/* Static text for a code ("claim lost", ...). Never NULL. */
const char *oq_strerror(oq_err err);

#ifdef __cplusplus
}
#endif
#endif
