/*
 * db_conn.c: the connection (oq_db): opening, closing and reconnecting it,
 * the error details every module reports through (one setter,
 * oq__db_fail), the round trip within the deadline (send, await, the
 * owed BEGIN sent alone), and LISTEN/NOTIFY. With db_pipeline.c, db_prepared.c
 * and db_tx.c, the only code that talks to libpq (db_state.h: the connection's
 * states).
 *
 * Terms: see db.h (restart, ambiguous commit). A connection is "bad" once
 * libpq says CONNECTION_BAD; any error on a bad connection is OQ_ERR_CONN
 * (before COMMIT) or OQ_ERR_AMBIGUOUS (during COMMIT).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_state.h"
#include "test_hooks.h"

/* how late an answer must be before a wait asks oq_db_set_give_up's
 * function, and how often it asks then */
#define GIVE_UP_AFTER_MS 1000
#define GIVE_UP_POLL_MS 100

void oq__db_drop(oq_db *db)
{
  PQfinish(db->conn);
  db->conn = NULL;
  db->link = OQ__DB_CLOSED;
}

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

bool oq_db_sqlstate_is(const oq_db *db, oq_sqlstate code)
{
  return db && oq__sqlstate_is(db->sqlstate, code);
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
int oq_db_connected(const oq_db *db)
{
  return db && db->conn && db->link == OQ__DB_OPEN &&
         PQstatus(db->conn) == CONNECTION_OK;
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
  if (db->route == OQ__DB_POOLER_UNNAMED)
    return; /* known since a statement vanished: stays so */
  db->route = OQ__DB_DIRECT;
  if (db->engine != OQ_ENGINE_POSTGRES)
    return;
  bool timed_out = false;
  PGresult *res = oq__db_exec_simple(db, "SELECT pg_backend_pid()", &timed_out);
  if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
      db->conn) {
    long pid = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    if (pid != (long)PQbackendPID(db->conn))
      db->route = OQ__DB_POOLER;
  }
  PQclear(res); /* a failure here shows again on the first statement */
  if (db->route == OQ__DB_POOLER)
    OQ_LOG(OQ_LOG_DEBUG, NULL, NULL,
           "%s is reached through a connection pooler (the server backend "
           "is not the one announced): no session state",
           db->masked);
}

bool oq_db_pooled(const oq_db *db)
{
  return db && db->route != OQ__DB_DIRECT;
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

/* One host list of a conninfo ("a,b,c"), split in place. */
#define HOSTS_MAX 16
typedef struct host_list {
  char buf[1024];
  const char *item[HOSTS_MAX];
  int n;
} host_list;

static void hosts_split(host_list *l, const char *v)
{
  l->n = 0;
  if (!v || strlen(v) >= sizeof l->buf)
    return;
  snprintf(l->buf, sizeof l->buf, "%s", v);
  char *p = l->buf;
  for (;;) {
    if (l->n == HOSTS_MAX) {
      l->n = 0; /* more than we reorder: left as written */
      return;
    }
    l->item[l->n++] = p;
    char *comma = strchr(p, ',');
    if (!comma)
      return;
    *comma = '\0';
    p = comma + 1;
  }
}

/* l's items from `first` on, then the ones before it, into out. */
static void hosts_rotated(const host_list *l, int first, char *out, size_t len)
{
  size_t pos = 0;
  out[0] = '\0';
  for (int k = 0; k < l->n && pos < len; k++)
    pos += (size_t)snprintf(out + pos, len - pos, "%s%s", k ? "," : "",
                            l->item[(first + k) % l->n]);
}

/* The host list a connect goes through, rotated so that the one that
 * answered last comes first (oq_db_opts.host_hint): libpq tries the hosts
 * in order and spends connect_timeout on each that does not answer, so
 * after a failover whose old primary went silent every connect would
 * wait it out there before reaching the new one. Only where one host
 * qualifies (target_session_attrs read-write or primary), so the order a
 * user gave for "any" or a standby still holds. */
typedef struct host_order {
  host_list host, hostaddr, port;
  int n;     /* hosts in the list; 0: not reordered */
  int first; /* the original index of the first one tried */
  char host_v[1024], hostaddr_v[1024], port_v[1024];
} host_order;

static void host_order_plan(oq_db *db, const PQconninfoOption *parsed,
                            host_order *h)
{
  memset(h, 0, sizeof *h);
  const char *host = NULL, *hostaddr = NULL, *port = NULL, *tsa = NULL;
  for (const PQconninfoOption *o = parsed; o->keyword; o++) {
    if (!o->val)
      continue;
    if (strcmp(o->keyword, "host") == 0)
      host = o->val;
    else if (strcmp(o->keyword, "hostaddr") == 0)
      hostaddr = o->val;
    else if (strcmp(o->keyword, "port") == 0)
      port = o->val;
    else if (strcmp(o->keyword, "target_session_attrs") == 0)
      tsa = o->val;
  }
  if (!tsa || (strcmp(tsa, "read-write") != 0 && strcmp(tsa, "primary") != 0))
    return;
  hosts_split(&h->host, host);
  hosts_split(&h->hostaddr, hostaddr);
  hosts_split(&h->port, port);
  int n = h->host.n > h->hostaddr.n ? h->host.n : h->hostaddr.n;
  if (n < 2)
    return;
  unsigned first = db->opts.host_hint
                       ? __atomic_load_n(db->opts.host_hint, __ATOMIC_RELAXED)
                       : db->host_first;
  h->n = n;
  /* a list of one (a port for all hosts) stays as it is */
  h->first = first < (unsigned)n ? (int)first : 0;
}

/* The original index of the host conn is on (connected, or trying it
 * while it connects: libpq's PQhost and PQport name the current one);
 * -1 when it is none of h's. */
static int host_order_index(const host_order *h, PGconn *conn)
{
  const char *host = PQhost(conn), *port = PQport(conn);
  const char *haddr = PQhostaddr(conn);
  for (int k = 0; k < h->n; k++) {
    int i = (h->first + k) % h->n;
    bool same = true;
    if (h->host.n == h->n)
      same = host && strcmp(host, h->host.item[i]) == 0;
    else if (h->hostaddr.n == h->n)
      same = haddr && strcmp(haddr, h->hostaddr.item[i]) == 0;
    if (same && h->port.n == h->n)
      same = port && strcmp(port, h->port.item[i]) == 0;
    if (same)
      return i;
  }
  return -1;
}

/* After a connect through a reordered list: remember which host answered
 * (its original index), for this handle and the shared hint. */
static void host_order_learn(oq_db *db, const host_order *h)
{
  if (!h->n || !db->conn)
    return;
  int i = host_order_index(h, db->conn);
  if (i < 0)
    return;
  db->host_first = (unsigned)i;
  if (db->opts.host_hint)
    __atomic_store_n(db->opts.host_hint, (unsigned)i, __ATOMIC_RELAXED);
}

/* Put h's lists, rotated to start at original index `first`, into vals
 * (where keys name them). */
static void host_order_apply(host_order *h, int first, const char **keys,
                             const char **vals)
{
  h->first = first;
  if (h->host.n == h->n)
    hosts_rotated(&h->host, first, h->host_v, sizeof h->host_v);
  if (h->hostaddr.n == h->n)
    hosts_rotated(&h->hostaddr, first, h->hostaddr_v, sizeof h->hostaddr_v);
  if (h->port.n == h->n)
    hosts_rotated(&h->port, first, h->port_v, sizeof h->port_v);
  for (int k = 0; keys[k]; k++) {
    if (strcmp(keys[k], "host") == 0 && h->host_v[0])
      vals[k] = h->host_v;
    if (strcmp(keys[k], "hostaddr") == 0 && h->hostaddr_v[0])
      vals[k] = h->hostaddr_v;
    if (strcmp(keys[k], "port") == 0 && h->port_v[0])
      vals[k] = h->port_v;
  }
}

/*
 * Connect through a reordered multi-host list (host_order), leaving a
 * host that has not answered within HOST_SILENT_MS for the next: libpq's
 * connect_timeout cannot go below 2 s and is spent on each silent host in
 * turn, which after a failover is most of the time to resume. Each host
 * gets that second once (a host that refuses, or answers as a standby,
 * libpq leaves at once by itself); if none connected, one ordinary
 * connect with the full connect_timeout follows, so a server merely slow
 * to accept (a fork storm, exhaustion) is still reached. NULL: out of
 * memory.
 */
#define HOST_SILENT_MS 1000
static PGconn *connect_hosts(host_order *h, const char **keys,
                             const char **vals)
{
  int start = h->first;
  for (int tries = 0; tries < h->n; tries++) {
    host_order_apply(h, start, keys, vals);
    PGconn *c = PQconnectStartParams(keys, vals, 0);
    if (!c || PQstatus(c) == CONNECTION_BAD)
      return c;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    int cur = -2;
    uint64_t since = oq_monotonic_ms();
    for (;;) {
      if (st == PGRES_POLLING_OK || st == PGRES_POLLING_FAILED)
        return c; /* connected, or every host refused: libpq says why */
      int i = host_order_index(h, c);
      uint64_t now = oq_monotonic_ms();
      if (i != cur) { /* libpq moved on to the next host by itself */
        cur = i;
        since = now;
      }
      if (now - since >= HOST_SILENT_MS)
        break;
      struct pollfd pfd = {.fd = PQsocket(c),
                           .events =
                               st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
      int wait = (int)(HOST_SILENT_MS - (now - since));
      int r = poll(&pfd, 1, wait > 100 ? 100 : wait);
      if (r < 0 && errno != EINTR)
        return c; /* libpq reports the socket's state */
      if (r > 0)
        st = PQconnectPoll(c); /* only when ready: it reads SO_ERROR */
    }
    PQfinish(c);
    if (cur < 0)
      break;
    start = (cur + 1) % h->n;
  }
  host_order_apply(h, h->first, keys, vals);
  return PQconnectdbParams(keys, vals, 0);
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
  host_order order;
  host_order_plan(db, parsed, &order);
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
  /* with a deadline: half of it, from libpq's minimum of 2 s up to the
   * default 5 s. libpq spends connect_timeout on each host of a multi-host
   * list in turn, so after a failover every connect pays it once on the
   * dead old primary when its address goes silent; the heartbeat must get
   * past that and reach the new primary well within the session expiry,
   * and a long statement deadline (an executor's) is no reason to wait
   * longer for a host that does not answer. */
  if (db->opts.connect_timeout_s <= 0 && db->opts.deadline_ms > 0) {
    connect_s = db->opts.deadline_ms / 2000;
    connect_s = connect_s < 2 ? 2 : connect_s > 5 ? 5 : connect_s;
  }
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
  db->conn = order.n ? connect_hosts(&order, keys, vals)
                     : PQconnectdbParams(keys, vals, 0);
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
    oq__db_drop(db);
    return code;
  }
  db->link = OQ__DB_OPEN;
  host_order_learn(db, &order);
  PQsetNoticeProcessor(db->conn, on_notice, NULL);
  db->engine = oq__dialect_detect(PQparameterStatus(db->conn, "crdb_version"));
  /* xorshift64: a new nonce per connection */
  db->rng ^= db->rng << 13;
  db->rng ^= db->rng >> 7;
  db->rng ^= db->rng << 17;
  db->prep.nonce = (unsigned)(db->rng >> 32);
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
    oq__db_drop(db);
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
        e == OQ_ERR_NOMEM || oq__db_given_up(db))
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
oq_err oq__db_fail_result(oq_db *db, PGresult *res, const char *what)
{
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  const char *prim =
      res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  const char *msg = prim ? prim : PQerrorMessage(db->conn);
  oq_err code = oq__sqlstate_classify(state);
  if (db->link == OQ__DB_CLOSED_BY_COPY) {
    db->link = OQ__DB_CLOSED;
    return oq__db_fail(
        db, OQ_ERR_SQL, oq_sqlstate_code(OQ_SQLSTATE_FEATURE_NOT_SUPPORTED),
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
  if (oq__sqlstate_is(state, OQ_SQLSTATE_READ_ONLY_TRANSACTION)) {
    db->link = OQ__DB_READ_ONLY;
    return oq__db_fail(db, code, state,
                       "%s: %s (%s takes no writes: a read-only server or "
                       "a demoted primary; list every host in --db with "
                       "target_session_attrs=read-write to reach the one "
                       "that does)",
                       what, msg, db->masked);
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
PGresult *oq__db_await(oq_db *db, bool *timed_out)
{
  *timed_out = false;
  uint64_t until =
      db->opts.deadline_ms > 0 ? oq_monotonic_ms() + db->opts.deadline_ms : 0;
  PGresult *kept = NULL;
  for (;;) {
    /* a failure other than the deadline: PQgetResult reports it */
    if (!oq__db_wait_readable(db, until, timed_out) && *timed_out) {
      PQclear(kept);
      oq__db_drop(db);
      return NULL;
    }
    PGresult *res = PQgetResult(db->conn);
    if (!res)
      break;
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      /* libpq answers a COPY state until its data is sent or read, so
       * this loop would never end: give the connection up (the server
       * rolls the transaction back) and say why (oq__db_fail_result) */
      PQclear(res);
      PQclear(kept);
      oq__db_drop(db);
      db->link = OQ__DB_CLOSED_BY_COPY;
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
oq_err oq__db_deadline_passed(oq_db *db, const char *what)
{
  return oq__db_fail(db, OQ_ERR_CONN, NULL,
                     "%s: no answer from %s within the %d ms deadline; the "
                     "connection was closed",
                     what, db->masked, db->opts.deadline_ms);
}

/* Send sql (simple protocol) and collect its answer within the deadline.
 * NULL with *timed_out when the deadline passed (the connection is gone). */
PGresult *oq__db_exec_simple(oq_db *db, const char *sql, bool *timed_out)
{
  *timed_out = false;
  db->statements++;
  if (!PQsendQuery(db->conn, sql))
    return NULL;
  return oq__db_await(db, timed_out);
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
long oq__db_affected_rows(PGresult *res)
{
  const char *t = PQcmdTuples(res);
  return (t && *t) ? strtol(t, NULL, 10) : -1;
}

/* Close a connection left in an unusable state, keeping libpq's reason
 * (db_tx.c's run_typed reports it as a lost connection). */
void oq__db_give_up(oq_db *db)
{
  oq__db_fail(db, OQ_ERR_CONN, NULL, "connection to %s lost: %s", db->masked,
              PQerrorMessage(db->conn));
  oq__db_drop(db);
}

void oq_db_set_give_up(oq_db *db, bool (*fn)(void *ud), void *ud)
{
  if (!db)
    return;
  db->give_up = fn;
  db->give_up_ud = ud;
}

bool oq__db_given_up(oq_db *db)
{
  return db && db->give_up && db->give_up(db->give_up_ud);
}

/* Wait (within until_ms, 0: no limit) until a result can be read without
 * blocking. false: the deadline passed or the connection failed. */
bool oq__db_wait_readable(oq_db *db, uint64_t until_ms, bool *timed_out)
{
  uint64_t waited_from = oq_monotonic_ms();
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
    if (db->give_up) {
      /* the caller's answer may stop mattering before the deadline (a
       * lost session): once this answer is GIVE_UP_AFTER_MS late (a
       * server that answers gets to say its piece, e.g. reject an ack),
       * ask every GIVE_UP_POLL_MS, and end the wait as the deadline does */
      if (oq_monotonic_ms() - waited_from >= GIVE_UP_AFTER_MS &&
          db->give_up(db->give_up_ud)) {
        *timed_out = true;
        return false;
      }
      if (wait_ms < 0 || wait_ms > GIVE_UP_POLL_MS)
        wait_ms = GIVE_UP_POLL_MS;
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

oq_err oq_db_listen(oq_db *db, const char *channel)
{
  if (db->route != OQ__DB_DIRECT)
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

static oq_err notifies_or(oq_db *db, int timeout_ms, int wake_fd,
                          oq__notify_fn fn, void *ud, int *notified);

oq_err oq_db_wait_notify_or(oq_db *db, int timeout_ms, int wake_fd,
                            int *notified)
{
  return notifies_or(db, timeout_ms, wake_fd, NULL, NULL, notified);
}

oq_err oq__db_notifies(oq_db *db, int timeout_ms, oq__notify_fn fn, void *ud,
                       int *notified)
{
  return notifies_or(db, timeout_ms, -1, fn, ud, notified);
}

static oq_err notifies_or(oq_db *db, int timeout_ms, int wake_fd,
                          oq__notify_fn fn, void *ud, int *notified)
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
    struct pollfd pfd[2] = {{.fd = PQsocket(db->conn), .events = POLLIN},
                            {.fd = wake_fd, .events = POLLIN}};
    if (pfd[0].fd < 0)
      return oq__db_fail(db, OQ_ERR_CONN, NULL, "no socket for %s", db->masked);
    if (poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms) <= 0)
      return OQ_OK; /* timeout or EINTR: the caller loops */
    if (wake_fd >= 0 && (pfd[1].revents & POLLIN) && !pfd[0].revents)
      return OQ_OK; /* the caller's own event: it reads wake_fd */
  }
  return OQ_OK;
}

oq_err oq__db_simple(oq_db *db, const char *sql)
{
  oq__db_clear(db);
  if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
    return oq__db_fail(db, OQ_ERR_CONN, NULL, "not connected to %s",
                       db->masked);
  oq_err be = oq__db_flush_begin(db);
  if (be != OQ_OK)
    return be;
  bool timed_out = false;
  PGresult *res = oq__db_exec_simple(db, sql, &timed_out);
  if (timed_out)
    return oq__db_deadline_passed(db, "statement failed");
  oq_err e = OQ_OK;
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    e = oq__db_fail_result(db, res, "statement failed");
  PQclear(res);
  return e;
}

/* Send a pending BEGIN on its own (the old way), for the calls that cannot
 * carry it: the simple protocol and the pipelines. */
oq_err oq__db_flush_begin(oq_db *db)
{
  if (db->tx != OQ__DB_TX_BEGIN_OWED)
    return OQ_OK;
  db->tx = OQ__DB_TX_NONE;
  bool timed_out = false;
  PGresult *res = oq__db_exec_simple(db, "BEGIN", &timed_out);
  if (timed_out)
    return oq__db_deadline_passed(db, "BEGIN failed");
  oq_err e = OQ_OK;
  if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
    e = oq__db_fail_result(db, res, "BEGIN failed");
  PQclear(res);
  return e;
}

struct pg_conn *oq_db_pgconn(oq_db *db)
{
  /* raw libpq inside oq_db_transact must run inside its transaction: a
   * BEGIN still waiting for the first statement goes now, and, since the
   * caller may keep this pointer, every later transaction's BEGIN goes at
   * once too */
  db->begin = OQ__DB_BEGIN_AT_ONCE;
  if (db->tx == OQ__DB_TX_BEGIN_OWED && db->conn) {
    oq_err e = oq__db_flush_begin(db);
    (void)e; /* a failed BEGIN means a lost connection: raw calls fail too */
  }
  return db->conn;
}

/* Prepared statements live on the server connection: a new one has none. */
void oq__db_forget_prepared(oq_db *db)
{
  for (int i = 0; i < OQ__DB_PREPARED_MAX; i++) {
    free(db->prep.sql[i]);
    db->prep.sql[i] = NULL;
  }
  /* new names from here: the server may still hold the old ones (a
   * forgotten set after 0A000), or have lost them (26000) */
  db->prep.gen++;
  db->prep.next = 0;
  db->prep.last = -1;
  db->prep.before = -1;
}
