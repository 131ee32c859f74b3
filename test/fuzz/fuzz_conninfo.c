/*
 * fuzz_conninfo.c: oq_conninfo_mask and oq_conninfo_mask_in_place
 * (lib/src/conninfo.c), which hide passwords in URLs and key=value
 * conninfo before anything is logged or shown in ps.
 */
#include "fuzz.h"
#include "onceq/onceq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = fz_cstr(data, size);
  size_t len = strlen(s);
  /* a small buffer, an exact one and a roomy one: truncation paths too */
  size_t lens[3] = {1 + (size % 16), len + 1, 2 * len + 64};
  for (int k = 0; k < 3; k++) {
    char *out = malloc(lens[k]);
    if (!out)
      abort();
    memset(out, 'X', lens[k]);
    oq_conninfo_mask(s, out, lens[k]);
    FZ_CHECK(memchr(out, '\0', lens[k]) != NULL, "output is terminated");
    free(out);
  }
  /* in place: never longer than the input */
  oq_conninfo_mask_in_place(s);
  FZ_CHECK(strlen(s) <= len, "masking in place does not grow the text");
  /* masking is idempotent on a roomy buffer */
  char *once = malloc(2 * len + 64), *twice = malloc(2 * len + 64);
  if (!once || !twice)
    abort();
  oq_conninfo_mask(s, once, 2 * len + 64);
  oq_conninfo_mask(once, twice, 2 * len + 64);
  free(once);
  free(twice);
  free(s);
  return 0;
}
