/*
 * sem_util.h: helpers shared by the semantics integration tests
 * (concurrent_ack, reap_releases, enqueue_tx, unique_key, poison, history).
 *
 * Header-only and static inline, so each test stays one executable built
 * from one file. Owns: parameterised one-value queries (QLONG, QTEXT,
 * QEXEC), and shortcuts to open a session and to claim from one queue that
 * fail the test on any error. Every failure prints the caller's location.
 */
#ifndef OQ_SEM_UTIL_H
#define OQ_SEM_UTIL_H

#include <stdbool.h>

#include "oq_test.h"

/* The first row's first column of one query (the rest is ignored). */
typedef struct semq_first {
  int rows;       /* rows seen */
  int isnull;     /* the first value was SQL NULL */
  char text[512]; /* the first value as text ("" when NULL or no row) */
} semq_first;

static inline oq_err semq_row(void *ud, int ncols, const char *const *vals)
{
  semq_first *f = ud;
  if (f->rows++ == 0 && ncols > 0) {
    if (vals[0])
      snprintf(f->text, sizeof f->text, "%s", vals[0]);
    else
      f->isnull = 1;
  }
  return OQ_OK;
}

static inline semq_first semq_at(const char *file, int line, oq_db *db,
                                 const char *sql, int n, const char *const *p)
{
  semq_first f = {0, 0, ""};
  oq_err e = oq_db_query(db, sql, n, p, semq_row, &f);
  if (e != OQ_OK) {
    fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", file, line, sql,
            oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return f;
}

static inline long semq_long_at(const char *file, int line, oq_db *db,
                                const char *sql, int n, const char *const *p)
{
  semq_first f = semq_at(file, line, db, sql, n, p);
  return (f.rows > 0 && !f.isnull) ? strtol(f.text, NULL, 10) : 0;
}

/* true when a row came back with a non-NULL first value; copied to buf. */
static inline bool semq_text_at(const char *file, int line, oq_db *db,
                                char *buf, size_t len, const char *sql, int n,
                                const char *const *p)
{
  semq_first f = semq_at(file, line, db, sql, n, p);
  oqt_copy(buf, len, f.text);
  return f.rows > 0 && !f.isnull;
}

static inline long semq_exec_at(const char *file, int line, oq_db *db,
                                const char *sql, int n, const char *const *p)
{
  long affected = -1;
  oq_err e = oq_db_exec(db, sql, n, p, &affected);
  if (e != OQ_OK) {
    fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", file, line, sql,
            oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return affected;
}

#define SEMQ_NARGS(...)                                                        \
  ((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)))
#define SEMQ_ARGS(...) ((const char *const[]){__VA_ARGS__})

/* QLONG(db, sql, $1, ...): first column of the first row as a long (0 when
 * no row or NULL). At least one parameter; use oqt_scalar for none. */
#define QLONG(db, sql, ...)                                                    \
  semq_long_at(__FILE__, __LINE__, (db), (sql), SEMQ_NARGS(__VA_ARGS__),       \
               SEMQ_ARGS(__VA_ARGS__))
/* QTEXT(db, buf, sql, $1, ...): first value into buf; true if non-NULL. */
#define QTEXT(db, buf, sql, ...)                                               \
  semq_text_at(__FILE__, __LINE__, (db), (buf), sizeof(buf), (sql),            \
               SEMQ_NARGS(__VA_ARGS__), SEMQ_ARGS(__VA_ARGS__))
/* QEXEC(db, sql, $1, ...): run a statement; returns the affected rows. */
#define QEXEC(db, sql, ...)                                                    \
  semq_exec_at(__FILE__, __LINE__, (db), (sql), SEMQ_NARGS(__VA_ARGS__),       \
               SEMQ_ARGS(__VA_ARGS__))

/* Open a session with the given heartbeat interval and expiry, or fail. */
static inline oq_session *sem_session_at(const char *file, int line, oq_db *db,
                                         int interval_ms, int expiry_ms)
{
  oq_session_opts o = {.heartbeat_interval_ms = interval_ms,
                       .expiry_ms = expiry_ms,
                       .queues = "semantics"};
  oq_session *s = NULL;
  oq_err e = oq_session_open(db, &o, &s);
  if (e != OQ_OK || !s) {
    fprintf(stderr, "FAIL %s:%d: oq_session_open: %s (%s)\n", file, line,
            oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return s;
}
#define SEM_SESSION(db, interval_ms, expiry_ms)                                \
  sem_session_at(__FILE__, __LINE__, (db), (interval_ms), (expiry_ms))

/* A session that nobody will reap while the test runs (no heartbeat). */
#define SEM_LONG_SESSION(db) SEM_SESSION((db), 1000, 600000)

/* Claim up to max items of one queue, or fail; returns how many. */
static inline size_t sem_claim_at(const char *file, int line, oq_db *db,
                                  const oq_session *s, const char *queue,
                                  int max, oq_item **items)
{
  const char *q[1] = {queue};
  size_t n = 0;
  *items = NULL;
  oq_err e = oq_claim(db, s, q, 1, max, items, &n);
  if (e != OQ_OK) {
    fprintf(stderr, "FAIL %s:%d: oq_claim(%s, %d): %s (%s)\n", file, line,
            queue, max, oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return n;
}
#define SEM_CLAIM(db, s, queue, max, items)                                    \
  sem_claim_at(__FILE__, __LINE__, (db), (s), (queue), (max), (items))

/* The ledger the tests' ack callbacks write to. No unique constraint on
 * purpose: a duplicate ack would show up as a second row. */
#define SEM_LEDGER_DDL                                                         \
  "CREATE TABLE ledger (item_id UUID NOT NULL, session_id UUID NOT NULL, "     \
  "who TEXT NOT NULL)"
#define SEM_LEDGER_INSERT                                                      \
  "INSERT INTO ledger (item_id, session_id, who) VALUES ($1, $2, $3)"

#endif
