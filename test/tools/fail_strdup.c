/*
 * fail_strdup.c: an LD_PRELOAD shim for fault-injection tests: out of
 * memory in the middle of a claim without a test hook in the library.
 *
 * strdup returns NULL with errno ENOMEM for the first
 * OQ_FAIL_STRDUP_TIMES (default 1) strings that contain the text of
 * OQ_FAIL_STRDUP_MARKER; every other call copies as libc's would. A test
 * puts the marker in one item's payload: the claim that reads that row
 * fails to copy it (lib/src/claim.c) after its statement committed, so
 * the rows it claimed stay claimed by a live session that holds none of
 * them. Not for sanitizer builds (their runtime must be preloaded first).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long failed;

char *strdup(const char *s)
{
  const char *marker = getenv("OQ_FAIL_STRDUP_MARKER");
  if (marker && *marker && strstr(s, marker)) {
    const char *t = getenv("OQ_FAIL_STRDUP_TIMES");
    long times = t && *t ? strtol(t, NULL, 10) : 1;
    if (atomic_fetch_add(&failed, 1) < times) {
      errno = ENOMEM;
      return NULL;
    }
  }
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p)
    memcpy(p, s, n);
  return p;
}
