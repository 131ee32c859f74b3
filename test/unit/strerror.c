/*
 * strerror.c (unit): every oq_err code has its own non-empty text, and
 * codes outside the enum still get a usable (non-NULL) text.
 */
#include "oq_test.h"

#include <limits.h>

int main(void)
{
  ASSERT(OQ_OK == 0);
  ASSERT(OQ_ERR__COUNT > OQ_ERR_CALLBACK);
  for (int i = OQ_OK; i < OQ_ERR__COUNT; i++) {
    const char *a = oq_strerror((oq_err)i);
    if (!a || !*a)
      OQT_FAIL("oq_strerror(%d) is %s", i, a ? "empty" : "NULL");
    for (int j = OQ_OK; j < i; j++) {
      const char *b = oq_strerror((oq_err)j);
      if (strcmp(a, b) == 0)
        OQT_FAIL("oq_strerror(%d) == oq_strerror(%d) == \"%s\"", i, j, a);
    }
  }
  /* The kinds callers branch on read as what they are. */
  const char *cl = oq_strerror(OQ_ERR_CLAIM_LOST);
  if (!strstr(cl, "claim"))
    OQT_FAIL("oq_strerror(OQ_ERR_CLAIM_LOST) = \"%s\"", cl);

  const int bad[] = {OQ_ERR__COUNT, OQ_ERR__COUNT + 1, 1000, -1, INT_MIN,
                     INT_MAX};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    const char *t = oq_strerror((oq_err)bad[k]);
    if (!t)
      OQT_FAIL("oq_strerror(%d) is NULL", bad[k]);
    (void)strlen(t); /* readable */
  }
  printf("PASS unit_lib_strerror\n");
  return 0;
}
