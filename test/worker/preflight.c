/*
 * preflight.c (unit): the worker's start-up checks that need no server:
 * --sql text (empty, transaction control), --exec command resolution
 * through PATH, --http URL parsing. Each failure is exit code 2 with one
 * line naming the problem; a good configuration passes.
 */
#include "oq_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curlpost.h"
#include "preflight.h"

static char err[512];

static void sql_bad(const char *sql, const char *want)
{
  err[0] = '\0';
  int rc = wk_preflight_sql_text(sql, err, sizeof err);
  if (rc != 2)
    OQT_FAIL("sql_text(\"%s\") = %d, want 2", sql, rc);
  ASSERT_CONTAINS(err, want);
  ASSERT(!strchr(err, '\n'));
}

static void exec_check(const char *cmd, const char *path, int want_rc,
                       const char *want)
{
  err[0] = '\0';
  int rc = wk_preflight_exec(cmd, path, err, sizeof err);
  if (rc != want_rc)
    OQT_FAIL("exec(\"%s\", PATH=%s) = %d (%s), want %d", cmd,
             path ? path : "(env)", rc, err, want_rc);
  if (want)
    ASSERT_CONTAINS(err, want);
}

static void http_check(const char *url, int want_rc, const char *want)
{
  err[0] = '\0';
  int rc = cm_curl_check_url("--http", url, err, sizeof err);
  if (rc != want_rc)
    OQT_FAIL("http(\"%s\") = %d (%s), want %d", url, rc, err, want_rc);
  if (want)
    ASSERT_CONTAINS(err, want);
  ASSERT_NOT_CONTAINS(err, "s3cret"); /* the URL is never echoed */
}

int main(void)
{
  /* --sql text */
  sql_bad("", "--sql is empty");
  sql_bad("  ;\n -- nothing\n /* at all */ ", "--sql is empty");
  sql_bad("begin", "must not control the transaction (begin)");
  sql_bad("  COMMIT;", "(COMMIT)");
  sql_bad("rollback", "(rollback)");
  sql_bad("/* x */ end", "(end)");
  sql_bad("start transaction", "(start)");
  sql_bad("savepoint a", "(savepoint)");
  sql_bad("abort", "(abort)");
  /* COPY streams over the connection: the ack transaction cannot carry it */
  sql_bad("copy t to stdout", "must not be a COPY");
  sql_bad(" /* load */ COPY t FROM STDIN", "must not be a COPY");
  ASSERT_EQ(wk_preflight_sql_text("select copy from t", err, sizeof err), 0);
  ASSERT_EQ(wk_preflight_sql_text("insert into t values ($1)", err, sizeof err),
            0);
  ASSERT_EQ(wk_preflight_sql_text("select beginning from t", err, sizeof err),
            0);
  ASSERT_EQ(wk_preflight_sql_text("-- c\nupdate t set a = 1", err, sizeof err),
            0);
  /* block comments nest (PostgreSQL and CockroachDB): the statement is
   * after the outer comment's end */
  sql_bad("/* /* */ */ COMMIT", "must not control the transaction (COMMIT)");
  sql_bad("/* a /* b /* c */ */ */ rollback", "(rollback)");
  sql_bad("/*/**/*/begin", "(begin)");
  ASSERT_EQ(
      wk_preflight_sql_text("/* /* commit */ */ select 1", err, sizeof err), 0);
  sql_bad("/* /* */ commit: the outer comment is never closed",
          "--sql is empty");
  /* statements whose effect outlives the ack transaction on the
   * executor's connection */
  sql_bad("PREPARE TRANSACTION 'x'",
          "must not control the transaction (PREPARE TRANSACTION)");
  sql_bad("prepare /* c */ transaction 'x'", "(PREPARE TRANSACTION)");
  sql_bad("prepare p as select 1", "must not PREPARE");
  sql_bad("set search_path = evil", "must not change a session setting (SET)");
  sql_bad("SET statement_timeout TO 1", "use SET LOCAL");
  sql_bad("set session search_path = x", "(SET)");
  sql_bad("set role other", "(SET)");
  sql_bad("set session authorization other", "(SET)");
  sql_bad("reset all", "must not change a session setting (RESET)");
  sql_bad("RESET search_path", "(RESET)");
  sql_bad("listen ch", "must not LISTEN");
  sql_bad("UNLISTEN *", "must not UNLISTEN");
  sql_bad("deallocate all", "must not DEALLOCATE");
  sql_bad("DEALLOCATE PREPARE p", "must not DEALLOCATE");
  sql_bad("discard all", "must not DISCARD");
  sql_bad("load 'auto_explain'", "must not LOAD");
  /* transaction-scoped forms are fine */
  ASSERT_EQ(wk_preflight_sql_text("set local search_path = x", err, sizeof err),
            0);
  ASSERT_EQ(wk_preflight_sql_text("SET /* c */ LOCAL statement_timeout = 5",
                                  err, sizeof err),
            0);
  ASSERT_EQ(wk_preflight_sql_text("set transaction isolation level "
                                  "serializable",
                                  err, sizeof err),
            0);
  ASSERT_EQ(
      wk_preflight_sql_text("set constraints all deferred", err, sizeof err),
      0);
  ASSERT_EQ(wk_preflight_sql_text("select settings from t", err, sizeof err),
            0);
  ASSERT_EQ(wk_preflight_sql_text("notify ch", err, sizeof err), 0);
  ASSERT_EQ(wk_preflight_sql_text("execute p", err, sizeof err), 0);

  /* --exec */
  char dir[] = "/tmp/oq_preflight_XXXXXX";
  ASSERT(mkdtemp(dir) != NULL);
  char noexec[256], prog[256], path[600];
  snprintf(noexec, sizeof noexec, "%s/noexec", dir);
  snprintf(prog, sizeof prog, "%s/prog", dir);
  FILE *f = fopen(noexec, "w");
  ASSERT(f != NULL);
  fputs("#!/bin/sh\n", f);
  fclose(f);
  ASSERT_EQ(chmod(noexec, 0644), 0);
  f = fopen(prog, "w");
  ASSERT(f != NULL);
  fputs("#!/bin/sh\n", f);
  fclose(f);
  ASSERT_EQ(chmod(prog, 0755), 0);
  snprintf(path, sizeof path, "/nonexistent:%s", dir);

  exec_check("/bin/sh", NULL, 0, NULL);
  exec_check("sh", "/usr/bin:/bin", 0, NULL);
  exec_check("prog", path, 0, NULL);
  exec_check(prog, NULL, 0, NULL);
  exec_check("oq-no-such-command", "/usr/bin:/bin", 2, "not found in PATH");
  exec_check("/nonexistent/cmd", NULL, 2, "no such file");
  exec_check(dir, NULL, 2, "is a directory");
  if (geteuid() == 0 || access(noexec, X_OK) != 0) {
    exec_check(noexec, NULL, 2, "not an executable file");
    exec_check("noexec", path, 2, "not an executable file");
  }
  exec_check("", NULL, 2, "needs a command");

  /* --http */
  http_check("http://127.0.0.1:8080/hook", 0, NULL);
  http_check("https://u:s3cret@example.com/x?y=1", 0, NULL);
  http_check("http://u:s3cret@h:99999/", 2, "port");
  http_check("http://u:s3cret@h:0/", 2, "port 0");
  http_check("http://", 2, "not usable");
  http_check("http://[::1/", 2, "not usable");
  http_check("https://exa mple.com/", 2, "not usable");
  http_check("ftp://u:s3cret@example.com/", 2, "http:// or https://");

  unlink(noexec);
  unlink(prog);
  rmdir(dir);
  printf("PASS unit_worker_preflight\n");
  return 0;
}
