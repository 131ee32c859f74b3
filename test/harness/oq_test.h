/*
 * oq_test.h: the tiny test framework every onceq test links.
 *
 * Each test is its own executable (ctest runs it in its own process with a
 * timeout). Assertions print both sides and the location, then exit(1).
 * Integration tests get their database from the harness: test/run.sh starts
 * a real PostgreSQL and exports ONCEQ_TEST_DSN (an admin conninfo) and
 * ONCEQ_TEST_ISOLATION ("read committed" or "serializable");
 * oqt_fresh_db() creates a private, migrated database for the calling test.
 */
#ifndef OQ_TEST_H
#define OQ_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onceq/onceq.h"

#define OQT_FAIL(...)                                                          \
  do {                                                                         \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    fflush(stderr);                                                            \
    exit(1);                                                                   \
  } while (0)

#define ASSERT(cond)                                                           \
  do {                                                                         \
    if (!(cond))                                                               \
      OQT_FAIL("assertion failed: %s", #cond);                                 \
  } while (0)

#define ASSERT_EQ(a, b)                                                        \
  do {                                                                         \
    long long oqt_a_ = (long long)(a), oqt_b_ = (long long)(b);                \
    if (oqt_a_ != oqt_b_)                                                      \
      OQT_FAIL("%s == %s: %lld != %lld", #a, #b, oqt_a_, oqt_b_);              \
  } while (0)

#define ASSERT_NE(a, b)                                                        \
  do {                                                                         \
    long long oqt_a_ = (long long)(a), oqt_b_ = (long long)(b);                \
    if (oqt_a_ == oqt_b_)                                                      \
      OQT_FAIL("%s != %s: both %lld", #a, #b, oqt_a_);                         \
  } while (0)

#define ASSERT_LE(a, b)                                                        \
  do {                                                                         \
    long long oqt_a_ = (long long)(a), oqt_b_ = (long long)(b);                \
    if (!(oqt_a_ <= oqt_b_))                                                   \
      OQT_FAIL("%s <= %s: %lld > %lld", #a, #b, oqt_a_, oqt_b_);               \
  } while (0)

#define ASSERT_STREQ(a, b)                                                     \
  do {                                                                         \
    const char *oqt_a_ = (a), *oqt_b_ = (b);                                   \
    if (!oqt_a_ || !oqt_b_ || strcmp(oqt_a_, oqt_b_) != 0)                     \
      OQT_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b,                           \
               oqt_a_ ? oqt_a_ : "(null)", oqt_b_ ? oqt_b_ : "(null)");        \
  } while (0)

#define ASSERT_CONTAINS(hay, needle)                                           \
  do {                                                                         \
    const char *oqt_h_ = (hay), *oqt_n_ = (needle);                            \
    if (!oqt_h_ || !strstr(oqt_h_, oqt_n_))                                    \
      OQT_FAIL("\"%s\" should contain \"%s\"", oqt_h_ ? oqt_h_ : "(null)",     \
               oqt_n_);                                                        \
  } while (0)

#define ASSERT_NOT_CONTAINS(hay, needle)                                       \
  do {                                                                         \
    const char *oqt_h_ = (hay), *oqt_n_ = (needle);                            \
    if (oqt_h_ && strstr(oqt_h_, oqt_n_))                                      \
      OQT_FAIL("\"%s\" must not contain \"%s\"", oqt_h_, oqt_n_);              \
  } while (0)

/* An oq_err call that must succeed; prints the code and db's message. */
#define ASSERT_OK(db, call)                                                    \
  do {                                                                         \
    oq_err oqt_e_ = (call);                                                    \
    if (oqt_e_ != OQ_OK)                                                       \
      OQT_FAIL("%s: %s (%s)", #call, oq_strerror(oqt_e_),                      \
               (db) ? oq_db_errmsg(db) : "");                                  \
  } while (0)

#define ASSERT_ERR(expected, call)                                             \
  do {                                                                         \
    oq_err oqt_e_ = (call);                                                    \
    if (oqt_e_ != (expected))                                                  \
      OQT_FAIL("%s: got %s, want %s", #call, oq_strerror(oqt_e_),              \
               oq_strerror(expected));                                         \
  } while (0)

/* The admin DSN from the harness; skips (exit 77, ctest SKIP) if unset. */
const char *oqt_admin_dsn(void);
/* "read committed" or "serializable" (ONCEQ_TEST_ISOLATION). */
const char *oqt_isolation(void);

/*
 * Create an empty database for this test, named after `name` and the pid,
 * with default_transaction_isolation set to oqt_isolation(). If `migrate`,
 * apply the onceq schema. Returns its conninfo (static storage).
 */
const char *oqt_fresh_db(const char *name, int migrate);

/*
 * The conninfo a test's worker-side connections use on dsn (a database
 * from oqt_fresh_db, migrated): dsn itself, unless ONCEQ_TEST_ROLE=worker.
 * Then oqt_fresh_db has applied deploy/grants/postgres.sql to the database
 * and made the login role onceq_test_worker, a member of onceq_worker that
 * also gets every right on the tables the test creates later (a ledger, as
 * an operator grants a --sql handler's tables), and this returns dsn as
 * that role: the library's worker paths then run with exactly the grants
 * the deploy file ships (issue 20, finding 4). Static storage.
 */
const char *oqt_worker_dsn(const char *dsn);
/* The login role oqt_worker_dsn connects as, or NULL when the switch is
 * off. */
const char *oqt_worker_role(void);

/* Open a connection to dsn or fail the test. */
oq_db *oqt_connect(const char *dsn);

/* Run SQL (no parameters) and return the first column of the first row as
 * a long (0 when no row / NULL). Fails the test on error. */
long oqt_scalar(oq_db *db, const char *sql);
/* Run SQL with no result; fails the test on error. */
void oqt_exec(oq_db *db, const char *sql);

/* Enqueue n items on queue q in one committed transaction; payload
 * {"n": i}. */
void oqt_enqueue_n(oq_db *db, const char *queue, int n);

/* Copy src into dst (len bytes), truncating; always NUL-terminated. */
void oqt_copy(char *dst, size_t len, const char *src);

/* Sleep ms milliseconds. */
void oqt_sleep_ms(int ms);

/* Print a measured number in one parseable line: "METRIC name value unit". */
void oqt_metric(const char *name, double value, const char *unit);

#endif
