/*
 * db.c: the only module that talks to libpq. It owns the connection
 * (oq_db), the error details every module reports through (one setter,
 * oq__db_fail), and the transaction runner with restart retries.
 *
 * Terms: see db.h (restart, ambiguous commit). A connection is "bad" once
 * libpq says CONNECTION_BAD; any error on a bad connection is OQ_ERR_CONN
 * (before COMMIT) or OQ_ERR_AMBIGUOUS (during COMMIT).
 */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_hooks.h"

struct oq_db {
  PGconn *conn;
  oq_engine engine;
  oq_db_opts opts; /* copies of the strings below */
  char *conninfo;  /* as given; may hold a password; never printed */
  char *app_name;
  char *secrets[2];      /* password and sslpassword from the conninfo, for
                            scrubbing; NULL when absent */
  char masked[1024];     /* conninfo with its passwords as *** */
  oq_retry_policy retry; /* restarts and reconnects */
  uint64_t rng;          /* xorshift state for jitter */
  uint64_t restarts;     /* 40001/40P01 re-runs taken */
  uint64_t statements;   /* statements sent on this handle, for the tests
                            that count round trips (test_hooks.h) */
  bool copy_refused;     /* await_result met a COPY: connection closed */
  bool begin_pending;    /* oq_db_transact's BEGIN, not sent yet: it goes
                            with the transaction's first statement */
  void *slots[OQ__DB_SLOT__COUNT];        /* other modules' per-connection
                                             memory (oq__db_slot): freed here */
  char *prepared[OQ__DB_PREPARED_MAX];    /* SQL prepared on this connection
                                             as "oq_p<gen>_<index>"; reset on
                                             connect */
  int prepared_cols[OQ__DB_PREPARED_MAX]; /* columns each one returns, -1
                                             until described */
  unsigned prepared_next;                 /* the slot evicted when full */
  unsigned prepared_gen;   /* in the names: a forgotten set never collides */
  int prepared_last;       /* the slot named last: never the next evicted */
  unsigned prepared_nonce; /* random per connection, in the names: no other
                              client's statement can share one, even
                              where a pooler passes names between server
                              connections */
  bool pooled;             /* a pooler stands between us and the server
                              (detect_pooler): pooled traits, and a full
                              statement cache renames instead of reusing */
  bool async_commits;      /* oq_db_set_async_commits: single statements outside
                              a transaction carry synchronous_commit = off */
  bool pooled_seen;        /* a statement we prepared vanished before its Bind
                              (a transaction pooler): statements run unnamed
                              (the cache keeps only their column counts) and
                              pooled from then on, on every reconnect too */
  bool raw_handed_out;     /* oq_db_pgconn was called: BEGIN goes at once */
  oq_err last;             /* last error code */
  char sqlstate[6];        /* last SQLSTATE or "" */
  char errmsg[OQ_ERRBUF_SIZE];
};

static char *dupstr(const char *s)
{
  return s ? strdup(s) : NULL;
}

/* Write a one-line, password-free message into buf: libpq's messages may
 * echo a password without its key around it, so the conninfo's own ones
 * are scrubbed by value too. */
static void format_msg(char *buf, size_t len, char *const *secrets,
                       const char *fmt, va_list ap)
{
  vsnprintf(buf, len, fmt, ap);
  oq__one_line(buf);
  for (int i = 0; i < 2; i++)
    oq_text_scrub(buf, len, secrets[i]);
  const char *envpw = getenv("PGPASSWORD");
  if (envpw && strlen(envpw) >= 3)
    oq_text_scrub(buf, len, envpw);
}

oq_err oq__db_fail(oq_db *db, oq_err code, const char *sqlstate,
                   const char *fmt, ...)
{
  /* Callers may pass db's own errmsg/sqlstate as arguments (wrapping an
   * error), so format into locals first. */
  va_list ap;
  char msg[OQ_ERRBUF_SIZE];
  char state[6];
  snprintf(state, sizeof state, "%s", sqlstate ? sqlstate : "");
  va_start(ap, fmt);
  format_msg(msg, sizeof msg, db->secrets, fmt, ap);
  va_end(ap);
  db->last = code;
  memcpy(db->sqlstate, state, sizeof state);
  memcpy(db->errmsg, msg, sizeof msg);
  return code;
}

void oq__db_clear(oq_db *db)
{
  db->last = OQ_OK;
  db->sqlstate[0] = '\0';
  db->errmsg[0] = '\0';
}

const char *oq_db_errmsg(const oq_db *db)
{
  return db ? db->errmsg : "";
}

const char *oq_db_sqlstate(const oq_db *db)
{
  return db ? db->sqlstate : "";
}

uint64_t oq_db_restarts(const oq_db *db)
{
  return db->restarts;
}

uint64_t oq__db_statements(const oq_db *db)
{
  return db ? db->statements : 0;
}

oq_engine oq_db_engine(const oq_db *db)
{
  return db->engine;
}

/* The traits table is traits.c's; which row a connection gets is decided
 * here, beside its engine. getenv on each call: no cached global (log.h:
 * the log sink is the only one), and the switch is set before a process
 * starts. */
const oq_engine_traits *oq_db_traits(const oq_db *db)
{
  return oq__engine_traits_pick(oq_db_engine(db), getenv(OQ_TRAITS_ENV),
                                oq_db_pooled(db));
}

const char *oq_db_masked_conninfo(const oq_db *db)
{
  return db->masked;
}

static oq_err flush_begin(oq_db *db);

struct pg_conn *oq_db_pgconn(oq_db *db)
{
  /* raw libpq inside oq_db_transact must run inside its transaction: a
   * BEGIN still waiting for the first statement goes now, and, since the
   * caller may keep this pointer, every later transaction's BEGIN goes at
   * once too */
  db->raw_handed_out = true;
  if (db->begin_pending && db->conn) {
    oq_err e = flush_begin(db);
    (void)e; /* a failed BEGIN means a lost connection: raw calls fail too */
  }
  return db->conn;
}

int oq_db_connected(const oq_db *db)
{
  return db && db->conn && PQstatus(db->conn) == CONNECTION_OK;
}

const oq_retry_policy *oq__db_policy(const oq_db *db)
{
  return &db->retry;
}

uint64_t *oq__db_rng(oq_db *db)
{
  return &db->rng;
}

void **oq__db_slot(oq_db *db, oq__db_slot_id id)
{
  return &db->slots[id];
}

const oq_db_opts *oq__db_opts(const oq_db *db)
{
  return &db->opts;
}

void oq__db_count_restart(oq_db *db)
{
  db->restarts++;
}

static PGresult *await_result(oq_db *db, bool *timed_out);
static bool wait_readable(oq_db *db, uint64_t until_ms, bool *timed_out);
static oq_err deadline_passed(oq_db *db, const char *what);
static oq_err fail_from_result(oq_db *db, PGresult *res, const char *what);

/* Prepared statements live on the server connection: a new one has none. */
void oq__db_forget_prepared(oq_db *db)
{
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++) {
    free(db->prepared[i]);
    db->prepared[i] = NULL;
  }
  /* new names from here: the server may still hold the old ones (a
   * forgotten set after 0A000), or have lost them (26000) */
  db->prepared_gen++;
  db->prepared_next = 0;
  db->prepared_last = -1;
}

static void prepared_name(const oq_db *db, int slot, char *name, size_t len)
{
  snprintf(name, len, "oq_p%08x_%u_%d", db->prepared_nonce, db->prepared_gen,
           slot);
}

static PGresult *exec_simple(oq_db *db, const char *sql, bool *timed_out);

/*
 * Called once per connection on PostgreSQL, right after it is made: is a
 * pooler (pgbouncer, PgCat, Odyssey, Supavisor) between us and the server?
 * A pooler answers the startup itself and hands out its own cancel key, so
 * the backend pid it announced (PQbackendPID) is not the pid of the server
 * backend that runs our statements. One round trip. Through a pooler the
 * connection keeps no session state outside a transaction (docs/
 * deployment.md, "Poolers and high availability"): the traits
 * (oq_db_traits) turn off LISTEN, session settings and session advisory
 * locks. Prepared statements stay, under names no other client can have,
 * for poolers that keep them (session pooling, pgbouncer 1.21's
 * max_prepared_statements), until one vanishes (oq__db_vanished).
 */
static void detect_pooler(oq_db *db)
{
  db->pooled = db->pooled_seen;
  if (db->engine != OQ_ENGINE_POSTGRES || db->pooled)
    return;
  bool timed_out = false;
  PGresult *res = exec_simple(db, "SELECT pg_backend_pid()", &timed_out);
  if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
      db->conn) {
    long pid = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    db->pooled = pid != (long)PQbackendPID(db->conn);
  }
  PQclear(res); /* a failure here shows again on the first statement */
  if (db->pooled)
    OQ_LOG(OQ_LOG_DEBUG, NULL, NULL,
           "%s is reached through a connection pooler (the server backend "
           "is not the one announced): no session state",
           db->masked);
}

bool oq_db_pooled(const oq_db *db)
{
  return db && db->pooled;
}

void oq_db_set_async_commits(oq_db *db, bool on)
{
  db->async_commits = on && db->engine == OQ_ENGINE_POSTGRES;
}

/* Server NOTICEs ("relation already exists, skipping") go to the debug log,
 * not to the program's stderr. */
static void on_notice(void *ud, const char *msg)
{
  OQ__UNUSED(ud);
  OQ_LOG(OQ_LOG_DEBUG, NULL, NULL, "server notice: %s", msg);
}

/*
 * Connect with the user's options, adding application_name, a connect
 * timeout and TCP keepalives unless the conninfo sets them (so a dead peer
 * is noticed in about 20 s instead of the kernel's two hours).
 */
static oq_err connect_now(oq_db *db)
{
  char *perr = NULL;
  PQconninfoOption *parsed = PQconninfoParse(db->conninfo, &perr);
  if (!parsed) {
    oq__db_fail(db, perr ? OQ_ERR_CONFIG : OQ_ERR_NOMEM, NULL,
                "invalid database URL/conninfo %s: %s; fix --db or "
                "ONCEQ_DATABASE_URL",
                db->masked, perr ? perr : "out of memory");
    PQfreemem(perr);
    return db->last;
  }
  const char *keys[48];
  const char *vals[48];
  int n = 0;
  int has_app = 0, has_timeout = 0, has_keepalive = 0, has_user_timeout = 0;
  for (PQconninfoOption *o = parsed; o->keyword && n < 40; o++) {
    if (!o->val)
      continue;
    if (strcmp(o->keyword, "application_name") == 0)
      has_app = 1;
    if (strcmp(o->keyword, "connect_timeout") == 0)
      has_timeout = 1;
    if (strncmp(o->keyword, "keepalives", 10) == 0)
      has_keepalive = 1;
    if (strcmp(o->keyword, "tcp_user_timeout") == 0)
      has_user_timeout = 1;
    if (strcmp(o->keyword, "password") == 0 && !db->secrets[0])
      db->secrets[0] = dupstr(o->val);
    if (strcmp(o->keyword, "sslpassword") == 0 && !db->secrets[1])
      db->secrets[1] = dupstr(o->val);
    keys[n] = o->keyword;
    vals[n] = o->val;
    n++;
  }
  char timeout[16], user_timeout[16];
  int connect_s =
      db->opts.connect_timeout_s > 0 ? db->opts.connect_timeout_s : 5;
  /* with a deadline, connecting may not take longer either (libpq's
   * minimum is 2 s) */
  if (db->opts.connect_timeout_s <= 0 && db->opts.deadline_ms > 0)
    connect_s =
        db->opts.deadline_ms / 1000 > 2 ? db->opts.deadline_ms / 1000 : 2;
  snprintf(timeout, sizeof timeout, "%d", connect_s);
  snprintf(user_timeout, sizeof user_timeout, "%d", db->opts.deadline_ms);
  if (!has_app) {
    keys[n] = "application_name";
    vals[n++] = db->app_name ? db->app_name : "onceq";
  }
  if (!has_timeout) {
    keys[n] = "connect_timeout";
    vals[n++] = timeout;
  }
  if (!has_keepalive) {
    keys[n] = "keepalives";
    vals[n++] = "1";
    keys[n] = "keepalives_idle";
    vals[n++] = "10";
    keys[n] = "keepalives_interval";
    vals[n++] = "3";
    keys[n] = "keepalives_count";
    vals[n++] = "3";
  }
  /* data unacknowledged by the peer for this long kills the connection
   * (Linux TCP_USER_TIMEOUT; libpq 12+), so a dead host is noticed within
   * the deadline even while a write is outstanding */
  if (!has_user_timeout && db->opts.deadline_ms > 0) {
    keys[n] = "tcp_user_timeout";
    vals[n++] = user_timeout;
  }
  keys[n] = NULL;
  vals[n] = NULL;
  oq__db_forget_prepared(db);
  db->conn = PQconnectdbParams(keys, vals, 0);
  PQconninfoFree(parsed);
  if (!db->conn)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory connecting");
  if (PQstatus(db->conn) != CONNECTION_OK) {
    char m[OQ_ERRBUF_SIZE];
    snprintf(m, sizeof m, "%s", PQerrorMessage(db->conn));
    oq__one_line(m);
    oq_err code = OQ_ERR_CONN;
    const char *fix = "check that the server is running and that --db / "
                      "ONCEQ_DATABASE_URL points at it";
    if (PQconnectionNeedsPassword(db->conn) ||
        strstr(m, "authentication failed") || strstr(m, "password")) {
      code = OQ_ERR_AUTH;
      fix = "check the user and password in --db / ONCEQ_DATABASE_URL "
            "(or PGPASSWORD / ~/.pgpass)";
    } else if (strstr(m, "role \"") && strstr(m, "does not exist")) {
      code = OQ_ERR_CONFIG;
      fix = "create the role or fix user= in --db / ONCEQ_DATABASE_URL";
    } else if (strstr(m, "does not exist")) {
      code = OQ_ERR_CONFIG;
      fix = "create the database or fix the name in --db / "
            "ONCEQ_DATABASE_URL";
    } else if (strstr(m, "invalid") && strstr(m, "connection option")) {
      /* libpq: invalid integer value "x" for connection option "port" */
      code = OQ_ERR_CONFIG;
      fix = "fix that option in --db / ONCEQ_DATABASE_URL";
    }
    oq__db_fail(db, code, NULL, "cannot connect to %s: %s; %s", db->masked, m,
                fix);
    PQfinish(db->conn);
    db->conn = NULL;
    return code;
  }
  PQsetNoticeProcessor(db->conn, on_notice, NULL);
  db->engine = oq__dialect_detect(PQparameterStatus(db->conn, "crdb_version"));
  /* xorshift64: a new nonce per connection */
  db->rng ^= db->rng << 13;
  db->rng ^= db->rng >> 7;
  db->rng ^= db->rng << 17;
  db->prepared_nonce = (unsigned)(db->rng >> 32);
  detect_pooler(db);
  if (!db->conn) /* its round trip outlived the deadline */
    return oq__db_fail(db, OQ_ERR_CONN, NULL,
                       "cannot connect to %s: no answer within the %d ms "
                       "deadline; check that the server is running and that "
                       "--db / ONCEQ_DATABASE_URL points at it",
                       db->masked, db->opts.deadline_ms);
  return OQ_OK;
}

oq_err oq_db_open(const oq_db_opts *opts, oq_db **out, char *errbuf,
                  size_t errlen)
{
  *out = NULL;
  oq_db *db = calloc(1, sizeof *db);
  if (!db) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "out of memory");
    return OQ_ERR_NOMEM;
  }
  const char *ci = opts && opts->conninfo && *opts->conninfo
                       ? opts->conninfo
                       : oq_conninfo_from_env();
  db->conninfo = dupstr(ci);
  db->app_name =
      dupstr(opts && opts->application_name ? opts->application_name : "onceq");
  if (opts)
    db->opts = *opts;
  db->opts.conninfo = db->conninfo;
  db->opts.application_name = db->app_name;
  db->retry = opts && opts->retry ? *opts->retry : oq_retry_policy_tx();
  db->opts.retry = NULL; /* copies made from opts get the default */
  db->rng = oq__seed();
  oq_conninfo_mask(db->conninfo, db->masked, sizeof db->masked);
  if (!db->masked[0])
    snprintf(db->masked, sizeof db->masked,
             "the default database (libpq PGHOST/PGPORT/PGDATABASE)");
  if (!db->conninfo || !db->app_name) {
    oq_db_close(db);
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "out of memory");
    return OQ_ERR_NOMEM;
  }
  oq_err e = connect_now(db);
  if (e != OQ_OK) {
    if (errbuf && errlen)
      snprintf(errbuf, errlen, "%s", db->errmsg);
    oq_db_close(db);
    return e;
  }
  *out = db;
  return OQ_OK;
}

void oq_db_close(oq_db *db)
{
  if (!db)
    return;
  if (db->conn)
    PQfinish(db->conn);
  oq__db_forget_prepared(db);
  for (int i = 0; i < OQ__DB_SLOT__COUNT; i++)
    free(db->slots[i]);
  free(db->conninfo);
  free(db->app_name);
  free(db->secrets[0]);
  free(db->secrets[1]);
  free(db);
}

oq_err oq_db_reconnect(oq_db *db)
{
  oq__db_clear(db);
  if (db->conn) {
    PQfinish(db->conn);
    db->conn = NULL;
  }
  return connect_now(db);
}

oq_err oq__db_reconnect_patiently(oq_db *db)
{
  uint64_t start =
      db->retry.now_ms ? db->retry.now_ms(db->retry.ctx) : oq_monotonic_ms();
  for (int attempt = 1;; attempt++) {
    oq_err e = oq_db_reconnect(db);
    if (e == OQ_OK || e == OQ_ERR_AUTH || e == OQ_ERR_CONFIG ||
        e == OQ_ERR_NOMEM)
      return e;
    uint64_t now =
        db->retry.now_ms ? db->retry.now_ms(db->retry.ctx) : oq_monotonic_ms();
    if (db->retry.max_total_ms > 0 &&
        now - start >= (uint64_t)db->retry.max_total_ms)
      return e;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}

/*
 * Turn a failed result into an oq_err on db. A NULL result or a bad
 * connection is a lost connection whatever the SQLSTATE says.
 */
static oq_err fail_from_result(oq_db *db, PGresult *res, const char *what)
{
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  const char *prim =
      res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  const char *msg = prim ? prim : PQerrorMessage(db->conn);
  oq_err code = oq__sqlstate_classify(state);
  if (db->copy_refused) {
    db->copy_refused = false;
    return oq__db_fail(
        db, OQ_ERR_SQL, oq__sqlstate_code(OQ__SQLSTATE_FEATURE_NOT_SUPPORTED),
        "%s: COPY ... FROM STDIN / TO STDOUT is not supported "
        "(nothing would feed or read its data); the connection "
        "was closed. Use INSERT/SELECT, or COPY to a server file",
        what);
  }
  if (!res || PQstatus(db->conn) == CONNECTION_BAD) {
    if (code != OQ_ERR_AMBIGUOUS)
      code = OQ_ERR_CONN;
    return oq__db_fail(db, code, state, "%s: connection to %s lost: %s", what,
                       db->masked, msg);
  }
  return oq__db_fail(db, code, state, "%s: %s", what, msg);
}

/*
 * Collect the answer to the query just sent, waiting at most the
 * connection's deadline (oq_db_opts.deadline_ms; 0: no limit). Past the
 * deadline the connection is closed, so no call outlives it whatever the
 * network does (a blackholed peer: TCP would retry for many minutes), and
 * NULL is returned with *timed_out set. Otherwise the result PQexec would
 * give: the first error, else the last result.
 */
static PGresult *await_result(oq_db *db, bool *timed_out)
{
  *timed_out = false;
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  PGresult *kept = NULL;
  for (;;) {
    /* a failure other than the deadline: PQgetResult reports it */
    if (!wait_readable(db, until, timed_out) && *timed_out) {
      PQclear(kept);
      PQfinish(db->conn);
      db->conn = NULL;
      return NULL;
    }
    PGresult *res = PQgetResult(db->conn);
    if (!res)
      break;
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      /* libpq answers a COPY state until its data is sent or read, so
       * this loop would never end: give the connection up (the server
       * rolls the transaction back) and say why (fail_from_result) */
      PQclear(res);
      PQclear(kept);
      PQfinish(db->conn);
      db->conn = NULL;
      db->copy_refused = true;
      return NULL;
    }
    if (kept && PQresultStatus(kept) != PGRES_COMMAND_OK &&
        PQresultStatus(kept) != PGRES_TUPLES_OK &&
        PQresultStatus(kept) != PGRES_EMPTY_QUERY) {
      PQclear(res); /* keep the first error */
    } else {
      PQclear(kept);
      kept = res;
    }
    if (PQstatus(db->conn) == CONNECTION_BAD)
      break;
  }
  return kept;
}

/* The connection was closed at its deadline: record that on db. */
static oq_err deadline_passed(oq_db *db, const char *what)
{
  return oq__db_fail(db, OQ_ERR_CONN, NULL,
                     "%s: no answer from %s within the %d ms deadline; the "
                     "connection was closed",
                     what, db->masked, db->opts.deadline_ms);
}

/* Send sql (simple protocol) and collect its answer within the deadline.
 * NULL with *timed_out when the deadline passed (the connection is gone). */
static PGresult *exec_simple(oq_db *db, const char *sql, bool *timed_out)
{
  *timed_out = false;
  db->statements++;
  if (!PQsendQuery(db->conn, sql))
    return NULL;
  return await_result(db, timed_out);
}

/* Row row of res as JSON (rowjson.c formats; the row is taken out of the
 * result here, where libpq lives). NULL: no such row, or out of memory. */
char *oq__pgresult_row_json(const struct pg_result *res, int row)
{
  if (!res || row < 0 || row >= PQntuples(res))
    return NULL;
  int ncols = PQnfields(res);
  size_t n = ncols > 0 ? (size_t)ncols : 1;
  const char **names = malloc(n * sizeof *names);
  const char **vals = malloc(n * sizeof *vals);
  unsigned int *types = malloc(n * sizeof *types);
  char *json = NULL;
  if (!names || !vals || !types)
    goto out;
  for (int c = 0; c < ncols; c++) {
    names[c] = PQfname(res, c);
    types[c] = (unsigned int)PQftype(res, c);
    vals[c] = PQgetisnull(res, row, c) ? NULL : PQgetvalue(res, row, c);
  }
  json = oq__row_json(ncols, names, types, vals);
out:
  free(names);
  free(vals);
  free(types);
  return json;
}

/* Count of rows a command affected (PQcmdTuples), or -1 when unknown. */
static long affected_rows(PGresult *res)
{
  const char *t = PQcmdTuples(res);
  return (t && *t) ? strtol(t, NULL, 10) : -1;
}

static oq_err prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols, const char *what);

/* Send a pending BEGIN on its own (the old way), for the calls that cannot
 * carry it: the simple protocol and the pipelines. */
static oq_err flush_begin(oq_db *db)
{
  if (!db->begin_pending)
    return OQ_OK;
  db->begin_pending = false;
  bool timed_out = false;
  PGresult *res = exec_simple(db, "BEGIN", &timed_out);
  if (timed_out)
    return deadline_passed(db, "BEGIN failed");
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
    e = fail_from_result(db, res, "BEGIN failed");
  PQclear(res);
  return e;
}

/* Close a connection left in an unusable state, keeping libpq's reason
 * (run_typed reports it as a lost connection). */
static void give_up(oq_db *db)
{
  oq__db_fail(db, OQ_ERR_CONN, NULL, "connection to %s lost: %s", db->masked,
              PQerrorMessage(db->conn));
  PQfinish(db->conn);
  db->conn = NULL;
}

static bool send_stmt(oq_db *db, const char *sql, int nparams,
                      const unsigned int *types, const char *const *params,
                      const char *name)
{
  db->statements++;
  return (name ? PQsendQueryPrepared(db->conn, name, nparams, params, NULL,
                                     NULL, 0)
               : PQsendQueryParams(db->conn, sql, nparams, (const Oid *)types,
                                   params, NULL, NULL, 0)) == 1;
}

/*
 * Send one statement (prepared as `name`, or sql) and collect its answer
 * like await_result. A transaction's pending BEGIN (oq_db_transact) goes in
 * the same round trip, pipelined ahead of it: BEGIN, the statement, Sync
 * (PostgreSQL docs, libpq "Pipeline Mode"; on CockroachDB the same shape
 * as oq__db_pipeline's batches, whose pgwire runs extended-protocol
 * messages up to the Sync: cockroachdb/cockroach#51194; not run against a
 * CockroachDB server here). An idle worker's item then waits for
 * one answer fewer before its handler's statement runs. The answer is the
 * BEGIN's failure if it failed, else the statement's; the transaction is
 * left open, as a separate BEGIN would have left it.
 */
static PGresult *send_and_await(oq_db *db, const char *sql, int nparams,
                                const unsigned int *types,
                                const char *const *params, const char *name,
                                bool *timed_out)
{
  *timed_out = false;
  /* oq_db_set_async_commits: the statement's own implicit transaction
   * (everything up to the Sync) commits without waiting for the WAL
   * flush; set_config(..., true) ends with it, so nothing outlives it */
  const char *prelude =
      db->begin_pending ? "BEGIN"
      : db->async_commits && PQtransactionStatus(db->conn) == PQTRANS_IDLE
          ? "SELECT set_config('synchronous_commit', 'off', true)"
          : NULL;
  if (!prelude)
    return send_stmt(db, sql, nparams, types, params, name)
               ? await_result(db, timed_out)
               : NULL;
  if (!PQenterPipelineMode(db->conn))
    return NULL; /* still pending: the caller's rollback clears it */
  db->begin_pending = false;
  if (!PQsendQueryParams(db->conn, prelude, 0, NULL, NULL, NULL, NULL, 0) ||
      !send_stmt(db, sql, nparams, types, params, name) ||
      !PQpipelineSync(db->conn)) {
    /* nothing can have committed; a half-sent pipeline is unusable */
    give_up(db);
    return NULL;
  }
  PGresult *begin = await_result(db, timed_out);
  if (!db->conn)
    return NULL; /* deadline or COPY: await_result closed it */
  PGresult *res = await_result(db, timed_out);
  if (!db->conn) {
    PQclear(begin);
    PQclear(res);
    return NULL;
  }
  if (!begin || (PQresultStatus(begin) != PGRES_COMMAND_OK &&
                 PQresultStatus(begin) != PGRES_TUPLES_OK)) {
    PQclear(res); /* skipped: PGRES_PIPELINE_ABORTED */
    res = begin;
  } else {
    PQclear(begin);
  }
  /* the Sync's answer, then back to one statement at a time */
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  bool synced = false;
  while (!synced && wait_readable(db, until, timed_out)) {
    PGresult *r = PQgetResult(db->conn);
    if (!r && PQstatus(db->conn) == CONNECTION_BAD)
      break;
    synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
  }
  if (!synced || !PQexitPipelineMode(db->conn)) {
    PQclear(res);
    give_up(db);
    return NULL;
  }
  return res;
}

/* Our prepared statements went away (a DISCARD ALL, a pooler) or no longer
 * fit: forget them and make the failure a restart, so the statement is
 * prepared again when it is rerun (a claim by its retry loop, an ack with
 * its transaction), as ack_many does for its pipelines. */
static oq_err lost_prepared(oq_db *db)
{
  char msg[OQ_ERRBUF_SIZE], state[6];
  snprintf(msg, sizeof msg, "%s", db->errmsg);
  snprintf(state, sizeof state, "%s", db->sqlstate);
  oq__db_forget_prepared(db);
  return oq__db_fail(db, OQ_ERR_RETRY, state,
                     "%s (a prepared statement was lost; it is prepared again "
                     "on the next try)",
                     msg);
}

/* prepared: parse and plan sql once per connection (oq__db_prepare_once),
 * for the library's statements that run per claim or per ack. */
static oq_err run_typed(oq_db *db, const char *sql, int nparams,
                        const unsigned int *types, const char *const *params,
                        oq_row_fn fn, void *ud, long *affected, char **row_json,
                        bool prepared)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL,
                       "not connected to %s; the connection was lost",
                       db->masked);
  char name[32];
  if (prepared) {
    oq_err pe = prepare_once(db, sql, nparams, types, name, sizeof name, NULL,
                             "query failed");
    if (pe != OQ_OK)
      return pe;
  }
  bool timed_out = false;
  PGresult *res = send_and_await(db, sql, nparams, types, params,
                                 prepared && name[0] ? name : NULL, &timed_out);
  if (!res && !db->conn && !timed_out && !db->copy_refused &&
      db->last == OQ_ERR_CONN)
    return OQ_ERR_CONN; /* give_up: the reason is recorded */
  if (timed_out)
    return deadline_passed(db, "query failed");
  oq_err e = OQ_OK;
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    e = fail_from_result(db, res, "query failed");
    if (prepared && name[0] && e != OQ_ERR_CONN &&
        oq__sqlstate_prepared_gone(db->sqlstate)) {
      if (oq__sqlstate_is(db->sqlstate, OQ__SQLSTATE_INVALID_STATEMENT_NAME))
        oq__db_vanished(db);
      e = lost_prepared(db);
    }
    goto out;
  }
  if (affected)
    *affected = st == PGRES_TUPLES_OK && affected_rows(res) < 0
                    ? PQntuples(res)
                    : affected_rows(res);
  if (row_json)
    *row_json = PQntuples(res) > 0 ? oq__pgresult_row_json(res, 0) : NULL;
  if (fn) {
    int nrows = PQntuples(res), ncols = PQnfields(res);
    const char *vals[64];
    if (ncols > 64)
      ncols = 64;
    for (int r = 0; r < nrows && e == OQ_OK; r++) {
      for (int c = 0; c < ncols; c++)
        vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
      e = fn(ud, ncols, vals);
    }
  }
out:
  PQclear(res);
  return e;
}

/* Wait (within until_ms, 0: no limit) until a result can be read without
 * blocking. false: the deadline passed or the connection failed. */
static bool wait_readable(oq_db *db, uint64_t until_ms, bool *timed_out)
{
  while (PQisBusy(db->conn)) {
    int flush = PQflush(db->conn);
    if (flush < 0)
      return false;
    struct pollfd pfd = {.fd = PQsocket(db->conn),
                         .events = POLLIN | (flush == 1 ? POLLOUT : 0)};
    int wait_ms = -1;
    if (until_ms) {
      uint64_t now = oq_monotonic_ms();
      if (now >= until_ms) {
        *timed_out = true;
        return false;
      }
      wait_ms = (int)(until_ms - now);
    }
    if (pfd.fd < 0)
      return false;
    int r = poll(&pfd, 1, wait_ms);
    if (r < 0 && errno != EINTR)
      return false;
    if (r > 0 && !PQconsumeInput(db->conn))
      return true; /* PQgetResult reports the failure */
  }
  return true;
}

/* Rows of one pipelined result to its statement's callback. */
static oq_err deliver_rows(PGresult *res, oq__pstmt *st)
{
  ExecStatusType es = PQresultStatus(res);
  st->affected = es == PGRES_TUPLES_OK && affected_rows(res) < 0
                     ? PQntuples(res)
                     : affected_rows(res);
  if (st->first_row && !*st->first_row && es == PGRES_TUPLES_OK &&
      PQntuples(res) > 0) {
    *st->first_row = oq__pgresult_row_json(res, 0);
    if (!*st->first_row)
      return OQ_ERR_NOMEM;
  }
  if (!st->rows)
    return OQ_OK;
  int nrows = PQntuples(res), ncols = PQnfields(res);
  const char *vals[64];
  if (ncols > 64)
    ncols = 64;
  oq_err e = OQ_OK;
  for (int r = 0; r < nrows && e == OQ_OK; r++) {
    for (int c = 0; c < ncols; c++)
      vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
    e = st->rows(st->ud, ncols, vals);
  }
  return e;
}

/*
 * Pipeline mode is a libpq feature over the v3 extended protocol, which
 * both engines speak: "it is a client-side feature which doesn't require
 * special server support" (PostgreSQL docs, libpq "Pipeline Mode").
 */
/* Send stmts[from..to) after the ones already sent; then a Sync when to is
 * the end, else a flush so their results come back while the transaction
 * stays open. False when the connection could not take them. */
/*
 * Send stmts[i]: its prepared statement, else its text. Through a pooler
 * (prepared set but empty: unnamed) a run of the same statement, a batch's
 * items, is parsed once, by the first of the run; the others bind the
 * unnamed statement it left, which lasts until the next Parse. The whole
 * run is in one pipeline, so on one server connection.
 */
static bool send_pstmt(oq_db *db, const oq__pstmt *stmts, size_t i)
{
  const oq__pstmt *s = &stmts[i];
  bool unnamed = s->prepared && !s->prepared[0];
  bool parsed = unnamed && i > 0 && stmts[i - 1].prepared &&
                !stmts[i - 1].prepared[0] &&
                strcmp(stmts[i - 1].sql, s->sql) == 0;
  if ((s->prepared && !unnamed) || parsed)
    return PQsendQueryPrepared(db->conn, s->prepared, s->nparams, s->params,
                               NULL, NULL, 0) == 1;
  return PQsendQueryParams(db->conn, s->sql, s->nparams, (const Oid *)s->types,
                           s->params, NULL, NULL, 0) == 1;
}

static bool pipeline_send(oq_db *db, oq__pstmt *stmts, size_t from, size_t to,
                          size_t n)
{
  bool ok = true;
  /* a flush request after each statement makes the server send each
   * result as it completes, not all at the Sync, so progress is visible and
   * the deadline is per statement */
  db->statements += to - from;
  for (size_t i = from; i < to && ok; i++)
    ok = (i == 0 || PQsendFlushRequest(db->conn) == 1) &&
         send_pstmt(db, stmts, i);
  if (ok && to == n)
    ok = PQpipelineSync(db->conn) == 1;
  else if (ok)
    ok = PQsendFlushRequest(db->conn) == 1 && PQflush(db->conn) == 0;
  return ok;
}

/* Where the next segment ends: the next statement with a before hook. */
static size_t segment_end(const oq__pstmt *stmts, size_t from, size_t n)
{
  for (size_t i = from + 1; i < n; i++)
    if (stmts[i].before)
      return i;
  return n;
}

/*
 * Pipeline mode is a libpq feature over the v3 extended protocol, which
 * both engines speak: "it is a client-side feature which doesn't require
 * special server support" (PostgreSQL docs, libpq "Pipeline Mode").
 */
oq_err oq__db_pipeline(oq_db *db, oq__pstmt *stmts, size_t n, long *failed)
{
  *failed = -1;
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL,
                       "not connected to %s; the connection was lost",
                       db->masked);
  oq_err be = flush_begin(db);
  if (be != OQ_OK)
    return be;
  if (!PQenterPipelineMode(db->conn))
    return fail_from_result(db, NULL, "cannot enter pipeline mode");
  for (size_t i = 0; i < n; i++)
    if (stmts[i].first_row)
      *stmts[i].first_row = NULL;
  size_t sent = segment_end(stmts, 0, n);
  if (!pipeline_send(db, stmts, 0, sent, n)) {
    /* the server runs each message as it arrives: if the last statement
     * (a COMMIT) was among those sent, part of it may have gone through */
    oq_err e = oq__db_fail(db, sent == n ? OQ_ERR_AMBIGUOUS : OQ_ERR_CONN, NULL,
                           "pipeline to %s could not be sent: %s", db->masked,
                           PQerrorMessage(db->conn));
    PQfinish(db->conn); /* a half-sent pipeline leaves no usable state */
    db->conn = NULL;
    return e;
  }
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  oq_err first = OQ_OK;
  size_t next = 0; /* the statement whose results come next */
  bool synced = false, lost = false, timed_out = false, copy = false;
  while (!synced) {
    if (sent < n && (next == sent || first != OQ_OK)) {
      /* every result so far is in: the next segment; or, after a
       * failure, at once the Sync that ends the pipeline (the server
       * skips to it) */
      size_t to = first == OQ_OK ? segment_end(stmts, sent, n) : n;
      if (first == OQ_OK && stmts[sent].before) {
        oq_err e = stmts[sent].before(stmts[sent].before_ud, &stmts[sent]);
        if (e != OQ_OK) {
          first = oq__db_fail(
              db, e, NULL, "pipelined statement %zu: could not be made", sent);
          *failed = (long)sent;
          to = n;
        }
      }
      size_t from = first == OQ_OK ? sent : n;
      bool ok = pipeline_send(db, stmts, from, to, n);
      sent = to; /* handed to the connection, perhaps in part (see above) */
      if (!ok) {
        lost = true;
        break;
      }
    }
    if (!wait_readable(db, until, &timed_out)) {
      lost = true;
      break;
    }
    PGresult *res = PQgetResult(db->conn);
    if (!res) {
      if (PQstatus(db->conn) == CONNECTION_BAD) {
        lost = true;
        break;
      }
      next++; /* the end of one statement's results */
      /* the deadline is for each statement: the server is making
       * progress, so the next one gets the whole of it again */
      if (until)
        until = oq_monotonic_ms() + (uint64_t)db->opts.deadline_ms;
      continue;
    }
    ExecStatusType es = PQresultStatus(res);
    if (es == PGRES_COPY_IN || es == PGRES_COPY_OUT || es == PGRES_COPY_BOTH) {
      /* as in await_result: libpq would answer this state forever. The
       * COMMIT behind it may still run (a COPY TO STDOUT needs nothing
       * from us), so the outcome is unknown like any lost connection */
      PQclear(res);
      lost = true;
      copy = true;
      break;
    }
    if (es == PGRES_PIPELINE_SYNC) {
      synced = true;
    } else if (es == PGRES_PIPELINE_ABORTED) {
      /* skipped after an earlier failure */
    } else if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
      if (next < n && first == OQ_OK) {
        oq_err e = deliver_rows(res, &stmts[next]);
        if (e != OQ_OK) {
          first = oq__db_fail(db, e, NULL,
                              "pipelined statement %zu: rows "
                              "callback failed",
                              next);
          *failed = (long)next;
        }
      }
    } else if (PQstatus(db->conn) == CONNECTION_BAD) {
      PQclear(res); /* libpq's report of the lost connection */
      lost = true;
      break;
    } else if (first == OQ_OK) {
      first = fail_from_result(db, res, "query failed");
      *failed = (long)(next < n ? next : n - 1);
    }
    PQclear(res);
  }
  if (lost) {
    /* a COMMIT that was never sent cannot have run */
    bool before_failure = first == OQ_OK && sent == n;
    const char *why = copy ? "a COPY ... FROM STDIN / TO STDOUT, which is not "
                             "supported: nothing would feed or read its data"
                      : timed_out ? "no answer within the deadline"
                                  : PQerrorMessage(db->conn);
    char msg[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", why);
    PQfinish(db->conn);
    db->conn = NULL;
    if (before_failure)
      return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL,
                         "pipeline outcome unknown: connection to %s lost "
                         "(%s)",
                         db->masked, msg);
    /* the failure itself said the outcome is unknown (40003, 08007 on the
     * COMMIT): the drop after it does not make it a plain loss */
    if (first == OQ_ERR_AMBIGUOUS)
      return oq__db_fail(db, OQ_ERR_AMBIGUOUS, db->sqlstate,
                         "pipeline outcome unknown: %s; then the connection "
                         "to %s was lost (%s)",
                         db->errmsg, db->masked, msg);
    return oq__db_fail(db, OQ_ERR_CONN, db->sqlstate,
                       "connection to %s lost after: %s", db->masked,
                       db->errmsg[0] ? db->errmsg : msg);
  }
  /* a failure left the explicit transaction aborted: end it, so the
   * connection is usable (the caller runs the batch again) */
  if (PQtransactionStatus(db->conn) == PQTRANS_INERROR ||
      PQtransactionStatus(db->conn) == PQTRANS_INTRANS) {
    bool t = false;
    PQexitPipelineMode(db->conn);
    PGresult *rb = exec_simple(db, "ROLLBACK", &t);
    PQclear(rb);
    if (t || !db->conn)
      return first != OQ_OK
                 ? first
                 : oq__db_fail(db, OQ_ERR_CONN, NULL,
                               "ROLLBACK on %s timed out", db->masked);
  }
  if (db->conn && PQpipelineStatus(db->conn) != PQ_PIPELINE_OFF &&
      !PQexitPipelineMode(db->conn)) {
    PQfinish(db->conn);
    db->conn = NULL;
    if (first == OQ_OK)
      return oq__db_fail(db, OQ_ERR_CONN, NULL,
                         "cannot leave pipeline mode on %s", db->masked);
  }
  return first;
}

static oq_err run(oq_db *db, const char *sql, int nparams,
                  const char *const *params, oq_row_fn fn, void *ud,
                  long *affected)
{
  return run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                   false);
}

oq_err oq_db_exec_typed(oq_db *db, const char *sql, int nparams,
                        const unsigned int *types, const char *const *params,
                        long *affected)
{
  return run_typed(db, sql, nparams, types, params, NULL, NULL, affected, NULL,
                   false);
}

oq_err oq_db_exec_typed_json(oq_db *db, const char *sql, int nparams,
                             const unsigned int *types,
                             const char *const *params, char **row_json)
{
  *row_json = NULL;
  return run_typed(db, sql, nparams, types, params, NULL, NULL, NULL, row_json,
                   false);
}

oq_err oq_db_listen(oq_db *db, const char *channel)
{
  if (db->pooled)
    return oq__db_fail(db, OQ_ERR_CONFIG, NULL,
                       "%s goes through a connection pooler: LISTEN needs a "
                       "session of its own; give a direct connection "
                       "(--listen-db) or poll",
                       db->masked);
  if (!oq_db_traits(db)->listen_notify)
    return oq__db_fail(db, OQ_ERR_CONFIG, NULL,
                       "%s has no LISTEN/NOTIFY; poll instead",
                       db->engine == OQ_ENGINE_COCKROACH
                           ? "CockroachDB"
                           : "this connection (" OQ_TRAITS_ENV ")");
  char *ident =
      db->conn ? PQescapeIdentifier(db->conn, channel, strlen(channel)) : NULL;
  if (!ident)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  char sql[256];
  snprintf(sql, sizeof sql, "LISTEN %s", ident);
  PQfreemem(ident);
  return oq__db_simple(db, sql);
}

oq_err oq_db_wait_notify(oq_db *db, int timeout_ms, int *notified)
{
  return oq__db_notifies(db, timeout_ms, NULL, NULL, notified);
}

oq_err oq__db_notifies(oq_db *db, int timeout_ms, oq__notify_fn fn, void *ud,
                       int *notified)
{
  *notified = 0;
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  for (int round = 0; round < 2; round++) {
    if (!PQconsumeInput(db->conn))
      return oq__db_fail(db, OQ_ERR_CONN, NULL,
                         "connection to %s lost while waiting: %s", db->masked,
                         PQerrorMessage(db->conn));
    PGnotify *n;
    while ((n = PQnotifies(db->conn)) != NULL) {
      *notified = 1;
      if (fn)
        fn(ud, n->relname, n->extra ? n->extra : "");
      PQfreemem(n);
    }
    if (*notified || round == 1 || timeout_ms <= 0)
      return OQ_OK;
    struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};
    if (pfd.fd < 0)
      return oq__db_fail(db, OQ_ERR_CONN, NULL, "no socket for %s", db->masked);
    if (poll(&pfd, 1, timeout_ms) <= 0)
      return OQ_OK; /* timeout or EINTR: the caller loops */
  }
  return OQ_OK;
}

oq_err oq_db_exec(oq_db *db, const char *sql, int nparams,
                  const char *const *params, long *affected)
{
  return run(db, sql, nparams, params, NULL, NULL, affected);
}

oq_err oq_db_query(oq_db *db, const char *sql, int nparams,
                   const char *const *params, oq_row_fn fn, void *ud)
{
  return run(db, sql, nparams, params, fn, ud, NULL);
}

oq_err oq__db_simple(oq_db *db, const char *sql)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  oq_err be = flush_begin(db);
  if (be != OQ_OK)
    return be;
  bool timed_out = false;
  PGresult *res = exec_simple(db, sql, &timed_out);
  if (timed_out)
    return deadline_passed(db, "statement failed");
  oq_err e = OQ_OK;
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    e = fail_from_result(db, res, "statement failed");
  PQclear(res);
  return e;
}

/* True once the policy says stop re-running after `attempt` restarts. */
static bool policy_exhausted(const oq_retry_policy *p, int attempt,
                             uint64_t start_ms)
{
  if (p->max_attempts > 0 && attempt > p->max_attempts)
    return true;
  if (p->max_total_ms > 0) {
    uint64_t now = p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
    if (now - start_ms >= (uint64_t)p->max_total_ms)
      return true;
  }
  return false;
}

static uint64_t policy_now(const oq_retry_policy *p)
{
  return p->now_ms ? p->now_ms(p->ctx) : oq_monotonic_ms();
}

oq_err oq__db_query_prepared(oq_db *db, const char *sql, int nparams,
                             const char *const *params, oq_row_fn fn, void *ud,
                             long *affected)
{
  return run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                   true);
}

static oq_err query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected, bool prepared)
{
  uint64_t start = policy_now(&db->retry);
  for (int attempt = 1;; attempt++) {
    oq_err e = run_typed(db, sql, nparams, NULL, params, fn, ud, affected, NULL,
                         prepared);
    if (e != OQ_ERR_RETRY)
      return e;
    if (policy_exhausted(&db->retry, attempt, start))
      return oq__db_fail(db, OQ_ERR_RETRY, db->sqlstate,
                         "gave up after %d restarts (SQLSTATE %s): %s", attempt,
                         db->sqlstate, db->errmsg);
    db->restarts++;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}

oq_err oq__db_query_retry(oq_db *db, const char *sql, int nparams,
                          const char *const *params, oq_row_fn fn, void *ud,
                          long *affected)
{
  return query_retry(db, sql, nparams, params, fn, ud, affected, false);
}

oq_err oq__db_query_prepared_retry(oq_db *db, const char *sql, int nparams,
                                   const char *const *params, oq_row_fn fn,
                                   void *ud, long *affected)
{
  return query_retry(db, sql, nparams, params, fn, ud, affected, true);
}

/*
 * COMMIT through the simple protocol. An aborted transaction "commits" as
 * ROLLBACK, which is a failure. No answer means the outcome is unknown.
 */
static oq_err commit(oq_db *db)
{
  if (db->begin_pending) { /* the transaction ran no statement */
    db->begin_pending = false;
    return OQ_OK;
  }
  bool timed_out = false;
  PGresult *res = exec_simple(db, "COMMIT", &timed_out);
  if (timed_out) {
    deadline_passed(db, "COMMIT");
    return oq__db_fail(db, OQ_ERR_AMBIGUOUS, NULL, "COMMIT outcome unknown: %s",
                       db->errmsg);
  }
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  oq_err e = OQ_OK;
  if (st == PGRES_COMMAND_OK) {
    if (strcmp(PQcmdStatus(res), "ROLLBACK") == 0)
      e = oq__db_fail(db, OQ_ERR_SQL, NULL,
                      "COMMIT rolled back: the transaction had failed");
  } else {
    e = fail_from_result(db, res, "COMMIT failed");
    if (e == OQ_ERR_CONN)
      e = oq__db_fail(db, OQ_ERR_AMBIGUOUS, db->sqlstate,
                      "COMMIT outcome unknown: %s", db->errmsg);
  }
  PQclear(res);
  return e;
}

static void rollback_quietly(oq_db *db)
{
  db->begin_pending = false;
  if (db->conn && PQstatus(db->conn) == CONNECTION_OK &&
      PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
    bool timed_out = false;
    PGresult *res = exec_simple(db, "ROLLBACK", &timed_out);
    PQclear(res);
  }
}

oq_err oq_db_transact(oq_db *db, oq_tx_fn fn, void *ud)
{
  uint64_t start = policy_now(&db->retry);
  for (int attempt = 1;; attempt++) {
    oq__db_clear(db);
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
      return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                         db->masked);
    /* sent with fn's first statement, unless raw libpq may come first */
    db->begin_pending = true;
    oq_err e = db->raw_handed_out ? flush_begin(db) : OQ_OK;
    if (e != OQ_OK)
      return e;
    e = fn(db, ud);
    if (e == OQ_OK) {
      e = commit(db);
      if (e == OQ_OK)
        return OQ_OK;
    } else {
      /* keep fn's error details; ROLLBACK must not overwrite them */
      bool restart = e == OQ_ERR_RETRY || oq__sqlstate_is_restart(db->sqlstate);
      rollback_quietly(db);
      if (!restart)
        return e;
      e = OQ_ERR_RETRY;
    }
    if (e != OQ_ERR_RETRY)
      return e;
    rollback_quietly(db);
    if (policy_exhausted(&db->retry, attempt, start))
      return oq__db_fail(db, OQ_ERR_RETRY, db->sqlstate,
                         "transaction gave up after %d restarts: %s", attempt,
                         db->errmsg);
    db->restarts++;
    oq__policy_sleep(&db->retry,
                     oq_backoff_delay_ms(&db->retry, attempt, &db->rng));
  }
}

oq_err oq__db_prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols)
{
  return prepare_once(db, sql, nparams, types, name, namelen, ncols,
                      "prepare failed");
}

/* Ask the server how many columns prepared statement `name` returns: a
 * round trip, once per statement and connection, for the pipelines. */
static oq_err describe_cols(oq_db *db, const char *name, int *cols)
{
  bool timed_out = false;
  PGresult *res = NULL;
  if (PQsendDescribePrepared(db->conn, name))
    res = await_result(db, &timed_out);
  if (timed_out)
    return deadline_passed(db, "describe failed");
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
    e = fail_from_result(db, res, "describe failed");
    /* prepared a round trip ago, gone now: a transaction pooler */
    if (e != OQ_ERR_CONN &&
        oq__sqlstate_is(db->sqlstate, OQ__SQLSTATE_INVALID_STATEMENT_NAME)) {
      oq__db_vanished(db);
      e = lost_prepared(db);
    }
  } else {
    *cols = PQnfields(res);
  }
  PQclear(res);
  return e;
}

/*
 * Parse sql as the unnamed statement and describe it, in one pipeline (one
 * Sync): behind a transaction pooler both messages then reach the same
 * server connection, which separate round trips do not promise. *nparams
 * and *ncols (each may be NULL) get its parameter and column counts.
 * Nothing in sql runs. Called for the start-up check of a statement
 * (oq_stmt_check) and, through a pooler, once per statement and
 * connection for the pipelines' column counts (prepare_once).
 */
oq_err oq__db_describe_unnamed(oq_db *db, const char *sql, int nparams,
                               const unsigned int *types, int *nparams_out,
                               int *ncols_out, const char *what)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  oq_err e = flush_begin(db);
  if (e != OQ_OK)
    return e;
  if (!PQenterPipelineMode(db->conn))
    return fail_from_result(db, NULL, what);
  if (!PQsendPrepare(db->conn, "", sql, nparams, (const Oid *)types) ||
      !PQsendDescribePrepared(db->conn, "") || !PQpipelineSync(db->conn)) {
    give_up(db);
    return OQ_ERR_CONN;
  }
  bool timed_out = false;
  PGresult *parsed = await_result(db, &timed_out);
  PGresult *described = db->conn ? await_result(db, &timed_out) : NULL;
  if (!db->conn) {
    PQclear(parsed);
    PQclear(described);
    return timed_out ? deadline_passed(db, what) : db->last;
  }
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  bool synced = false;
  while (!synced && wait_readable(db, until, &timed_out)) {
    PGresult *r = PQgetResult(db->conn);
    if (!r && PQstatus(db->conn) == CONNECTION_BAD)
      break;
    synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
  }
  if (!synced || !PQexitPipelineMode(db->conn)) {
    PQclear(parsed);
    PQclear(described);
    give_up(db);
    return OQ_ERR_CONN;
  }
  if (!parsed || PQresultStatus(parsed) != PGRES_COMMAND_OK) {
    e = fail_from_result(db, parsed, what);
    parsed = NULL; /* fail_from_result does not clear it */
  } else if (!described || PQresultStatus(described) != PGRES_COMMAND_OK) {
    e = fail_from_result(db, described, what);
  } else {
    if (nparams_out)
      *nparams_out = PQnparams(described);
    if (ncols_out)
      *ncols_out = PQnfields(described);
  }
  PQclear(parsed);
  PQclear(described);
  return e;
}

/* Through a pooler: no name (the statement runs unnamed, its Parse in the
 * same message group as its Bind); the cache keeps the column count a
 * pipeline needs, found once per statement and connection. */
static oq_err prepare_unnamed(oq_db *db, const char *sql, int nparams,
                              const unsigned int *types, char *name, int *ncols,
                              const char *what)
{
  name[0] = '\0';
  if (!ncols)
    return OQ_OK;
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++)
    if (db->prepared[i] && db->prepared_cols[i] >= 0 &&
        strcmp(db->prepared[i], sql) == 0) {
      *ncols = db->prepared_cols[i];
      return OQ_OK;
    }
  int cols = -1;
  oq_err e =
      oq__db_describe_unnamed(db, sql, nparams, types, NULL, &cols, what);
  if (e != OQ_OK)
    return e;
  *ncols = cols;
  int slot = (int)(db->prepared_next++ % OQ__DB_PREPARED_MAX);
  free(db->prepared[slot]);
  db->prepared[slot] = strdup(sql); /* out of memory: described again */
  db->prepared_cols[slot] = cols;
  return OQ_OK;
}

/* A statement we had prepared is gone before its Bind (26000) though
 * nothing of ours dropped it: a transaction pooler sent the Bind to
 * another server connection. Run unnamed from now on. Expected once per
 * connection behind a transaction pooler (debug); a warning when
 * detect_pooler had not seen one. */
void oq__db_vanished(oq_db *db)
{
  if (db->pooled_seen)
    return;
  db->pooled_seen = true;
  bool known = db->pooled;
  db->pooled = true;
  OQ_LOG(known ? OQ_LOG_DEBUG : OQ_LOG_WARN, NULL, NULL,
         "a prepared statement vanished between Parse and Bind on %s: a "
         "transaction-pooling proxy (pgbouncer pool_mode=transaction) is in "
         "the way; this connection runs unnamed statements from now on",
         db->masked);
}

/* what: the failure's wording (a statement that is run at once fails as
 * "query failed", whether its Parse or its Execute met the error). */
static oq_err prepare_once(oq_db *db, const char *sql, int nparams,
                           const unsigned int *types, char *name,
                           size_t namelen, int *ncols, const char *what)
{
  if (db->pooled_seen)
    return prepare_unnamed(db, sql, nparams, types, name, ncols, what);
  int slot = -1;
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++) {
    if (db->prepared[i] && strcmp(db->prepared[i], sql) == 0) {
      prepared_name(db, i, name, namelen);
      db->prepared_last = i;
      if (ncols && db->prepared_cols[i] < 0) {
        oq_err e = describe_cols(db, name, &db->prepared_cols[i]);
        if (e != OQ_OK)
          return e;
      }
      if (ncols)
        *ncols = db->prepared_cols[i];
      return OQ_OK;
    }
    if (!db->prepared[i] && slot < 0)
      slot = i;
  }
  if (slot < 0 && db->pooled) {
    /* full, through a pooler: a DEALLOCATE may reach another server
     * connection than the statement, so a name is never given to other
     * SQL: new names for all (the old ones stay behind where they are) */
    oq__db_forget_prepared(db);
    slot = 0;
  }
  if (slot < 0) {
    /* full: drop one, round robin, never the one named last (a pipeline
     * names its two statements just before sending them) */
    slot = (int)(db->prepared_next++ % OQ__DB_PREPARED_MAX);
    if (slot == db->prepared_last)
      slot = (int)(db->prepared_next++ % OQ__DB_PREPARED_MAX);
    char sql_dealloc[64] = "DEALLOCATE ";
    prepared_name(db, slot, sql_dealloc + strlen(sql_dealloc),
                  sizeof sql_dealloc - strlen(sql_dealloc));
    oq_err e = oq__db_simple(db, sql_dealloc);
    if (e != OQ_OK &&
        !oq__sqlstate_is(db->sqlstate, OQ__SQLSTATE_INVALID_STATEMENT_NAME))
      return e; /* 26000: already gone, the slot is free all the same */
    free(db->prepared[slot]);
    db->prepared[slot] = NULL;
  }
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  prepared_name(db, slot, name, namelen);
  bool timed_out = false;
  PGresult *res = NULL;
  if (PQsendPrepare(db->conn, name, sql, nparams, (const Oid *)types))
    res = await_result(db, &timed_out);
  if (timed_out)
    return deadline_passed(db, what);
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
    e = fail_from_result(db, res, what);
    /* only 42P05 (a name of ours left on the server) is ours to fix: a
     * 0A000 from Parse is a statement the server cannot run at all, which
     * no retry mends */
    if (e != OQ_ERR_CONN &&
        oq__sqlstate_is(db->sqlstate, OQ__SQLSTATE_DUPLICATE_PREPARED))
      e = lost_prepared(db);
  }
  PQclear(res);
  int cols = -1;
  if (e == OQ_OK && ncols)
    e = describe_cols(db, name, &cols);
  if (e == OQ_OK) {
    db->prepared_last = slot;
    db->prepared_cols[slot] = cols;
    if (ncols)
      *ncols = cols;
    db->prepared[slot] = strdup(sql);
    if (!db->prepared[slot])
      e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  }
  return e;
}
