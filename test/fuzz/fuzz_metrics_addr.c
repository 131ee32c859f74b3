/*
 * fuzz_metrics_addr.c: cm_promhttp_parse_addr (common/src/promhttp.c), the
 * --metrics-addr HOST:PORT of the worker and the coordinator.
 */
#include "fuzz.h"
#include "promhttp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = fz_cstr(data, size);
  cm_promhttp_addr a;
  char why[256];
  why[0] = '\0';
  int rc = cm_promhttp_parse_addr(s, &a, why, sizeof why);
  FZ_CHECK(rc == 0 || rc == -1, "returns 0 or -1");
  if (rc == -1)
    FZ_CHECK(why[0] != '\0', "a refusal says what was expected");
  /* why may be NULL */
  cm_promhttp_addr b;
  FZ_CHECK(cm_promhttp_parse_addr(s, &b, NULL, 0) == rc,
           "the same answer without why");
  free(s);
  return 0;
}
