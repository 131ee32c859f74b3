/*
 * exec_handler.c: unit tests for the --exec handler (handler_exec.c). No
 * database: each test runs /bin/sh snippets as the child and checks what
 * arrived (stdin, argv, environment), what came back (tails, outcome,
 * error text) and that timeouts and cancels leave no process behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handler_exec.h"
#include "oq_test.h"

#define TEST_ID "11111111-2222-3333-4444-555555555555"

static char tmpdir[64]; /* scratch directory of this run */
static char **base_env; /* wk_exec_env_new's, built in main */

typedef struct run_out {
  int rc;
  uint64_t elapsed_ms;
  wk_result r;
} run_out;

static oq_item make_item(const char *id, const char *queue, char *payload,
                         int attempt)
{
  oq_item it;
  memset(&it, 0, sizeof it);
  oqt_copy(it.id, sizeof it.id, id);
  it.queue = (char *)queue;
  it.payload = payload;
  it.attempt = attempt;
  it.max_attempts = 5;
  return it;
}

/* Run argv once for item `it`; times the call. */
static void run(char *const *argv, int timeout_ms, int grace_ms,
                const oq_item *it, wk_cancel_fn cancel, void *ctx, run_out *o)
{
  wk_exec_cfg cfg = {argv, timeout_ms, grace_ms, base_env};
  wk_task t = {.item = it,
               .session_id = "session-1",
               .cancelled = cancel,
               .cancel_ctx = ctx};
  uint64_t t0 = oq_monotonic_ms();
  o->rc = wk_exec_run(&cfg, &t, &o->r);
  o->elapsed_ms = oq_monotonic_ms() - t0;
}

/* Run a /bin/sh script with the default item (payload may be NULL). */
static void run_sh(const char *script, int timeout_ms, int grace_ms,
                   char *payload, run_out *o)
{
  char *argv[] = {"sh", "-c", (char *)script, NULL};
  oq_item it = make_item(TEST_ID, "q1", payload, 1);
  run(argv, timeout_ms, grace_ms, &it, NULL, NULL, o);
}

static bool ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void path_in_tmp(char *buf, size_t len, const char *name)
{
  snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* A pid a script wrote to `file`; waits up to 2 s for it to appear. */
static pid_t read_pid(const char *file)
{
  for (int i = 0; i < 200; i++) {
    FILE *f = fopen(file, "r");
    if (f) {
      long pid = 0;
      int got = fscanf(f, "%ld", &pid);
      fclose(f);
      if (got == 1 && pid > 1)
        return (pid_t)pid;
    }
    oqt_sleep_ms(10);
  }
  OQT_FAIL("no pid in %s", file);
  return -1;
}

/*
 * True once pid no longer runs: gone, or a zombie (an orphan is reparented
 * to pid 1, which may never reap it). Waits up to max_ms.
 */
static bool process_gone(pid_t pid, int max_ms)
{
  uint64_t until = oq_monotonic_ms() + (uint64_t)max_ms;
  for (;;) {
    char path[64], buf[256];
    if (kill(pid, 0) < 0 && errno == ESRCH)
      return true;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
      return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    if (paren && paren[1] == ' ' && paren[2] == 'Z')
      return true;
    if (oq_monotonic_ms() >= until)
      return false;
    oqt_sleep_ms(10);
  }
}

/*
 * The handler environment (issue 20): main put secrets in our environment
 * (as the systemd units' env file does) and built the base with --env
 * OQT_INHERITED, OQT_SET=a=b, OQT_UNSET, PATH=/usr/bin:/bin, LANG=C. The
 * child sees the base variables, the --env ones and its item's, and none
 * of the worker's credentials or other variables.
 */
static void test_environment(void)
{
  run_out o;
  run_sh("tr '\\0' '\\n' < /proc/$$/environ | sort", 5000, 0, NULL, &o);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "HOME=/home/oqt\n"
                           "LANG=C\n"
                           "LC_TIME=C\n"
                           "ONCEQ_ATTEMPT=1\n"
                           "ONCEQ_ITEM_ID=" TEST_ID "\n"
                           "ONCEQ_QUEUE=q1\n"
                           "OQT_INHERITED=yes\n"
                           "OQT_SET=a=b\n"
                           "PATH=/usr/bin:/bin\n"
                           "TZ=UTC\n");
  /* no base (a caller that built none): the item's variables alone */
  char *argv[] = {"sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ | sort", NULL};
  oq_item it = make_item(TEST_ID, "q1", NULL, 3);
  wk_exec_cfg cfg = {argv, 5000, 0, NULL};
  wk_task t = {.item = &it, .session_id = "s"};
  ASSERT_EQ(wk_exec_run(&cfg, &t, &o.r), 0);
  ASSERT_STREQ(o.r.output, "ONCEQ_ATTEMPT=3\n"
                           "ONCEQ_ITEM_ID=" TEST_ID "\n"
                           "ONCEQ_QUEUE=q1\n");
}

/* Payload on stdin, id last argument, the three variables set. */
static void test_stdin_argv_env(void)
{
  run_out o;
  char payload[] = "{\"hello\": \"world\"}";
  char *argv[] = {"sh", "-c",
                  "cat; printf '|%s|%s|%s|%s|%s' \"$0\" \"$ONCEQ_ITEM_ID\" "
                  "\"$ONCEQ_QUEUE\" \"$ONCEQ_ATTEMPT\" \"$OQT_INHERITED\"; "
                  "echo warning >&2",
                  NULL};
  oq_item it = make_item(TEST_ID, "q1", payload, 2);
  run(argv, 5000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output,
               "{\"hello\": \"world\"}|" TEST_ID "|" TEST_ID "|q1|2|yes");
  ASSERT_STREQ(o.r.error, ""); /* stderr does not matter on success */
  ASSERT_EQ(o.r.retry_after_ms, -1);

  /* The item id comes after every configured argument. */
  char *script2 = "printf '<%s>' \"$@\"";
  char *argv2[] = {"/bin/sh", "-c", script2, "sh", "a", "b c", NULL};
  run(argv2, 5000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "<a><b c><" TEST_ID ">");

  /* An inherited ONCEQ_QUEUE (main sets "stale") is not passed on: the
   * item's own is there once.
   * Read the raw exec environment: the shell would merge duplicates. */
  run_sh("tr '\\0' '\\n' < /proc/$$/environ | grep '^ONCEQ_QUEUE='", 5000, 0,
         NULL, &o);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "ONCEQ_QUEUE=q1\n");

  /* No payload: stdin is at EOF at once. */
  run_sh("wc -c", 5000, 0, NULL, &o);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "0\n");
}

/* An executable file without a #! line runs with /bin/sh, as execvp runs
 * it (posix_spawnp alone would fail with ENOEXEC). */
static void test_no_shebang(void)
{
  char file[128];
  path_in_tmp(file, sizeof file, "no_shebang");
  FILE *f = fopen(file, "w");
  ASSERT(f != NULL);
  fputs("echo \"plain script: $1\"\n", f);
  fclose(f);
  ASSERT_EQ(chmod(file, 0755), 0);
  char *argv[] = {file, NULL};
  oq_item it = make_item(TEST_ID, "q1", "{}", 1);
  run_out o;
  run(argv, 5000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "plain script: " TEST_ID "\n");
  unlink(file);
}

static void test_exit_status(void)
{
  run_out o;
  run_sh("echo partial; echo oops >&2; exit 3", 5000, 0, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "exit status 3: oops\n");
  ASSERT_STREQ(o.r.output, "partial\n");

  run_sh("exit 42", 5000, 0, NULL, &o);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "exit status 42");

  /* stderr that is not UTF-8 (Latin-1) is recorded as clean text: the
   * database would refuse the raw bytes and strand the item */
  run_sh("printf 'Fehler: Datei M\\374ller.txt fehlt\\n\\0x' >&2; exit 3", 5000,
         0, NULL, &o);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "exit status 3: Fehler: Datei M?ller.txt fehlt\n?x");

  char want[64];
  snprintf(want, sizeof want, "killed by signal %d (SIGUSR1)", SIGUSR1);
  run_sh("kill -USR1 $$", 5000, 0, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, want);
}

/* 1 MB on each stream at once: no deadlock, tails bounded. */
static void test_chatty_child(void)
{
  run_out o;
  run_sh("(yes aaaaaaa | head -c 1048576; echo OUTEND) & "
         "(yes bbbbbbb | head -c 1048576; echo ERREND) >&2; wait; exit 5",
         30000, 0, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_EQ(strlen(o.r.output), WK_TAIL_MAX);
  ASSERT(ends_with(o.r.output, "aaaaaaa\nOUTEND\n"));
  ASSERT_NOT_CONTAINS(o.r.output, "b");
  ASSERT_LE(strlen(o.r.error), WK_TAIL_MAX);
  ASSERT_EQ(strlen(o.r.error), WK_TAIL_MAX); /* prefix + a full tail */
  ASSERT_EQ(strncmp(o.r.error, "exit status 5: ", 15), 0);
  ASSERT(ends_with(o.r.error, "bbbbbbb\nERREND\n"));
  ASSERT_NOT_CONTAINS(o.r.error + 15, "a");
  ASSERT_LE(o.elapsed_ms, 20000);
}

/* 1 MB payload: read fully, not read at all, or stdin closed early. */
static void test_big_payload(void)
{
  size_t len = 1048576;
  char *payload = malloc(len + 1);
  ASSERT(payload != NULL);
  memset(payload, 'x', len);
  payload[len] = '\0';
  run_out o;

  run_sh("wc -c", 30000, 0, payload, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "1048576\n");

  run_sh("echo hi", 30000, 0, payload, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "hi\n");
  ASSERT_LE(o.elapsed_ms, 10000);

  /* Neither reads stdin nor stops talking: writing must not block us. */
  run_sh("yes | head -c 1048576; echo END", 10000, 0, payload, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT(ends_with(o.r.output, "y\nEND\n"));
  ASSERT_LE(o.elapsed_ms, 10000);

  /* The timeout still fires while the payload is stuck in a full pipe. */
  run_sh("sleep 30", 300, 200, payload, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "timed out after 300 ms");
  ASSERT_LE(o.elapsed_ms, 300 + 200 + 1500);

  /* Stdin closed before the payload is written: our write gets EPIPE.
   * SIGPIPE must neither kill us nor stay pending, and the mask is back. */
  run_sh("exec 0<&-; sleep 0.1; echo closed", 30000, 0, payload, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "closed\n");
  sigset_t pending, mask;
  sigemptyset(&pending);
  ASSERT_EQ(sigpending(&pending), 0);
  ASSERT_EQ(sigismember(&pending, SIGPIPE), 0);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, NULL, &mask), 0);
  ASSERT_EQ(sigismember(&mask, SIGPIPE), 0);
  free(payload);
}

static void test_cannot_run(void)
{
  run_out o;
  char *argv1[] = {"/nonexistent/onceq-cmd", "x", NULL};
  oq_item it = make_item(TEST_ID, "q1", "{}", 1);
  run(argv1, 1000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, -1);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error,
               "cannot run /nonexistent/onceq-cmd: No such file or directory");

  char *argv2[] = {"onceq-no-such-command-on-path", NULL};
  run(argv2, 1000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, -1);
  ASSERT_STREQ(o.r.error, "cannot run onceq-no-such-command-on-path: "
                          "No such file or directory");

  char file[128];
  path_in_tmp(file, sizeof file, "not-executable");
  FILE *f = fopen(file, "w");
  ASSERT(f != NULL);
  fputs("#!/bin/sh\necho no\n", f);
  fclose(f);
  ASSERT_EQ(chmod(file, 0644), 0);
  char *argv3[] = {file, NULL};
  run(argv3, 1000, 0, &it, NULL, NULL, &o);
  ASSERT_EQ(o.rc, -1);
  ASSERT_CONTAINS(o.r.error, "cannot run ");
  ASSERT(ends_with(o.r.error, ": Permission denied"));
  unlink(file);

  wk_exec_cfg empty = {NULL, 0, 0, NULL};
  wk_task t = {.item = &it, .session_id = "s"};
  ASSERT_EQ(wk_exec_run(&empty, &t, &o.r), -1);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT(o.r.error[0] != '\0');
}

/* Timing: timeouts that a script must beat (a trap set, a pid written)
 * are 500 ms, ample even on a loaded machine; upper bounds allow
 * SLACK_MS of scheduling delay. */
#define SLACK_MS 1500

/* Timeout: SIGTERM reaches the whole group, grandchild included. */
static void test_timeout_kills_group(void)
{
  char file[128], script[512];
  path_in_tmp(file, sizeof file, "grandchild.pid");
  unlink(file);
  snprintf(script, sizeof script,
           "sleep 30 & echo $! > %s; echo bye >&2; sleep 30", file);
  run_out o;
  run_sh(script, 500, 200, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "timed out after 500 ms: bye\n");
  ASSERT_LE(500, o.elapsed_ms);
  ASSERT_LE(o.elapsed_ms, 500 + 200 + SLACK_MS);
  pid_t gc = read_pid(file);
  ASSERT(process_gone(gc, 2000));
  unlink(file);
}

/* The SIGTERM goes to every member, and members outliving the leader keep
 * the grace to clean up: a grandchild's TERM trap gets to run. */
static void test_timeout_grace_for_group(void)
{
  char mark[128], script[512];
  path_in_tmp(mark, sizeof mark, "term.mark");
  unlink(mark);
  snprintf(script, sizeof script,
           "sh -c 'trap \"sleep 0.2; echo term > %s; exit 0\" TERM; "
           "sleep 30 & wait' & sleep 30",
           mark);
  run_out o;
  run_sh(script, 500, 3000, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "timed out after 500 ms");
  ASSERT_LE(500 + 200, o.elapsed_ms);            /* waited for the trap */
  ASSERT_LE(o.elapsed_ms, 500 + 200 + SLACK_MS); /* not the whole grace */
  FILE *f = fopen(mark, "r");
  ASSERT(f != NULL);
  char buf[16] = "";
  ASSERT(fgets(buf, sizeof buf, f) != NULL);
  fclose(f);
  ASSERT_STREQ(buf, "term\n");
  unlink(mark);
}

/* A group that ignores SIGTERM gets SIGKILL after the grace. */
static void test_term_ignored(void)
{
  char file[128], script[512];
  path_in_tmp(file, sizeof file, "stubborn.pid");
  unlink(file);
  snprintf(script, sizeof script,
           "trap '' TERM; sleep 30 & echo $! > %s; echo started; sleep 30",
           file);
  run_out o;
  run_sh(script, 500, 200, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "timed out after 500 ms, SIGKILL after 200 ms grace");
  ASSERT_STREQ(o.r.output, "started\n");
  ASSERT_LE(500 + 200, o.elapsed_ms);
  ASSERT_LE(o.elapsed_ms, 500 + 200 + SLACK_MS);
  pid_t gc = read_pid(file);
  ASSERT(process_gone(gc, 2000));
  unlink(file);

  /* The leader dies of the SIGTERM, a grandchild holding our pipes
   * ignores it: the grandchild gets SIGKILL when the grace ends. */
  snprintf(script, sizeof script,
           "sh -c 'trap \"\" TERM; echo $$ > %s; sleep 30' & sleep 30", file);
  run_sh(script, 500, 300, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_FAILED);
  ASSERT_STREQ(o.r.error, "timed out after 500 ms, SIGKILL after 300 ms grace");
  ASSERT_LE(500 + 300, o.elapsed_ms);
  ASSERT_LE(o.elapsed_ms, 500 + 300 + SLACK_MS);
  gc = read_pid(file);
  ASSERT(process_gone(gc, 2000));
  unlink(file);
}

/*
 * Cancel check: says yes once `ready` exists (the script got as far as it
 * must; NULL: no condition) and after_ms have passed. Records when it said
 * yes and the longest gap between calls.
 */
typedef struct cancel_ctx {
  const char *ready;
  uint64_t start_ms, after_ms, last_ms, max_gap_ms, fired_ms;
  int calls;
  uint64_t kill_after_ms; /* kill_now: yes this long after firing */
  uint64_t killed_ms;     /* when kill_now first said yes */
} cancel_ctx;

static bool cancel_after(void *p)
{
  cancel_ctx *c = p;
  uint64_t now = oq_monotonic_ms();
  if (c->calls > 0 && now - c->last_ms > c->max_gap_ms)
    c->max_gap_ms = now - c->last_ms;
  c->last_ms = now;
  c->calls++;
  if (c->fired_ms)
    return true;
  if (now - c->start_ms < c->after_ms)
    return false;
  if (c->ready && access(c->ready, F_OK) != 0)
    return false;
  c->fired_ms = now;
  return true;
}

/* The kill check (a fenced session's expiry is near): yes kill_after_ms
 * after the cancel check fired. */
static bool kill_after(void *p)
{
  cancel_ctx *c = p;
  uint64_t now = oq_monotonic_ms();
  if (!c->fired_ms || now - c->fired_ms < c->kill_after_ms)
    return false;
  if (!c->killed_ms)
    c->killed_ms = now;
  return true;
}

static void test_cancel(void)
{
  char ready[128], script[512];
  path_in_tmp(ready, sizeof ready, "cancel.ready");
  unlink(ready);
  snprintf(script, sizeof script, "echo working; touch %s; sleep 30", ready);
  char *argv[] = {"sh", "-c", script, NULL};
  oq_item it = make_item(TEST_ID, "q1", "{}", 1);
  cancel_ctx cc = {
      .ready = ready, .start_ms = oq_monotonic_ms(), .after_ms = 400};
  run_out o;
  run(argv, 0, 300, &it, cancel_after, &cc, &o);
  uint64_t end = oq_monotonic_ms();
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_ABANDONED);
  ASSERT_STREQ(o.r.error, "cancelled");
  ASSERT_STREQ(o.r.output, "working\n");
  ASSERT_LE(400, o.elapsed_ms);
  ASSERT(cc.fired_ms != 0);
  ASSERT_LE(end - cc.fired_ms, SLACK_MS); /* SIGTERM sufficed, no grace */
  ASSERT_LE(4, cc.calls);                 /* checked while it waited */
  /* every 100 ms; the slack is for a loaded or sanitizer-built run (a 1 s
   * poll, the regression this guards against, still fails) */
  ASSERT_LE(cc.max_gap_ms, 700);
  unlink(ready);

  /* Cancelled and SIGTERM ignored: SIGKILL after the grace. */
  snprintf(script, sizeof script, "trap '' TERM; touch %s; sleep 30", ready);
  cancel_ctx cc2 = {
      .ready = ready, .start_ms = oq_monotonic_ms(), .after_ms = 100};
  run(argv, 10000, 300, &it, cancel_after, &cc2, &o);
  end = oq_monotonic_ms();
  ASSERT_EQ(o.r.outcome, WK_ABANDONED);
  ASSERT_STREQ(o.r.error, "cancelled, SIGKILL after 300 ms grace");
  ASSERT(cc2.fired_ms != 0);
  ASSERT_LE(300, end - cc2.fired_ms);
  ASSERT_LE(end - cc2.fired_ms, 300 + SLACK_MS);
  unlink(ready);

  /* Cancelled, SIGTERM ignored, a 20 s grace: the kill check cuts the
   * grace short (executor.h: SIGKILL before a fenced session expires). */
  cancel_ctx cc3 = {.ready = ready,
                    .start_ms = oq_monotonic_ms(),
                    .after_ms = 100,
                    .kill_after_ms = 500};
  wk_exec_cfg kcfg = {argv, 0, 20000, base_env};
  wk_task kt = {.item = &it,
                .session_id = "session-1",
                .cancelled = cancel_after,
                .kill_now = kill_after,
                .cancel_ctx = &cc3};
  ASSERT_EQ(wk_exec_run(&kcfg, &kt, &o.r), 0);
  end = oq_monotonic_ms();
  ASSERT_EQ(o.r.outcome, WK_ABANDONED);
  ASSERT(cc3.fired_ms != 0);
  ASSERT(cc3.killed_ms != 0);
  ASSERT_LE(500, end - cc3.fired_ms);
  /* polled every 100 ms during the grace; slack for a loaded machine */
  ASSERT_LE(end - cc3.killed_ms, 100 + SLACK_MS);
  unlink(ready);
}

/* Leftovers die with the leader, even after exit 0 (handler_exec.c). */
static void test_leftover_after_exit(void)
{
  char file[128], script[512];
  path_in_tmp(file, sizeof file, "leftover.pid");
  unlink(file);
  snprintf(script, sizeof script, "sleep 30 & echo $! > %s; echo done", file);
  run_out o;
  run_sh(script, 0, 0, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "done\n");
  ASSERT_LE(o.elapsed_ms, 2000); /* not held up by the pipe it inherited */
  pid_t gc = read_pid(file);
  ASSERT(process_gone(gc, 2000));
  unlink(file);
}

/* A process that left the group (setsid) survives, and its copy of the
 * stdout pipe delays the result by at most the drain limit. */
static void test_escapee_bounded(void)
{
  char file[128], script[512];
  path_in_tmp(file, sizeof file, "escapee.pid");
  unlink(file);
  /* The leader waits (bounded) until the escape happened: leftovers of
   * the group are killed as soon as it exits. */
  snprintf(script, sizeof script,
           "setsid sh -c 'echo $$ > %s; exec sleep 30' & i=0; "
           "while [ ! -s %s ] && [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); "
           "done; echo done",
           file, file);
  run_out o;
  run_sh(script, 0, 0, NULL, &o);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  ASSERT_STREQ(o.r.output, "done\n");
  ASSERT_LE(o.elapsed_ms, 2000);
  pid_t esc = read_pid(file);
  ASSERT_EQ(kill(esc, 0), 0); /* not ours to kill: it left the group */
  ASSERT_EQ(kill(esc, SIGKILL), 0);
  ASSERT(process_gone(esc, 2000));
  unlink(file);
}

/* The child inherits no stray fd, no blocked and no ignored signal. */
static void test_child_hygiene(void)
{
  int fd = open("/dev/null", O_RDONLY); /* deliberately not O_CLOEXEC */
  ASSERT(fd >= 3);
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  ASSERT_EQ(sigaction(SIGUSR2, &ign, &old), 0);
  sigset_t block, prev;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &prev), 0);

  /* Builtins only: dash blocks every signal in itself around its own
   * (v)fork, and a grep could catch it in that moment. */
  char script[512];
  snprintf(script, sizeof script,
           "if [ -e /proc/$$/fd/%d ]; then echo leaked; else echo clean; fi; "
           "while read -r k v; do case $k in SigBlk:|SigIgn:) "
           "echo \"$k $v\";; esac; done < /proc/$$/status",
           fd);
  run_out o;
  run_sh(script, 5000, 0, NULL, &o);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &prev, NULL), 0);
  ASSERT_EQ(sigaction(SIGUSR2, &old, NULL), 0);
  close(fd);
  ASSERT_EQ(o.r.outcome, WK_OK);
  /* Signals 32 and 33 (bits 0x180000000) are glibc's own (SIGCANCEL,
   * SIGSETXID; SIGRTMIN is 34, so no program can use them): glibc's
   * posix_spawn leaves them ignored in the child. Every other signal must
   * be at its default, whatever the worker ignores. */
  if (strcmp(o.r.output, "clean\nSigBlk: 0000000000000000\n"
                         "SigIgn: 0000000180000000\n") != 0)
    ASSERT_STREQ(o.r.output, "clean\nSigBlk: 0000000000000000\n"
                             "SigIgn: 0000000000000000\n");
}

/* While a child runs, every fd the handler holds is close-on-exec, so a
 * child another thread starts meanwhile (say, via system()) cannot
 * inherit it. */
static char sleeper_ready[128];

static void *run_sleeper(void *p)
{
  run_out *o = p;
  char script[256];
  snprintf(script, sizeof script, "touch %s; sleep 1", sleeper_ready);
  run_sh(script, 10000, 0, "{}", o);
  return NULL;
}

static bool fd_open(int fd)
{
  return fcntl(fd, F_GETFD) >= 0;
}

static void test_fds_cloexec(void)
{
  enum { MAX_FD = 1024 };
  static bool before[MAX_FD]; /* open before the call: not the handler's */
  for (int fd = 0; fd < MAX_FD; fd++)
    before[fd] = fd_open(fd);
  path_in_tmp(sleeper_ready, sizeof sleeper_ready, "sleeper.ready");
  unlink(sleeper_ready);
  pthread_t th;
  run_out o;
  ASSERT_EQ(pthread_create(&th, NULL, run_sleeper, &o), 0);
  for (int i = 0; i < 500 && access(sleeper_ready, F_OK) != 0; i++)
    oqt_sleep_ms(10);
  ASSERT_EQ(access(sleeper_ready, F_OK), 0); /* the child runs now */
  int seen = 0;
  for (int fd = 0; fd < MAX_FD; fd++) {
    char path[64], link[128];
    if (before[fd])
      continue;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
      continue;
    link[n] = '\0';
    if (strncmp(link, "pipe:", 5) != 0 && !strstr(link, "pidfd"))
      continue;
    seen++;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || !(flags & FD_CLOEXEC))
      OQT_FAIL("fd %d (%s) is not close-on-exec", fd, link);
  }
  ASSERT_LE(2, seen); /* stdout and stderr pipes at least */
  ASSERT_EQ(pthread_join(th, NULL), 0);
  ASSERT_EQ(o.rc, 0);
  ASSERT_EQ(o.r.outcome, WK_OK);
  unlink(sleeper_ready);
}

/* Eight threads, twenty runs each: every output is its own. */
#define N_THREADS 8
#define N_RUNS 20

typedef struct thread_job {
  int index;
  int bad;       /* runs whose result was wrong */
  char msg[512]; /* the first wrong one */
} thread_job;

static void *thread_main(void *p)
{
  thread_job *job = p;
  char *argv[] = {"sh", "-c",
                  "cat; printf ' %s %s %s' \"$0\" \"$ONCEQ_ITEM_ID\" "
                  "\"$ONCEQ_ATTEMPT\"",
                  NULL};
  for (int i = 0; i < N_RUNS; i++) {
    char id[OQ_UUID_LEN + 1], payload[64], want[256];
    snprintf(id, sizeof id, "00000000-0000-0000-%04d-%012d", job->index, i);
    snprintf(payload, sizeof payload, "{\"thread\": %d, \"run\": %d}",
             job->index, i);
    snprintf(want, sizeof want, "%s %s %s %d", payload, id, id, i + 1);
    oq_item it = make_item(id, "q1", payload, i + 1);
    run_out o;
    run(argv, 20000, 0, &it, NULL, NULL, &o);
    if (o.rc != 0 || o.r.outcome != WK_OK || strcmp(o.r.output, want) != 0) {
      if (job->bad++ == 0)
        snprintf(job->msg, sizeof job->msg,
                 "run %d: rc %d outcome %d output \"%.100s\" error "
                 "\"%.100s\" want \"%.100s\"",
                 i, o.rc, (int)o.r.outcome, o.r.output, o.r.error, want);
    }
  }
  return NULL;
}

static void test_threads(void)
{
  pthread_t th[N_THREADS];
  thread_job jobs[N_THREADS];
  uint64_t t0 = oq_monotonic_ms();
  for (int i = 0; i < N_THREADS; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].index = i;
    ASSERT_EQ(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++)
    ASSERT_EQ(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < N_THREADS; i++) {
    if (jobs[i].bad)
      OQT_FAIL("thread %d: %d bad runs; first: %s", i, jobs[i].bad,
               jobs[i].msg);
  }
  oqt_metric("exec_runs_per_s",
             N_THREADS * N_RUNS * 1000.0 / (double)(oq_monotonic_ms() - t0 + 1),
             "runs/s");
}

/* atexit: a failed assertion exits at once; leave no scratch files. */
static void remove_tmpdir(void)
{
  DIR *d = opendir(tmpdir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[384];
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(tmpdir);
}

int main(void)
{
  snprintf(tmpdir, sizeof tmpdir, "/tmp/oq-exec-test-XXXXXX");
  ASSERT(mkdtemp(tmpdir) != NULL);
  ASSERT_EQ(atexit(remove_tmpdir), 0);
  /* Before any thread: the handler's base environment is built from ours
   * (test_environment says what the child must see of it). */
  ASSERT_EQ(clearenv(), 0);
  static const char *const env[][2] = {
      {"OQT_INHERITED", "yes"},
      {"ONCEQ_QUEUE", "stale"},
      {"ONCEQ_DATABASE_URL", "postgresql://u:secret1@h/db"},
      {"DATABASE_URL", "postgresql://u:secret2@h/db"},
      {"PGPASSWORD", "secret3"},
      {"ONCEQ_STATUS_TOKEN", "secret4"},
      {"OQT_OTHER", "other"},
      {"LD_PRELOAD", ""},
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", "/home/oqt"},
      {"LANG", "en_US.UTF-8"},
      {"LC_TIME", "C"},
      {"TZ", "UTC"},
  };
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
    ASSERT_EQ(setenv(env[i][0], env[i][1], 1), 0);
  const char *specs[] = {"OQT_INHERITED", "OQT_SET=a=b", "OQT_UNSET",
                         "PATH=/usr/bin:/bin", "LANG=C"};
  base_env = wk_exec_env_new(specs, sizeof specs / sizeof specs[0]);
  ASSERT(base_env != NULL);

  test_environment();
  test_stdin_argv_env();
  test_exit_status();
  test_chatty_child();
  test_big_payload();
  test_cannot_run();
  test_no_shebang();
  test_timeout_kills_group();
  test_timeout_grace_for_group();
  test_term_ignored();
  test_cancel();
  test_leftover_after_exit();
  test_escapee_bounded();
  test_child_hygiene();
  test_fds_cloexec();
  test_threads();

  wk_exec_env_free(base_env);
  printf("ok\n");
  return 0;
}
