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
 */
#include "oq_test.h"

#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
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
  cutproxy_stop(px);

  standalone(direct);
  oq_db_close(direct);
  printf("PASS\n");
  return 0;
}
