/*
 * sleep_handler.c: a handler of a known duration for
 * test/bench/handler_rate.sh, in two forms:
 *
 *   onceq_bench_sleep serve PORT_FILE MS [STATS_FILE]
 *       an HTTP/1.1 server on 127.0.0.1 (a free port, written to
 *       PORT_FILE) that answers every request "200 OK" MS milliseconds
 *       after it has read it whole, keeping the connection alive. One
 *       thread per connection, blocked in read() or nanosleep(): the worker
 *       keeps one connection per executor, so C executors cost C sleeping
 *       threads and no CPU between requests, and the server cannot be what
 *       limits C = 16. On SIGTERM or SIGINT it writes
 *       "requests=N busy_us=U" to STATS_FILE (U: the summed time from a
 *       request read to its answer written, so U / N is the server's own
 *       d) and exits.
 *   onceq_bench_sleep sleep MS [ARGS...]
 *       sleeps MS milliseconds and exits 0 (the --exec handler; the item id
 *       the worker appends is ignored).
 *
 * A benchmark helper, not a test: never run by ctest. Requests are parsed
 * only as far as the worker sends them (a header block, then
 * Content-Length bytes of body; no chunked bodies).
 */
#define _GNU_SOURCE /* accept4 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX 65536 /* bytes of one request (headers and body) */

static int g_ms;                       /* the answer's delay */
static atomic_uint_fast64_t g_reqs;    /* requests answered */
static atomic_uint_fast64_t g_busy_us; /* request read to answer written */
static volatile sig_atomic_t g_stop;

static uint64_t now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_ms(int ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Parse a non-negative decimal; -1 when s is not one. */
static long parse_ms(const char *s)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 0 || v > 600000)
    return -1;
  return v;
}

static int write_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The Content-Length of the header block hdr (0 when absent). */
static size_t content_length(const char *hdr)
{
  for (const char *p = hdr; (p = strchr(p, '\n')) != NULL;) {
    p++;
    if (strncasecmp(p, "content-length:", 15) == 0)
      return (size_t)strtoul(p + 15, NULL, 10);
  }
  return 0;
}

/* One connection: read a request, sleep, answer; until the peer closes. */
static void *serve_conn(void *arg)
{
  int fd = (int)(intptr_t)arg;
  char *buf = malloc(REQ_MAX + 1);
  size_t have = 0;
  static const char reply[] = "HTTP/1.1 200 OK\r\n"
                              "Content-Type: text/plain\r\n"
                              "Content-Length: 2\r\n"
                              "\r\n"
                              "ok";
  if (!buf)
    goto out;
  for (;;) {
    char *eoh = NULL;
    size_t need = 0;
    for (;;) {
      buf[have] = '\0';
      eoh = strstr(buf, "\r\n\r\n");
      if (eoh) {
        need = (size_t)(eoh + 4 - buf) + content_length(buf);
        if (have >= need)
          break;
      }
      if (have >= REQ_MAX)
        goto out; /* too large for a bench request */
      ssize_t k = read(fd, buf + have, REQ_MAX - have);
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        goto out;
      have += (size_t)k;
    }
    uint64_t t0 = now_us();
    sleep_ms(g_ms);
    if (write_all(fd, reply, sizeof reply - 1) < 0)
      goto out;
    atomic_fetch_add(&g_busy_us, now_us() - t0);
    atomic_fetch_add(&g_reqs, 1);
    memmove(buf, buf + need, have - need); /* a pipelined next request */
    have -= need;
  }
out:
  free(buf);
  close(fd);
  return NULL;
}

static void on_signal(int sig)
{
  (void)sig;
  g_stop = 1;
}

static int serve(const char *port_file, const char *stats_file)
{
  int rc = 1;
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  int one = 1;
  FILE *f = NULL;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 ||
      listen(ls, 128) < 0 ||
      getsockname(ls, (struct sockaddr *)&a, &alen) < 0) {
    perror("onceq_bench_sleep: listen");
    goto out;
  }
  f = fopen(port_file, "w");
  if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0) {
    perror("onceq_bench_sleep: port file");
    goto out;
  }
  /* no SA_RESTART: the signal ends the accept() below */
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  while (!g_stop) {
    int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
      continue; /* EINTR (the signal) or a client that went away */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    if (pthread_create(&t, &at, serve_conn, (void *)(intptr_t)fd) != 0)
      close(fd);
    pthread_attr_destroy(&at);
  }
  rc = 0;
  if (stats_file) {
    f = fopen(stats_file, "w");
    if (f) {
      fprintf(f, "requests=%llu busy_us=%llu\n",
              (unsigned long long)atomic_load(&g_reqs),
              (unsigned long long)atomic_load(&g_busy_us));
      fclose(f);
    }
  }
out:
  if (ls >= 0)
    close(ls);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc >= 3 && !strcmp(argv[1], "sleep") && parse_ms(argv[2]) >= 0) {
    sleep_ms((int)parse_ms(argv[2]));
    return 0;
  }
  if ((argc == 4 || argc == 5) && !strcmp(argv[1], "serve") &&
      parse_ms(argv[3]) >= 0) {
    g_ms = (int)parse_ms(argv[3]);
    return serve(argv[2], argc == 5 ? argv[4] : NULL);
  }
  fprintf(stderr, "usage: onceq_bench_sleep serve PORT_FILE MS [STATS_FILE]\n"
                  "       onceq_bench_sleep sleep MS [ARGS...]\n");
  return 2;
}
