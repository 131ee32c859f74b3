/*
 * fuzz.h: what the fuzz targets share. Each target defines
 * LLVMFuzzerTestOneInput (libFuzzer's entry point); built with clang and
 * -fsanitize=fuzzer it is a fuzzer (test/fuzz/run.sh), built with replay.c
 * it runs the committed corpus and the crash regressions as a unit test.
 */
#ifndef ONCEQ_TEST_FUZZ_H
#define ONCEQ_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated heap copy of data (cut at its first NUL, as a C string
 * from argv or a header would be). Free with free(). Aborts on ENOMEM. */
static inline char *fz_cstr(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1);
  if (!s)
    abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* A property a target checks beyond "does not crash": abort with the
 * reason, so libFuzzer saves the input. */
#define FZ_CHECK(cond, what)                                                   \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz: property violated: %s (%s)\n", what, #cond);      \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#endif
