/*
 * fuzz_duration.c: oq_duration_parse (lib/src/duration.c), the parser of
 * every duration flag ("250ms", "5s", "2m", "1h").
 */
#include "fuzz.h"
#include "onceq/onceq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = fz_cstr(data, size);
  int64_t ms = -12345, again = -54321;
  oq_err e = oq_duration_parse(s, &ms);
  oq_err e2 = oq_duration_parse(s, &again);
  FZ_CHECK(e == e2, "the same text parses the same way twice");
  if (e == OQ_OK) {
    FZ_CHECK(ms == again, "the same text gives the same value");
    FZ_CHECK(ms >= 0, "a duration is never negative");
  }
  free(s);
  return 0;
}
