/*
 * cutproxy_main.c: oq_cutproxy, the standalone front end of cutproxy for
 * shell tests.
 *
 *   oq_cutproxy --listen 127.0.0.1:PORT --upstream HOST:PORT [--arm MODE]
 *
 * PORT 0 picks a free port. Control by signal:
 *   SIGUSR1  arm cut-after-commit     SIGUSR2  arm cut-before-commit
 *   SIGWINCH arm cut-during-commit    SIGHUP   drop every connection now
 *   SIGTERM / SIGINT  exit 0
 * It prints one line per event on stdout (flushed), starting with
 * "cutproxy: listening on 127.0.0.1:PORT"; a cut prints
 * "cutproxy: fired <mode> (total N) commit-result=<tag>".
 * The signals are blocked in every thread and taken synchronously by the
 * main loop (sigtimedwait), so no handler runs inside the proxy threads.
 */
#include "cutproxy.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
  fprintf(stderr,
          "usage: oq_cutproxy --listen 127.0.0.1:PORT --upstream HOST:PORT "
          "[--arm after|before|during]\n");
  exit(2);
}

/* "HOST:PORT" -> host (into out) and port; 0 on success. */
static int split_hostport(const char *s, char *host, size_t hostlen, int *port)
{
  const char *colon = strrchr(s, ':');
  if (!colon || (size_t)(colon - s) >= hostlen)
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  char *end = NULL;
  long v = strtol(colon + 1, &end, 10);
  if (!*(colon + 1) || *end || v < 0 || v > 65535)
    return -1;
  *port = (int)v;
  return 0;
}

static int parse_mode(const char *s, cutproxy_mode *m)
{
  if (strcmp(s, "after") == 0)
    *m = CUTPROXY_CUT_AFTER_COMMIT;
  else if (strcmp(s, "before") == 0)
    *m = CUTPROXY_CUT_BEFORE_COMMIT;
  else if (strcmp(s, "during") == 0)
    *m = CUTPROXY_CUT_DURING_COMMIT;
  else
    return -1;
  return 0;
}

int main(int argc, char **argv)
{
  char lhost[64] = "", uhost[256] = "";
  int lport = -1, uport = -1;
  cutproxy_mode initial = CUTPROXY_NONE;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
      if (split_hostport(argv[++i], lhost, sizeof lhost, &lport) != 0)
        usage();
    } else if (strcmp(argv[i], "--upstream") == 0 && i + 1 < argc) {
      if (split_hostport(argv[++i], uhost, sizeof uhost, &uport) != 0)
        usage();
    } else if (strcmp(argv[i], "--arm") == 0 && i + 1 < argc) {
      if (parse_mode(argv[++i], &initial) != 0)
        usage();
    } else {
      usage();
    }
  }
  if (lport < 0 || uport <= 0)
    usage();
  if (strcmp(lhost, "127.0.0.1") != 0) {
    fprintf(stderr, "oq_cutproxy: --listen must be 127.0.0.1:PORT\n");
    return 2;
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGWINCH);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  /* Block before any thread exists so that every thread inherits it. */
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
    return 1;

  cutproxy *p = cutproxy_start_on(lport, uhost, uport);
  if (!p)
    return 1;
  if (initial != CUTPROXY_NONE)
    cutproxy_arm(p, initial);
  printf("cutproxy: listening on 127.0.0.1:%d upstream %s:%d armed %s\n",
         cutproxy_port(p), uhost, uport, cutproxy_mode_name(initial));
  fflush(stdout);

  uint64_t seen = 0;
  cutproxy_mode last_armed = initial;
  int running = 1;
  while (running) {
    struct timespec tick = {0, 100 * 1000000L};
    int sig = sigtimedwait(&set, NULL, &tick);
    cutproxy_mode arm = CUTPROXY_NONE;
    switch (sig) {
    case SIGUSR1:
      arm = CUTPROXY_CUT_AFTER_COMMIT;
      break;
    case SIGUSR2:
      arm = CUTPROXY_CUT_BEFORE_COMMIT;
      break;
    case SIGWINCH:
      arm = CUTPROXY_CUT_DURING_COMMIT;
      break;
    case SIGHUP:
      cutproxy_drop_all(p);
      printf("cutproxy: dropped all connections\n");
      break;
    case SIGTERM:
    case SIGINT:
      running = 0;
      break;
    default:
      break; /* timeout or EINTR */
    }
    if (arm != CUTPROXY_NONE) {
      cutproxy_arm(p, arm);
      last_armed = arm;
      printf("cutproxy: armed %s\n", cutproxy_mode_name(arm));
    }
    uint64_t fired = cutproxy_fired(p);
    if (fired != seen) {
      (void)cutproxy_wait_settled(p, 35000);
      char res[64];
      cutproxy_commit_result(p, res, sizeof res);
      printf("cutproxy: fired %s (total %llu) commit-result=%s\n",
             cutproxy_mode_name(last_armed), (unsigned long long)fired,
             res[0] ? res : "-");
      seen = fired;
    }
    fflush(stdout);
  }
  cutproxy_stop(p);
  printf("cutproxy: stopped\n");
  return 0;
}
