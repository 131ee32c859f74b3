/*
 * fuzz_retry_after.c: wk_http_parse_retry_after (worker/src/handler_http.c),
 * the --http handler's reading of a server's Retry-After header
 * (delta-seconds or any of the three HTTP-date forms).
 */
#include "fuzz.h"
#include "handler_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* the first 4 bytes pick "now" */
  long now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
  if (size >= 4) {
    uint32_t u;
    memcpy(&u, data, 4);
    now = (long)u;
    data += 4;
    size -= 4;
  }
  char *s = fz_cstr(data, size);
  int ms = wk_http_parse_retry_after(s, now);
  FZ_CHECK(ms == -1 || (ms >= 0 && ms <= 3600 * 1000),
           "-1, or 0 to the 1 h cap in ms");
  free(s);
  return 0;
}
