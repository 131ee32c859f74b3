/*
 * multihost_first.c (integration): a multi-host conninfo with
 * target_session_attrs=read-write whose first host is silent (it accepts
 * the TCP connection and never answers, as the address of a failed-over
 * primary behind a dead proxy or a lost route may) and whose second host
 * is the test server (docs/deployment.md, "High availability: failover").
 * libpq would spend connect_timeout (2 s at least) on the silent host
 * before trying the next; the library leaves it after a second, and once a
 * connection has found the host that answers, the next connect starts
 * there:
 *  - the same handle's reconnect (no shared hint);
 *  - a new handle opened with the same oq_db_opts.host_hint.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "onceq/onceq.h"
#include "oq_test.h"

/* A listening socket on 127.0.0.1 that never accepts: the kernel
 * completes the handshake, nobody answers the startup packet. */
static int silent_listener(int *port)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(fd, 64) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    OQT_FAIL("cannot make the silent listener");
  *port = ntohs(a.sin_port);
  return fd;
}

static long open_ms(const oq_db_opts *o, oq_db **db)
{
  char err[OQ_ERRBUF_SIZE] = "";
  uint64_t t0 = oq_monotonic_ms();
  if (oq_db_open(o, db, err, sizeof err) != OQ_OK)
    OQT_FAIL("open: %s", err);
  return (long)(oq_monotonic_ms() - t0);
}

static long reconnect_ms(oq_db *db)
{
  uint64_t t0 = oq_monotonic_ms();
  ASSERT_OK(db, oq_db_reconnect(db));
  return (long)(oq_monotonic_ms() - t0);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("multihost_first", 0);
  oq_db *probe = oqt_connect(dsn);
  if (oq_db_engine(probe) != OQ_ENGINE_POSTGRES) {
    printf("SKIP: PostgreSQL only (one test server, no standby)\n");
    return 77;
  }
  long server_port = oqt_scalar(probe, "SELECT inet_server_port()");
  oq_db_close(probe);
  int silent_port = 0;
  int fd = silent_listener(&silent_port);
  /* later keywords win: the test database's options, two hosts */
  char ci[1024];
  snprintf(ci, sizeof ci,
           "%s host=127.0.0.1,127.0.0.1 port=%d,%ld "
           "target_session_attrs=read-write",
           dsn, silent_port, server_port);

  /* one handle, no shared hint: its reconnect starts at the host it found */
  oq_db_opts o = {.conninfo = ci, .connect_timeout_s = 2, .deadline_ms = 4000};
  oq_db *a = NULL;
  long first = open_ms(&o, &a);
  printf("first open: %ld ms (the silent host's second, then the server)\n",
         first);
  ASSERT_LE(800, first); /* else the first host is not silent */
  /* left after a second, not libpq's connect_timeout (2 s at least) */
  ASSERT_LE(first, 1500);
  ASSERT_EQ(oqt_scalar(a, "SELECT inet_server_port()"), server_port);
  long again = reconnect_ms(a);
  printf("reconnect of the same handle: %ld ms\n", again);
  ASSERT_LE(again, 500);
  ASSERT_EQ(oqt_scalar(a, "SELECT inet_server_port()"), server_port);
  oq_db_close(a);

  /* handles sharing a hint: the first pays, the others start where it
   * found the server */
  unsigned hint = 0;
  o.host_hint = &hint;
  oq_db *b = NULL, *c = NULL;
  long b_ms = open_ms(&o, &b);
  printf("first handle with the hint: %ld ms (hint now %u)\n", b_ms, hint);
  ASSERT_LE(800, b_ms);
  ASSERT_EQ(hint, 1);
  long c_ms = open_ms(&o, &c);
  printf("second handle with the hint: %ld ms\n", c_ms);
  ASSERT_LE(c_ms, 500);
  ASSERT_EQ(oqt_scalar(c, "SELECT inet_server_port()"), server_port);
  oqt_metric("multihost_hinted_open", (double)c_ms, "ms");
  oq_db_close(b);
  oq_db_close(c);

  /* a hint beyond the list (another conninfo's) is ignored */
  hint = 7;
  oq_db *d = NULL;
  long d_ms = open_ms(&o, &d);
  printf("hint 7 of 2 hosts: %ld ms (hint now %u)\n", d_ms, hint);
  ASSERT_EQ(hint, 1);
  oq_db_close(d);
  close(fd);
  printf("PASS\n");
  return 0;
}
