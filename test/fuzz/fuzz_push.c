/*
 * fuzz_push.c: `onceq push`'s reading of stdin (cli/src/push_read.c): the
 * JSON check json_check (cli/src/jsonline.h, on jansson) that every line
 * goes through, with and without --unique-key-field, and the line reader
 * push_read_line over the input as a stream.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "jsonline.h"
#include "push.h"

/* Feed the input through a pipe (an at most 64 KiB slice: one write) and
 * read it back line by line, checking each line as push does. */
static void read_lines(const uint8_t *data, size_t size)
{
  int fds[2];
  if (size > 65536)
    size = 65536;
  if (pipe(fds) != 0)
    return;
  if (size > 0 && write(fds[1], data, size) != (ssize_t)size) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  close(fds[1]);
  push_reader r = {.fd = fds[0]};
  char *line;
  size_t len, total = 0;
  int rc;
  while ((rc = push_read_line(&r, -1, &line, &len)) == 1) {
    total += len + 1;
    FZ_CHECK(total <= size + 1, "lines stay within the input");
    char err[200];
    field_info fi;
    bool obj;
    (void)json_check(line, len, "id", &fi, &obj, err, sizeof err);
  }
  FZ_CHECK(rc == 0, "a pipe read to its end ends with 0");
  free(r.buf);
  close(fds[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* an exact-size copy, not terminated: json_check takes (s, n) */
  char *s = malloc(size ? size : 1);
  if (!s)
    abort();
  memcpy(s, data, size);
  char err[200];
  field_info fi;
  bool obj;
  err[0] = '\0';
  bool ok = json_check(s, size, NULL, &fi, &obj, err, sizeof err);
  if (!ok)
    FZ_CHECK(err[0] != '\0', "invalid JSON says why");
  FZ_CHECK(fi.state == FIELD_NONE, "no field asked, none found");
  bool ok2 = json_check(s, size, "id", &fi, &obj, err, sizeof err);
  FZ_CHECK(ok == ok2, "a key field does not change validity");
  if (ok2 && fi.state == FIELD_OK)
    FZ_CHECK(obj, "a usable key field means an object");
  free(s);
  read_lines(data, size);
  return 0;
}
