/*
 * session_validate.c (unit): oq_session_validate's rule, at its edges.
 *
 * The rule (session.h): expiry_ms >= 3 * heartbeat_interval_ms + 1000,
 * after defaults (0 means interval 1000, expiry 5000). Exactly on the
 * boundary is valid, one millisecond less is not; negative values are
 * invalid; huge values must not wrap around.
 */
#include "oq_test.h"

#include <limits.h>

static void expect(int interval_ms, int expiry_ms, oq_err want, int line)
{
  char err[OQ_ERRBUF_SIZE];
  err[0] = '\0';
  oq_session_opts o = {.heartbeat_interval_ms = interval_ms,
                       .expiry_ms = expiry_ms};
  oq_err got = oq_session_validate(&o, err, sizeof err);
  if (got != want)
    OQT_FAIL("line %d: interval %d, expiry %d: got %s, want %s (\"%s\")", line,
             interval_ms, expiry_ms, oq_strerror(got), oq_strerror(want), err);
  if (want != OQ_OK && err[0] == '\0')
    OQT_FAIL("line %d: interval %d, expiry %d: empty message", line,
             interval_ms, expiry_ms);
}

#define VALID(i, e) expect((i), (e), OQ_OK, __LINE__)
#define INVALID(i, e) expect((i), (e), OQ_ERR_CONFIG, __LINE__)

int main(void)
{
  /* Defaults. */
  VALID(0, 0);
  VALID(1000, 5000);

  /* The boundary: 3 * interval + 1000. */
  VALID(1000, 4000);
  INVALID(1000, 3999);
  VALID(2000, 7000);
  INVALID(2000, 6999);
  VALID(1, 1003);
  INVALID(1, 1002);
  VALID(10000, 31000);
  INVALID(10000, 30999);

  /* One side defaulted: interval 0 -> 1000, expiry 0 -> 5000. */
  VALID(0, 4000);
  INVALID(0, 3999);
  VALID(1333, 0);   /* 3 * 1333 + 1000 = 4999 <= 5000 */
  INVALID(1334, 0); /* 5002 > 5000 */

  /* Negative values are never valid. */
  INVALID(-1, 5000);
  INVALID(-1000, 0);
  INVALID(1000, -1);
  INVALID(0, -5000);
  INVALID(INT_MIN, INT_MAX);

  /* 3 * interval + 1000 > INT_MAX: no int overflow makes it pass. */
  INVALID(INT_MAX / 2, INT_MAX);
  INVALID(INT_MAX, INT_MAX);

  /* Truncated error buffer: still OQ_ERR_CONFIG, still terminated. */
  char small[8];
  memset(small, 'x', sizeof small);
  oq_session_opts o = {.heartbeat_interval_ms = 1000, .expiry_ms = 3999};
  ASSERT_ERR(OQ_ERR_CONFIG, oq_session_validate(&o, small, sizeof small));
  ASSERT(memchr(small, '\0', sizeof small) != NULL);

  printf("PASS unit_lib_session_validate\n");
  return 0;
}
