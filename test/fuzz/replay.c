/*
 * replay.c: run a fuzz target's LLVMFuzzerTestOneInput over files, without
 * libFuzzer: the committed seed corpus and the crash regressions, as a unit
 * test in every build (gcc, ASan+UBSan). Arguments are files or
 * directories (their regular files, one level). Exit 0 when every input
 * ran; a crash or a violated property aborts.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf)
      abort();
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  fclose(f);
  /* exactly n bytes, so ASan sees an overread */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact)
    abort();
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv)
{
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      bad++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]) != 0;
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        bad += run_file(path) != 0;
        files++;
      }
    }
    if (d)
      closedir(d);
  }
  printf("replay: %d input(s) ran, %d unreadable\n", files, bad);
  return bad || files == 0 ? 1 : 0;
}
