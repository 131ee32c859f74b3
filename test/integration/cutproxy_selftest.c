/*
 * cutproxy_selftest.c: the fault proxy itself, with raw libpq, so that a
 * failing ambiguous-commit test can be blamed on the library, not the proxy.
 *
 * Checks: each cut mode against COMMIT sent by the simple protocol
 * (PQexec), the extended protocol (PQexecParams: unnamed Parse/Bind) and a
 * named prepared statement (Parse before arming, Bind after); that an
 * unarmed proxy and non-COMMIT statements pass untouched; SSLRequest is
 * answered 'N'; large messages relay both ways; drop_all; and the
 * standalone oq_cutproxy binary driven by signals.
 *
 * Blackholes (by application_name, then all connections): a blackholed
 * connection gets no answer, yet the client's kernel sees its data taken
 * (8 MB flushed through a non-blocking socket) and the query never reaches
 * the server; other applications are untouched; a new connection of a
 * blackholed application hangs until its connect_timeout, without a
 * backend; unblackhole closes the blackholed connections on both sides (the
 * backends go away) and new ones work. Cut after a matching statement:
 * simple, extended and prepared, the statement commits, the client sees
 * its connection drop, the result tag is kept; COMMIT does not fire it and
 * it does not fire the COMMIT modes. The standalone binary's control FIFO
 * and SIGTTIN/SIGTTOU.
 */
#include "oq_test.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cutproxy.h"

static char up_host[256];
static int up_port;
static char direct_dsn[1024];

static void find_upstream(const char *dsn)
{
  char *err = NULL;
  PQconninfoOption *opts = PQconninfoParse(dsn, &err);
  if (!opts)
    OQT_FAIL("cannot parse ONCEQ_TEST_DSN: %s", err ? err : "?");
  const char *host = NULL, *hostaddr = NULL, *port = NULL;
  for (PQconninfoOption *o = opts; o->keyword; o++) {
    if (!o->val || !*o->val)
      continue;
    if (strcmp(o->keyword, "host") == 0)
      host = o->val;
    else if (strcmp(o->keyword, "hostaddr") == 0)
      hostaddr = o->val;
    else if (strcmp(o->keyword, "port") == 0)
      port = o->val;
  }
  const char *h = hostaddr ? hostaddr : host;
  if (!h || h[0] == '/' || strchr(h, ',')) {
    fprintf(stderr, "SKIP: the proxy needs a single TCP host in "
                    "ONCEQ_TEST_DSN\n");
    exit(77);
  }
  snprintf(up_host, sizeof up_host, "%s", h);
  up_port = port ? (int)strtol(port, NULL, 10) : 5432;
  PQconninfoFree(opts);
}

/* The direct dsn, re-pointed at the proxy; later keywords win in libpq. */
static PGconn *connect_via(int port, const char *sslmode)
{
  char dsn[1400];
  snprintf(dsn, sizeof dsn,
           "%s host=127.0.0.1 hostaddr=127.0.0.1 port=%d sslmode=%s "
           "gssencmode=disable",
           direct_dsn, port, sslmode);
  PGconn *c = PQconnectdb(dsn);
  if (PQstatus(c) != CONNECTION_OK)
    OQT_FAIL("connect via proxy: %s", PQerrorMessage(c));
  return c;
}

static void must_exec(PGconn *c, const char *sql)
{
  PGresult *r = PQexec(c, sql);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    OQT_FAIL("%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
}

static long rows_with(oq_db *direct, int k)
{
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM t WHERE x = %d", k);
  return oqt_scalar(direct, sql);
}

typedef enum proto { SIMPLE, EXTENDED, PREPARED } proto;
static const char *const proto_name[] = {"simple", "extended", "prepared"};

/* BEGIN; INSERT k; arm; COMMIT (by proto) through the proxy: the COMMIT
 * must fail on the client and land (or not) on the server per mode. */
static void cut_once(cutproxy *px, oq_db *direct, proto pr, cutproxy_mode m,
                     int k)
{
  uint64_t fired0 = cutproxy_fired(px);
  PGconn *c = connect_via(cutproxy_port(px), "disable");
  if (pr == PREPARED) {
    PGresult *r = PQprepare(c, "c1", "COMMIT", 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      OQT_FAIL("prepare: %s", PQerrorMessage(c));
    PQclear(r);
  }
  must_exec(c, "BEGIN");
  char sql[64];
  snprintf(sql, sizeof sql, "INSERT INTO t VALUES (%d)", k);
  must_exec(c, sql);
  cutproxy_arm(px, m);
  PGresult *r = NULL;
  switch (pr) {
  case SIMPLE:
    r = PQexec(c, "  commit ;");
    break;
  case EXTENDED:
    r = PQexecParams(c, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    break;
  case PREPARED:
    r = PQexecPrepared(c, "c1", 0, NULL, NULL, NULL, 0);
    break;
  }
  ExecStatusType st = PQresultStatus(r);
  PQclear(r);
  int bad = PQstatus(c) == CONNECTION_BAD;
  PQfinish(c);
  if (!cutproxy_wait_settled(px, 40000))
    OQT_FAIL("did not settle");
  char res[64];
  cutproxy_commit_result(px, res, sizeof res);
  long landed = rows_with(direct, k);
  printf("proxy %-8s %-18s: client status %s, connection %s, "
         "commit-result=%s, landed rows=%ld\n",
         proto_name[pr], cutproxy_mode_name(m), PQresStatus(st),
         bad ? "bad" : "ok", res[0] ? res : "-", landed);
  ASSERT_NE(st, PGRES_COMMAND_OK);
  ASSERT_EQ(bad, 1);
  ASSERT_EQ(cutproxy_fired(px), fired0 + 1);
  ASSERT_EQ(cutproxy_armed(px), CUTPROXY_NONE);
  if (m == CUTPROXY_CUT_BEFORE_COMMIT) {
    ASSERT_STREQ(res, "");
    ASSERT_EQ(landed, 0);
  } else {
    ASSERT_STREQ(res, "COMMIT");
    ASSERT_EQ(landed, 1);
  }
}

/* Unarmed, and armed but with no COMMIT: everything passes. */
static void pass_through(cutproxy *px, oq_db *direct)
{
  uint64_t fired0 = cutproxy_fired(px);
  PGconn *c = connect_via(cutproxy_port(px), "prefer"); /* SSLRequest: 'N' */
  ASSERT_EQ(PQsslInUse(c), 0);
  must_exec(c, "BEGIN");
  must_exec(c, "INSERT INTO t VALUES (1000)");
  must_exec(c, "COMMIT");
  ASSERT_EQ(rows_with(direct, 1000), 1);

  cutproxy_arm(px, CUTPROXY_CUT_BEFORE_COMMIT);
  must_exec(c, "SELECT 1 AS commit");
  must_exec(c, "SELECT 'COMMIT'");
  must_exec(c, "BEGIN");
  must_exec(c, "INSERT INTO t VALUES (1001)");
  must_exec(c, "SAVEPOINT commit_x");
  must_exec(c, "RELEASE SAVEPOINT commit_x");
  PGresult *r = PQexecParams(c, "SELECT 'commit' || $1", 1, NULL,
                             (const char *const[]){"x"}, NULL, NULL, 0);
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  PQclear(r);
  /* 1 MB each way: a parameter in, a value out. */
  char *big = malloc(1 << 20);
  memset(big, 'y', (1 << 20) - 1);
  big[(1 << 20) - 1] = '\0';
  r = PQexecParams(c, "SELECT length($1::text), repeat('z', 3000000)", 1, NULL,
                   (const char *const[]){big}, NULL, NULL, 0);
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  ASSERT_EQ(strtol(PQgetvalue(r, 0, 0), NULL, 10), (1 << 20) - 1);
  ASSERT_EQ(strlen(PQgetvalue(r, 0, 1)), 3000000);
  PQclear(r);
  free(big);
  ASSERT_EQ(cutproxy_fired(px), fired0);
  ASSERT_EQ(cutproxy_armed(px), CUTPROXY_CUT_BEFORE_COMMIT);
  cutproxy_arm(px, CUTPROXY_NONE);
  must_exec(c, "END");
  ASSERT_EQ(rows_with(direct, 1001), 1);
  ASSERT_EQ(cutproxy_fired(px), fired0);

  /* drop_all cuts live connections; new ones still work. */
  cutproxy_drop_all(px);
  oqt_sleep_ms(300);
  r = PQexec(c, "SELECT 1");
  ExecStatusType st = PQresultStatus(r);
  PQclear(r);
  ASSERT_NE(st, PGRES_TUPLES_OK);
  PQfinish(c);
  c = connect_via(cutproxy_port(px), "disable");
  must_exec(c, "SELECT 1");
  PQfinish(c);
  printf("proxy pass-through, SSLRequest, 1 MB messages, drop_all: ok\n");
}

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connect through the proxy as application `app`, giving up after
 * timeout_s; the connection may be bad (the caller checks). */
static PGconn *try_connect_app(int port, const char *app, int timeout_s)
{
  char dsn[1500];
  snprintf(dsn, sizeof dsn,
           "%s host=127.0.0.1 hostaddr=127.0.0.1 port=%d sslmode=disable "
           "gssencmode=disable application_name=%s connect_timeout=%d",
           direct_dsn, port, app, timeout_s);
  return PQconnectdb(dsn);
}

static PGconn *connect_app(int port, const char *app)
{
  PGconn *c = try_connect_app(port, app, 10);
  if (PQstatus(c) != CONNECTION_OK)
    OQT_FAIL("connect via proxy as %s: %s", app, PQerrorMessage(c));
  return c;
}

/* Backends of application `app` (on any database). */
static long backends_of(oq_db *direct, const char *app)
{
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
           "'%s'",
           app);
  return oqt_scalar(direct, sql);
}

/* Poll until f(px) == want, at most timeout_ms; returns the last value. */
static int wait_bh_now(cutproxy *px, int want, int timeout_ms)
{
  long long end = now_ms() + timeout_ms;
  int v = cutproxy_blackholed_now(px);
  while (v != want && now_ms() < end) {
    oqt_sleep_ms(10);
    v = cutproxy_blackholed_now(px);
  }
  return v;
}

static void wait_backends(oq_db *direct, const char *app, long want,
                          int timeout_ms)
{
  long long end = now_ms() + timeout_ms;
  long v = backends_of(direct, app);
  while (v != want && now_ms() < end) {
    oqt_sleep_ms(50);
    v = backends_of(direct, app);
  }
  if (v != want)
    OQT_FAIL("backends of %s: %ld after %d ms, want %ld", app, v, timeout_ms,
             want);
}

/* Is a reply (or EOF) readable on c's socket within ms? */
static int readable_within(PGconn *c, int ms)
{
  struct pollfd pf = {.fd = PQsocket(c), .events = POLLIN};
  return poll(&pf, 1, ms) > 0;
}

/* Send an 8 MB query on a non-blocking connection and flush it all: a
 * proxy that stopped reading would leave the client's kernel buffers full
 * and the flush pending. Returns how long the flush took (ms). */
static long long send_big_marked(PGconn *c, const char *marker)
{
  size_t big = 8u << 20;
  char *sql = malloc(big + 128);
  ASSERT(sql != NULL);
  int n = snprintf(sql, 128, "SELECT '%s', length('", marker);
  memset(sql + n, 'q', big);
  memcpy(sql + n + big, "')", 3);
  ASSERT_EQ(PQsetnonblocking(c, 1), 0);
  long long t0 = now_ms();
  ASSERT_EQ(PQsendQuery(c, sql), 1);
  int f = 1;
  while ((f = PQflush(c)) == 1 && now_ms() - t0 < 10000) {
    struct pollfd pf = {.fd = PQsocket(c), .events = POLLOUT};
    (void)poll(&pf, 1, 100);
  }
  free(sql);
  if (f != 0)
    OQT_FAIL("8 MB through a blackholed connection: flush %s after %lld ms",
             f == 1 ? "still pending" : "failed", now_ms() - t0);
  return now_ms() - t0;
}

/* After unblackhole: the client side is closed by the proxy. */
static void expect_closed(PGconn *c, const char *what)
{
  if (!readable_within(c, 3000))
    OQT_FAIL("%s: still open 3 s after unblackhole", what);
  int ok = PQconsumeInput(c);
  PGresult *r = NULL;
  int got_ok_result = 0;
  while (ok && !PQisBusy(c) && (r = PQgetResult(c)) != NULL) {
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
      got_ok_result = 1;
    PQclear(r);
  }
  ASSERT_EQ(got_ok_result, 0);
  ASSERT_EQ(PQstatus(c), CONNECTION_BAD);
}

static void blackhole_app(cutproxy *px, oq_db *direct)
{
  int port = cutproxy_port(px);
  PGconn *v = connect_app(port, "cp-bh-victim");
  PGconn *o = connect_app(port, "cp-bh-other");
  must_exec(v, "SELECT 1");
  must_exec(o, "SELECT 1");
  uint64_t total0 = cutproxy_blackholed_total(px);
  cutproxy_blackhole_app(px, "cp-bh-victim");
  ASSERT_EQ(wait_bh_now(px, 1, 2000), 1);
  ASSERT_EQ(cutproxy_blackholed_total(px), total0 + 1);

  long long flush_ms = send_big_marked(v, "cp-bh-marker");
  ASSERT_EQ(readable_within(v, 1000), 0); /* no answer, no EOF */
  ASSERT_EQ(PQstatus(v), CONNECTION_OK);
  ASSERT_EQ(oqt_scalar(direct, "SELECT count(*) FROM pg_stat_activity"
                               " WHERE application_name = 'cp-bh-victim'"
                               " AND query LIKE '%cp-bh-marker%'"),
            0);
  must_exec(o, "SELECT 2"); /* another application is untouched */

  /* a new connection of the blackholed application: no answer, no
   * backend; its connect_timeout ends it */
  long long t0 = now_ms();
  PGconn *n = try_connect_app(port, "cp-bh-victim", 2);
  long long waited = now_ms() - t0;
  ASSERT_EQ(PQstatus(n), CONNECTION_BAD);
  PQfinish(n);
  ASSERT(waited >= 1500);
  ASSERT_EQ(backends_of(direct, "cp-bh-victim"), 1);

  cutproxy_unblackhole(px);
  ASSERT_EQ(wait_bh_now(px, 0, 2000), 0);
  expect_closed(v, "the blackholed connection");
  PQfinish(v);
  wait_backends(direct, "cp-bh-victim", 0, 5000);
  must_exec(o, "SELECT 3");
  PQfinish(o);
  v = connect_app(port, "cp-bh-victim");
  must_exec(v, "SELECT 4");
  PQfinish(v);
  printf("blackhole by application_name: 8 MB taken in %lld ms, no answer, "
         "no backend for a new connection (%lld ms to its timeout), "
         "unblackhole closed it: ok\n",
         flush_ms, waited);
}

static void blackhole_all(cutproxy *px, oq_db *direct)
{
  int port = cutproxy_port(px);
  PGconn *a = connect_app(port, "cp-bh-a");
  PGconn *b = connect_app(port, "cp-bh-b");
  cutproxy_blackhole_all(px);
  ASSERT_EQ(wait_bh_now(px, 2, 2000), 2);
  (void)send_big_marked(a, "cp-bh-all-marker");
  ASSERT_EQ(PQsendQuery(b, "SELECT 'cp-bh-all-b'"), 1);
  ASSERT_EQ(readable_within(a, 500), 0);
  ASSERT_EQ(readable_within(b, 500), 0);
  long long t0 = now_ms();
  PGconn *n = try_connect_app(port, "cp-bh-new", 2);
  long long waited = now_ms() - t0;
  ASSERT_EQ(PQstatus(n), CONNECTION_BAD);
  PQfinish(n);
  ASSERT(waited >= 1500);
  ASSERT_EQ(backends_of(direct, "cp-bh-new"), 0);
  ASSERT_EQ(backends_of(direct, "cp-bh-a"), 1);

  cutproxy_unblackhole(px);
  ASSERT_EQ(wait_bh_now(px, 0, 2000), 0);
  expect_closed(a, "blackholed connection a");
  expect_closed(b, "blackholed connection b");
  PQfinish(a);
  PQfinish(b);
  wait_backends(direct, "cp-bh-a", 0, 5000);
  wait_backends(direct, "cp-bh-b", 0, 5000);
  a = connect_app(port, "cp-bh-a");
  must_exec(a, "SELECT 1");
  PQfinish(a);
  printf("blackhole all: no answers, a new connection hangs to its timeout "
         "(%lld ms), unblackhole closed both: ok\n",
         waited);
}

/* One cut-after-match: the matching UPDATE (by proto) commits, the client
 * loses its connection, the tag is "UPDATE 3"; sum(v) becomes 3 * val. */
static void match_once(cutproxy *px, oq_db *direct, proto pr, int val)
{
  uint64_t fired0 = cutproxy_fired(px);
  PGconn *c = connect_via(cutproxy_port(px), "disable");
  char vs[16];
  snprintf(vs, sizeof vs, "%d", val);
  const char *params[1] = {vs};
  char simple[64];
  snprintf(simple, sizeof simple, "UPDATE m SET v = %d /*cp-match*/", val);
  cutproxy_set_match(px, pr == SIMPLE ? "/*cp-match*/" : "SET v = $1::int");
  if (pr == PREPARED) {
    PGresult *r =
        PQprepare(c, "m1", "UPDATE m SET v = $1::int RETURNING id", 0, NULL);
    ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
  }
  /* not matching: untouched, and a COMMIT does not fire a match */
  cutproxy_arm(px, CUTPROXY_CUT_AFTER_MATCH);
  must_exec(c, "UPDATE m SET v = 0");
  must_exec(c, "BEGIN");
  must_exec(c, "COMMIT");
  ASSERT_EQ(cutproxy_fired(px), fired0);
  PGresult *r = NULL;
  switch (pr) {
  case SIMPLE:
    r = PQexec(c, simple);
    break;
  case EXTENDED:
    r = PQexecParams(c, "UPDATE m SET v = $1::int RETURNING id", 1, NULL,
                     params, NULL, NULL, 0);
    break;
  case PREPARED:
    r = PQexecPrepared(c, "m1", 1, params, NULL, NULL, 0);
    break;
  }
  ExecStatusType st = PQresultStatus(r);
  PQclear(r);
  int bad = PQstatus(c) == CONNECTION_BAD;
  PQfinish(c);
  if (!cutproxy_wait_settled(px, 40000))
    OQT_FAIL("did not settle");
  char res[64];
  cutproxy_commit_result(px, res, sizeof res);
  long sum = oqt_scalar(direct, "SELECT sum(v) FROM m");
  printf("proxy %-8s cut-after-match   : client status %s, connection %s, "
         "result=%s, sum(v)=%ld\n",
         proto_name[pr], PQresStatus(st), bad ? "bad" : "ok",
         res[0] ? res : "-", sum);
  ASSERT_NE(st, PGRES_COMMAND_OK);
  ASSERT_NE(st, PGRES_TUPLES_OK);
  ASSERT_EQ(bad, 1);
  ASSERT_EQ(cutproxy_fired(px), fired0 + 1);
  ASSERT_EQ(cutproxy_armed(px), CUTPROXY_NONE);
  ASSERT_STREQ(res, "UPDATE 3");
  ASSERT_EQ(sum, 3L * val);
}

static void cut_after_match(cutproxy *px, oq_db *direct)
{
  oqt_exec(direct, "CREATE TABLE m (id int, v int)");
  oqt_exec(direct, "INSERT INTO m VALUES (1, 0), (2, 0), (3, 0)");
  match_once(px, direct, SIMPLE, 7);
  match_once(px, direct, EXTENDED, 8);
  match_once(px, direct, PREPARED, 9);
  /* the COMMIT modes do not fire on a matching statement */
  uint64_t fired0 = cutproxy_fired(px);
  cutproxy_set_match(px, "SET v = $1::int");
  cutproxy_arm(px, CUTPROXY_CUT_BEFORE_COMMIT);
  PGconn *c = connect_via(cutproxy_port(px), "disable");
  PGresult *r = PQexecParams(c, "UPDATE m SET v = $1::int", 1, NULL,
                             (const char *const[]){"10"}, NULL, NULL, 0);
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  ASSERT_EQ(cutproxy_armed(px), CUTPROXY_CUT_BEFORE_COMMIT);
  cutproxy_arm(px, CUTPROXY_NONE);
  cutproxy_set_match(px, NULL);
  PQfinish(c);
  ASSERT_EQ(cutproxy_fired(px), fired0);
  printf("cut-after-match (simple, extended, prepared), not on COMMIT, "
         "no COMMIT mode on it: ok\n");
}

/* Read stdout lines of the standalone proxy until one contains needle
 * (at most 50 lines); fails on EOF. */
static void expect_line(FILE *f, const char *needle, char *line, size_t len)
{
  for (int i = 0; i < 50; i++) {
    if (!fgets(line, (int)len, f))
      OQT_FAIL("oq_cutproxy: EOF while waiting for '%s'", needle);
    if (strstr(line, needle))
      return;
  }
  OQT_FAIL("oq_cutproxy: no line with '%s' in 50", needle);
}

static void fifo_cmd(const char *fifo, const char *cmd)
{
  int fd = open(fifo, O_WRONLY | O_CLOEXEC);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, cmd, strlen(cmd)), (long long)strlen(cmd));
  close(fd);
}

/* The standalone binary with a control FIFO: blackhole-app, unblackhole,
 * match + arm match; then SIGTTIN (all, no --blackhole-app) and SIGTTOU. */
static void standalone_control(oq_db *direct)
{
  char fifo[256];
  snprintf(fifo, sizeof fifo, "/tmp/oq-cutproxy-selftest-%d.fifo",
           (int)getpid());
  (void)unlink(fifo);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  char upstream[300];
  snprintf(upstream, sizeof upstream, "%s:%d", up_host, up_port);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(OQ_CUTPROXY_BIN, OQ_CUTPROXY_BIN, "--listen", "127.0.0.1:0",
          "--upstream", upstream, "--control", fifo, "--match",
          "SET v = $1::int", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  FILE *f = fdopen(out[0], "r");
  char line[512];
  int port = 0;
  ASSERT(fgets(line, sizeof line, f) != NULL);
  ASSERT(sscanf(line, "cutproxy: listening on 127.0.0.1:%d", &port) == 1);

  PGconn *v = connect_app(port, "cp-fifo-victim");
  fifo_cmd(fifo, "blackhole-app cp-fifo-victim\n");
  expect_line(f, "cutproxy: ok blackhole-app cp-fifo-victim", line,
              sizeof line);
  expect_line(f, "cutproxy: blackholed now 1 total 1", line, sizeof line);
  ASSERT_EQ(PQsendQuery(v, "SELECT 1"), 1);
  ASSERT_EQ(readable_within(v, 500), 0);
  fifo_cmd(fifo, "unblackhole\n");
  expect_line(f, "cutproxy: ok unblackhole", line, sizeof line);
  expect_line(f, "cutproxy: blackholed now 0 total 1", line, sizeof line);
  expect_closed(v, "the FIFO-blackholed connection");
  PQfinish(v);

  fifo_cmd(fifo, "arm match\nbogus\n");
  expect_line(f, "cutproxy: ok arm match", line, sizeof line);
  expect_line(f, "cutproxy: bad command: bogus", line, sizeof line);
  PGconn *c = connect_app(port, "cp-fifo-match");
  PGresult *r = PQexecParams(c, "UPDATE m SET v = $1::int", 1, NULL,
                             (const char *const[]){"11"}, NULL, NULL, 0);
  ASSERT_NE(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  PQfinish(c);
  expect_line(f, "cutproxy: fired cut-after-match (total 1)", line,
              sizeof line);
  ASSERT_CONTAINS(line, "commit-result=UPDATE 3");
  ASSERT_EQ(oqt_scalar(direct, "SELECT sum(v) FROM m"), 33);

  PGconn *a = connect_app(port, "cp-sig-a");
  kill(pid, SIGTTIN);
  expect_line(f, "cutproxy: blackhole all", line, sizeof line);
  expect_line(f, "cutproxy: blackholed now 1 total 2", line, sizeof line);
  kill(pid, SIGTTOU);
  expect_line(f, "cutproxy: unblackhole", line, sizeof line);
  expect_line(f, "cutproxy: blackholed now 0 total 2", line, sizeof line);
  PQfinish(a);

  fifo_cmd(fifo, "stop\n");
  expect_line(f, "cutproxy: ok stop", line, sizeof line);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  fclose(f);
  (void)unlink(fifo);
  printf("standalone oq_cutproxy control FIFO (blackhole-app, unblackhole, "
         "arm match, stop) and SIGTTIN/SIGTTOU: ok\n");
}

/* The standalone binary: start, read its port, cut with SIGUSR2
 * (before) and SIGUSR1 (after), stop with SIGTERM. */
static void standalone(oq_db *direct)
{
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  char upstream[300];
  snprintf(upstream, sizeof upstream, "%s:%d", up_host, up_port);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(OQ_CUTPROXY_BIN, OQ_CUTPROXY_BIN, "--listen", "127.0.0.1:0",
          "--upstream", upstream, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  FILE *f = fdopen(out[0], "r");
  char line[256];
  int port = 0;
  ASSERT(fgets(line, sizeof line, f) != NULL);
  ASSERT(sscanf(line, "cutproxy: listening on 127.0.0.1:%d", &port) == 1);

  int sigs[2] = {SIGUSR2, SIGUSR1};
  for (int i = 0; i < 2; i++) {
    PGconn *c = connect_via(port, "disable");
    must_exec(c, "BEGIN");
    char sql[64];
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES (%d)", 2000 + i);
    must_exec(c, sql);
    kill(pid, sigs[i]);
    ASSERT(fgets(line, sizeof line, f) != NULL); /* "armed ..." */
    ASSERT_CONTAINS(line, i == 0 ? "armed cut-before-commit"
                                 : "armed cut-after-commit");
    PGresult *r = PQexec(c, "COMMIT");
    ASSERT_NE(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    PQfinish(c);
    ASSERT(fgets(line, sizeof line, f) != NULL); /* "fired ..." */
    ASSERT_CONTAINS(line, i == 0 ? "commit-result=-" : "commit-result=COMMIT");
    ASSERT_EQ(rows_with(direct, 2000 + i), i == 0 ? 0 : 1);
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  fclose(f);
  printf("standalone oq_cutproxy (SIGUSR2 before, SIGUSR1 after, SIGTERM): "
         "ok\n");
}

int main(void)
{
  find_upstream(oqt_admin_dsn());
  snprintf(direct_dsn, sizeof direct_dsn, "%s", oqt_fresh_db("cutproxy", 0));
  oq_db *direct = oqt_connect(direct_dsn);
  oqt_exec(direct, "CREATE TABLE t (x int)");

  cutproxy *px = cutproxy_start(up_host, up_port);
  if (!px)
    OQT_FAIL("cutproxy_start failed");
  pass_through(px, direct);
  int k = 1;
  for (int pr = SIMPLE; pr <= PREPARED; pr++)
    for (int m = CUTPROXY_CUT_BEFORE_COMMIT; m <= CUTPROXY_CUT_DURING_COMMIT;
         m++)
      cut_once(px, direct, (proto)pr, (cutproxy_mode)m, k++);
  ASSERT_EQ(cutproxy_fired(px), 9);
  blackhole_app(px, direct);
  blackhole_all(px, direct);
  cut_after_match(px, direct);
  ASSERT_EQ(cutproxy_fired(px), 12);
  cutproxy_stop(px);

  standalone(direct);
  standalone_control(direct);
  oq_db_close(direct);
  printf("PASS\n");
  return 0;
}
