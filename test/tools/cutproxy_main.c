/*
 * cutproxy_main.c: oq_cutproxy, the standalone front end of cutproxy for
 * shell tests.
 *
 *   oq_cutproxy --listen 127.0.0.1:PORT --upstream HOST:PORT
 *               [--arm after|before|during|match] [--match TEXT]
 *               [--blackhole-app NAME] [--control FIFO]
 *
 * PORT 0 picks a free port. --match TEXT: the substring that makes a
 * statement match for cut-after-match (see cutproxy.h; e.g. the claim's
 * "SET claim = $1::uuid"). --blackhole-app NAME: the application_name that
 * SIGTTIN blackholes (without it SIGTTIN blackholes every connection).
 *
 * Control by signal:
 *   SIGUSR1  arm cut-after-commit     SIGUSR2  arm cut-before-commit
 *   SIGWINCH arm cut-during-commit    SIGVTALRM arm cut-after-match
 *   SIGTTIN  blackhole (--blackhole-app NAME, else all connections)
 *   SIGTTOU  unblackhole (blackholed connections are closed)
 *   SIGHUP   drop every connection now
 *   SIGTERM / SIGINT  exit 0
 *
 * Control by FIFO (--control PATH; created 0600 when missing): one command
 * per line, each answered on stdout by "cutproxy: ok <command>" (or
 * "cutproxy: bad command: <line>") once it has taken effect:
 *   arm after|before|during|match|none
 *   match TEXT            (the rest of the line, blanks included)
 *   blackhole-app NAME    blackhole-all    unblackhole
 *   drop-all              stop
 * A writer that opens the FIFO never blocks: the proxy holds it open.
 *
 * It prints one line per event on stdout (flushed), starting with
 * "cutproxy: listening on 127.0.0.1:PORT"; a cut prints
 * "cutproxy: fired <mode> (total N) commit-result=<tag>"; a change in the
 * number of blackholed connections prints
 * "cutproxy: blackholed now N total M at_ms=<epoch ms>".
 * The signals are blocked in every thread and taken synchronously by the
 * main loop (sigtimedwait), so no handler runs inside the proxy threads.
 * Commands and signals are looked at every 20 ms.
 */
#include "cutproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(void)
{
  fprintf(stderr,
          "usage: oq_cutproxy --listen 127.0.0.1:PORT --upstream HOST:PORT "
          "[--arm after|before|during|match] [--match TEXT] "
          "[--blackhole-app NAME] [--control FIFO]\n");
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
  else if (strcmp(s, "match") == 0)
    *m = CUTPROXY_CUT_AFTER_MATCH;
  else if (strcmp(s, "none") == 0)
    *m = CUTPROXY_NONE;
  else
    return -1;
  return 0;
}

static long long epoch_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One control line (no newline). Returns 0 to go on, 1 for "stop". */
static int control(cutproxy *p, char *line, cutproxy_mode *last_armed)
{
  cutproxy_mode m;
  int stop = 0, ok = 1;
  if (strncmp(line, "arm ", 4) == 0 && parse_mode(line + 4, &m) == 0) {
    cutproxy_arm(p, m);
    if (m != CUTPROXY_NONE)
      *last_armed = m;
  } else if (strncmp(line, "match ", 6) == 0 && line[6]) {
    cutproxy_set_match(p, line + 6);
  } else if (strncmp(line, "blackhole-app ", 14) == 0 && line[14]) {
    cutproxy_blackhole_app(p, line + 14);
  } else if (strcmp(line, "blackhole-all") == 0) {
    cutproxy_blackhole_all(p);
  } else if (strcmp(line, "unblackhole") == 0) {
    cutproxy_unblackhole(p);
  } else if (strcmp(line, "drop-all") == 0) {
    cutproxy_drop_all(p);
  } else if (strcmp(line, "stop") == 0) {
    stop = 1;
  } else {
    ok = 0;
  }
  if (ok)
    printf("cutproxy: ok %s at_ms=%lld\n", line, epoch_ms());
  else
    printf("cutproxy: bad command: %s\n", line);
  return stop;
}

/* Read what the FIFO holds and run each complete line. */
static int read_control(int fd, char *acc, size_t acclen, size_t *used,
                        cutproxy *p, cutproxy_mode *last_armed)
{
  int stop = 0;
  for (;;) {
    ssize_t n = read(fd, acc + *used, acclen - 1 - *used);
    if (n <= 0)
      break;
    *used += (size_t)n;
    char *nl;
    while ((nl = memchr(acc, '\n', *used)) != NULL) {
      *nl = '\0';
      if (nl > acc && nl[-1] == '\r')
        nl[-1] = '\0';
      if (acc[0])
        stop |= control(p, acc, last_armed);
      size_t rest = *used - (size_t)(nl + 1 - acc);
      memmove(acc, nl + 1, rest);
      *used = rest;
    }
    if (*used == acclen - 1) { /* a line too long: drop it */
      printf("cutproxy: bad command: (longer than %zu bytes)\n", acclen);
      *used = 0;
    }
  }
  return stop;
}

int main(int argc, char **argv)
{
  char lhost[64] = "", uhost[256] = "";
  int lport = -1, uport = -1;
  cutproxy_mode initial = CUTPROXY_NONE;
  const char *match = NULL, *bh_app = NULL, *fifo = NULL;

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
    } else if (strcmp(argv[i], "--match") == 0 && i + 1 < argc) {
      match = argv[++i];
    } else if (strcmp(argv[i], "--blackhole-app") == 0 && i + 1 < argc) {
      bh_app = argv[++i];
    } else if (strcmp(argv[i], "--control") == 0 && i + 1 < argc) {
      fifo = argv[++i];
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
  sigaddset(&set, SIGVTALRM);
  sigaddset(&set, SIGTTIN);
  sigaddset(&set, SIGTTOU);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  /* Block before any thread exists so that every thread inherits it. */
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
    return 1;

  int cfd = -1;
  if (fifo) {
    if (mkfifo(fifo, 0600) != 0 && errno != EEXIST) {
      fprintf(stderr, "oq_cutproxy: mkfifo %s: %s\n", fifo, strerror(errno));
      return 1;
    }
    /* read-write: the FIFO never reports EOF and writers never block */
    cfd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (cfd < 0) {
      fprintf(stderr, "oq_cutproxy: open %s: %s\n", fifo, strerror(errno));
      return 1;
    }
  }

  cutproxy *p = cutproxy_start_on(lport, uhost, uport);
  if (!p)
    return 1;
  if (match)
    cutproxy_set_match(p, match);
  if (initial != CUTPROXY_NONE)
    cutproxy_arm(p, initial);
  printf("cutproxy: listening on 127.0.0.1:%d upstream %s:%d armed %s\n",
         cutproxy_port(p), uhost, uport, cutproxy_mode_name(initial));
  fflush(stdout);

  uint64_t seen = 0, bh_seen_total = 0;
  int bh_seen_now = 0;
  cutproxy_mode last_armed = initial;
  char acc[1024];
  size_t used = 0;
  int running = 1;
  while (running) {
    if (cfd >= 0) {
      struct pollfd pf = {.fd = cfd, .events = POLLIN};
      if (poll(&pf, 1, 20) > 0 &&
          read_control(cfd, acc, sizeof acc, &used, p, &last_armed))
        running = 0;
    }
    struct timespec tick = {0, (cfd >= 0 ? 0 : 20) * 1000000L};
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
    case SIGVTALRM:
      arm = CUTPROXY_CUT_AFTER_MATCH;
      break;
    case SIGTTIN:
      if (bh_app)
        cutproxy_blackhole_app(p, bh_app);
      else
        cutproxy_blackhole_all(p);
      printf("cutproxy: blackhole %s%s at_ms=%lld\n", bh_app ? "app=" : "all",
             bh_app ? bh_app : "", epoch_ms());
      break;
    case SIGTTOU:
      cutproxy_unblackhole(p);
      printf("cutproxy: unblackhole at_ms=%lld\n", epoch_ms());
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
    int bh_now = cutproxy_blackholed_now(p);
    uint64_t bh_total = cutproxy_blackholed_total(p);
    if (bh_now != bh_seen_now || bh_total != bh_seen_total) {
      printf("cutproxy: blackholed now %d total %llu at_ms=%lld\n", bh_now,
             (unsigned long long)bh_total, epoch_ms());
      bh_seen_now = bh_now;
      bh_seen_total = bh_total;
    }
    fflush(stdout);
  }
  cutproxy_stop(p);
  if (cfd >= 0)
    close(cfd);
  printf("cutproxy: stopped\n");
  return 0;
}
