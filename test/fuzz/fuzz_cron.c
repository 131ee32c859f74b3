/*
 * fuzz_cron.c: cm_cron_parse and cm_cron_next (common/src/cron.c),
 * the schedules' 5-field cron expressions and macros.
 */
#include "cron.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* the first 4 bytes pick the start time (0 to about 136 years after 1970) */
  int64_t after = 0;
  if (size >= 4) {
    uint32_t u;
    memcpy(&u, data, 4);
    after = (int64_t)u;
    data += 4;
    size -= 4;
  }
  char *s = fz_cstr(data, size);
  cm_cron c;
  char err[256];
  err[0] = '\0';
  if (cm_cron_parse(s, &c, err, sizeof err) == 0) {
    int64_t next = 0;
    /* an accepted expression always fires again (cron.h) */
    FZ_CHECK(cm_cron_next(&c, after, &next) == 0, "accepted cron fires");
    FZ_CHECK(next > after, "next is strictly after");
    FZ_CHECK(next % 60 == 0, "occurrences fall on whole minutes");
    int64_t next2 = 0;
    FZ_CHECK(cm_cron_next(&c, next, &next2) == 0 && next2 > next,
             "and fires again after that");
  } else {
    FZ_CHECK(err[0] != '\0', "a refusal says why");
    FZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err is terminated");
  }
  free(s);
  return 0;
}
