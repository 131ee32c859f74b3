/*
 * fuzz_worker_flags.c: wk_config_parse (worker/src/cmdline.c), onceq-worker's
 * command line. The input is split into argv words at NUL bytes and
 * newlines.
 */
#include "cmdline.h"
#include "fuzz.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *buf = malloc(size + 1);
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  if (!buf)
    abort();
  memcpy(buf, data, size);
  buf[size] = '\0';
  argv[argc++] = "onceq-worker";
  char *word = buf;
  for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
    if (i == size || buf[i] == '\0' || buf[i] == '\n') {
      buf[i] = '\0';
      argv[argc++] = word;
      word = buf + i + 1;
    }
  }
  argv[argc] = NULL;
  /* each word as its own allocation, so ASan sees an overread of one */
  char *words[MAX_ARGS + 1];
  for (int i = 1; i < argc; i++) {
    words[i] = strdup(argv[i]);
    if (!words[i])
      abort();
    argv[i] = words[i];
  }
  wk_config cfg;
  char err[512];
  err[0] = '\0';
  int rc = wk_config_parse(argc, argv, &cfg, err, sizeof err);
  FZ_CHECK(rc == 0 || rc == 1 || rc == -1, "returns 0, 1 or -1");
  if (rc == -1)
    FZ_CHECK(err[0] != '\0', "bad usage says what to fix");
  if (rc == 0) {
    FZ_CHECK(cfg.concurrency >= 1 && cfg.batch >= 1, "counts are >= 1");
    FZ_CHECK(cfg.heartbeat_interval_ms >= 0 && cfg.session_expiry_ms >= 0,
             "durations are not negative");
  }
  wk_config_free(&cfg);
  for (int i = 1; i < argc; i++)
    free(words[i]);
  free(buf);
  return 0;
}
