/*
 * sem_util.h: helpers shared by the semantics integration tests
 * (concurrent_ack, reap_releases, enqueue_tx, unique_key, poison, history,
 * queue_pause, queue_limit, queue_rate, ...).
 *
 * Header-only and static inline, so each test stays one executable built
 * from one file. Owns: parameterised one-value queries (QLONG, QTEXT,
 * QEXEC), a statement's plan (SEM_PREPARE, SEM_PLAN, SEM_AS_BEFORE), and
 * shortcuts to open a session, to enqueue, to claim from one queue and
 * (INTERNAL tests) to start a claim form, that fail the test on any error.
 * Every failure prints the caller's location.
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

/* A plan's lines, as EXPLAIN returned them, printed as they come. */
typedef struct sem_plan {
  char *text; /* the lines, each ended by '\n'; malloc'd */
  size_t len;
} sem_plan;

static inline oq_err sem_plan_line(void *ud, int ncols, const char *const *vals)
{
  sem_plan *p = ud;
  if (ncols < 1 || !vals[0])
    return OQ_OK;
  printf("    %s\n", vals[0]);
  size_t n = strlen(vals[0]);
  char *grown = realloc(p->text, p->len + n + 2);
  if (!grown)
    return OQ_ERR_NOMEM;
  memcpy(grown + p->len, vals[0], n);
  p->len += n;
  grown[p->len++] = '\n';
  grown[p->len] = '\0';
  p->text = grown;
  return OQ_OK;
}

/* PREPARE `name` AS `text` (its parameters typed by its own casts, as the
 * library prepares it), or fail. The caller deallocates it. */
static inline void sem_prepare_at(const char *file, int line, oq_db *db,
                                  const char *name, const char *text)
{
  size_t len = strlen(text) + strlen(name) + 16;
  char *sql = malloc(len);
  if (!sql)
    OQT_FAIL("out of memory");
  snprintf(sql, len, "PREPARE %s AS %s", name, text);
  semq_exec_at(file, line, db, sql, 0, NULL);
  free(sql);
}
#define SEM_PREPARE(db, name, text)                                            \
  sem_prepare_at(__FILE__, __LINE__, (db), (name), (text))

/* An EXPLAIN's lines, printed under `title` as they come, as one text
 * (malloc'd, the caller frees it), or fail. */
static inline char *sem_plan_at(const char *file, int line, oq_db *db,
                                const char *explain, const char *title)
{
  printf("  %s:\n", title);
  sem_plan p = {NULL, 0};
  oq_err e = oq_db_query(db, explain, 0, NULL, sem_plan_line, &p);
  if (e != OQ_OK || !p.text) {
    fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", file, line, explain,
            oq_strerror(e), oq_db_errmsg(db));
    exit(1);
  }
  return p.text;
}
#define SEM_PLAN(db, explain, title)                                           \
  sem_plan_at(__FILE__, __LINE__, (db), (explain), (title))

/* The buffers a plan's top node read (EXPLAIN (ANALYZE, BUFFERS)'s first
 * "Buffers: shared hit=N read=M" line, hit plus read: each part is shown
 * only when not zero), or -1 when the plan has no buffer counts. Buffer
 * reads depend on the plan, not on the machine's speed. */
static inline long sem_plan_buffers(const char *plan)
{
  const char *b = strstr(plan, "Buffers: shared");
  if (!b)
    return -1;
  const char *eol = strchr(b, '\n');
  const char *h = strstr(b, "hit=");
  const char *r = strstr(b, "read=");
  long n = 0;
  if (h && (!eol || h < eol))
    n += strtol(h + strlen("hit="), NULL, 10);
  if (r && (!eol || r < eol))
    n += strtol(r + strlen("read="), NULL, 10);
  return n;
}

/* The rows a plan's scans of onceq_items produced plus those its filters
 * removed, each times its node's loops (EXPLAIN shows both per loop, and
 * from PostgreSQL 18 with decimals): what a sequential scan or a walk of
 * the wrong index costs per row, which buffer reads (one per page)
 * understate. Plans from EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF). */
static inline long sem_plan_rows_read(const char *plan)
{
  double seen = 0, loops = 1;
  for (const char *l = plan; l && *l;) {
    const char *eol = strchr(l, '\n');
    size_t n = eol ? (size_t)(eol - l) : strlen(l);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)n, l);
    const char *a = strstr(line, "actual rows=");
    const char *lp = strstr(line, "loops=");
    if (a && lp) { /* a node: the lines below it until the next are its */
      loops = strtod(lp + strlen("loops="), NULL);
      if (strstr(line, " on onceq_items"))
        seen += strtod(a + strlen("actual rows="), NULL) * loops;
    }
    const char *rm = strstr(line, "Rows Removed by Filter: ");
    if (rm)
      seen += strtod(rm + strlen("Rows Removed by Filter: "), NULL) * loops;
    l = eol ? eol + 1 : NULL;
  }
  return (long)(seen + 0.5);
}

/* The actual rows of the plan's first node whose line says `node` (e.g.
 * "Update on onceq_items"), or -1 when there is none. */
static inline double sem_plan_node_rows(const char *plan, const char *node)
{
  const char *at = strstr(plan, node);
  if (!at)
    return -1;
  const char *eol = strchr(at, '\n');
  const char *a = strstr(at, "actual rows=");
  if (!a || (eol && a > eol))
    return -1;
  return strtod(a + strlen("actual rows="), NULL);
}

/* `text` prepared (SEM_PREPARE) and run once in its generic plan, as the
 * library's claims run (plan_cache_mode), under EXPLAIN (ANALYZE, BUFFERS,
 * COSTS OFF, TIMING OFF), in a transaction that is rolled back: the plan,
 * printed under "<title>, generic plan" and returned (malloc'd, the caller
 * frees it). args: the EXECUTE's parameter list without parentheses, or
 * NULL for none. */
static inline char *sem_generic_run_at(const char *file, int line, oq_db *db,
                                       const char *text, const char *args,
                                       const char *title)
{
  sem_prepare_at(file, line, db, "oqt_g", text);
  size_t len = (args ? strlen(args) : 0) + 128;
  char *explain = malloc(len);
  if (!explain)
    OQT_FAIL("out of memory");
  snprintf(
      explain, len,
      "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE oqt_g%s%s%s",
      args ? "(" : "", args ? args : "", args ? ")" : "");
  char heading[200];
  snprintf(heading, sizeof heading, "%s, generic plan", title);
  semq_exec_at(file, line, db, "BEGIN", 0, NULL);
  semq_exec_at(file, line, db, "SET LOCAL plan_cache_mode = force_generic_plan",
               0, NULL);
  char *plan = sem_plan_at(file, line, db, explain, heading);
  semq_exec_at(file, line, db, "ROLLBACK", 0, NULL);
  semq_exec_at(file, line, db, "DEALLOCATE oqt_g", 0, NULL);
  free(explain);
  return plan;
}
#define SEM_GENERIC_RUN(db, text, args, title)                                 \
  sem_generic_run_at(__FILE__, __LINE__, (db), (text), (args), (title))

/* A control (the statement written as before a fix) must do more than the
 * bound in the state a test built, or that state no longer misleads the
 * planner and the check of the fixed statement would prove nothing: fail
 * then. what: the unit ("buffers", "rows"). */
static inline void sem_control_past_at(const char *file, int line, long was,
                                       long bound, const char *what)
{
  if (was <= bound) {
    fprintf(stderr,
            "FAIL %s:%d: the control (above) read %ld %s, not more than %ld: "
            "this state no longer misleads the planner, so the check would "
            "pass with the old text too\n",
            file, line, was, what, bound);
    exit(1);
  }
  printf("ok the control reads %ld %s (> %ld): the state misleads the "
         "planner\n",
         was, what, bound);
}
#define SEM_CONTROL_PAST(was, bound, what)                                     \
  sem_control_past_at(__FILE__, __LINE__, (was), (bound), (what))

/* The checked statement (named `name`) must stay within the bound its
 * control went past, or fail saying `why` it did not. */
static inline void sem_within_at(const char *file, int line, const char *name,
                                 long now, long bound, const char *what,
                                 const char *why)
{
  if (now > bound) {
    fprintf(stderr, "FAIL %s:%d: %s read %ld %s (above), more than %ld: %s\n",
            file, line, name, now, what, bound, why);
    exit(1);
  }
  printf("ok %s reads %ld %s (<= %ld)\n", name, now, what, bound);
}
#define SEM_WITHIN(name, now, bound, what, why)                                \
  sem_within_at(__FILE__, __LINE__, (name), (now), (bound), (what), (why))

/* `text` with its first `now` written as `was` (a control's statement as
 * it read before a change), malloc'd; fails when `text` no longer says
 * `now`. */
static inline char *sem_as_before_at(const char *file, int line,
                                     const char *text, const char *now,
                                     const char *was)
{
  const char *mark = strstr(text, now);
  if (!mark) {
    fprintf(stderr, "FAIL %s:%d: the statement no longer says %s\n", file, line,
            now);
    exit(1);
  }
  size_t len = strlen(text) + strlen(was) + 1;
  char *old = malloc(len);
  if (!old)
    OQT_FAIL("out of memory");
  snprintf(old, len, "%.*s%s%s", (int)(mark - text), text, was,
           mark + strlen(now));
  return old;
}
#define SEM_AS_BEFORE(text, now, was)                                          \
  sem_as_before_at(__FILE__, __LINE__, (text), (now), (was))

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

/* Enqueue n items on queue, one oq_enqueue each (no key: every one is
 * new), or fail. oqt_enqueue_n inserts them in one transaction instead. */
static inline void sem_enqueue_at(const char *file, int line, oq_db *db,
                                  const char *queue, int n)
{
  for (int i = 0; i < n; i++) {
    char id[OQ_UUID_LEN + 1];
    oq_enqueue_status st = (oq_enqueue_status)-1;
    oq_enqueue_opts o = {.queue = queue};
    oq_err e = oq_enqueue(db, &o, id, &st);
    if (e != OQ_OK || st != OQ_ENQUEUED) {
      fprintf(stderr, "FAIL %s:%d: oq_enqueue(%s): %s, status %d (%s)\n", file,
              line, queue, oq_strerror(e), (int)st, oq_db_errmsg(db));
      exit(1);
    }
  }
}
#define SEM_ENQUEUE(db, queue, n)                                              \
  sem_enqueue_at(__FILE__, __LINE__, (db), (queue), (n))

#ifdef ONCEQ_INTERNAL_H
/* The queue-control tests (queue_pause, queue_limit) run each check in
 * both claim forms: one statement for all queues (PostgreSQL) and one
 * statement per queue (what CockroachDB runs, forced with
 * oq__claim_force_per_queue). Start a form: returns its name, or NULL
 * (after saying so) when these traits have no one-statement form; deletes
 * the items of the queues LIKE `like` the other form left. The caller
 * sets oq__claim_force_per_queue(db, false) when done. Only with the
 * library's internal header (INTERNAL tests). */
static inline const char *sem_form_begin_at(const char *file, int line,
                                            oq_db *db, bool per_queue,
                                            const char *like)
{
  if (!per_queue && !oq_db_traits(db)->multi_queue_claim) {
    printf("skip one-statement form: the %s traits claim per queue\n",
           oq_db_traits(db)->name);
    return NULL;
  }
  oq__claim_force_per_queue(db, per_queue);
  const char *p[1] = {like};
  semq_exec_at(file, line, db, "DELETE FROM onceq_items WHERE queue LIKE $1", 1,
               p);
  return per_queue ? "per-queue" : "one-statement";
}
#define SEM_FORM_BEGIN(db, per_queue, like)                                    \
  sem_form_begin_at(__FILE__, __LINE__, (db), (per_queue), (like))
#endif

/* The ledger the tests' ack callbacks write to. No unique constraint on
 * purpose: a duplicate ack would show up as a second row. */
#define SEM_LEDGER_DDL                                                         \
  "CREATE TABLE ledger (item_id UUID NOT NULL, session_id UUID NOT NULL, "     \
  "who TEXT NOT NULL)"
#define SEM_LEDGER_INSERT                                                      \
  "INSERT INTO ledger (item_id, session_id, who) VALUES ($1, $2, $3)"

#endif
