/* push_read.c: reading stdin line by line, with a timeout (push.h). */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonline.h"
#include "push.h"

int push_read_line(push_reader *r, int timeout_ms, char **line, size_t *len)
{
  for (;;) {
    size_t from = r->scanned > r->start ? r->scanned : r->start;
    char *nl =
        r->end > from ? memchr(r->buf + from, '\n', r->end - from) : NULL;
    if (nl) {
      *line = r->buf + r->start;
      *len = (size_t)(nl - *line);
      r->start = (size_t)(nl - r->buf) + 1;
      r->scanned = r->start;
      return 1;
    }
    r->scanned = r->end;
    if (r->eof) {
      if (r->end > r->start) {
        *line = r->buf + r->start;
        *len = r->end - r->start;
        r->start = r->scanned = r->end;
        return 1;
      }
      return 0;
    }
    if (r->start > 0) {
      memmove(r->buf, r->buf + r->start, r->end - r->start);
      r->end -= r->start;
      r->scanned -= r->start;
      r->start = 0;
    }
    if (r->end == r->cap) {
      if (r->cap >= MAX_LINE_BYTES)
        return -4;
      size_t nc = r->cap ? r->cap * 2 : 1u << 16;
      char *nb = realloc(r->buf, nc);
      if (!nb) {
        errno = ENOMEM;
        return -1;
      }
      r->buf = nb;
      r->cap = nc;
    }
    if (timeout_ms >= 0) {
      struct pollfd p = {.fd = r->fd, .events = POLLIN};
      int k = poll(&p, 1, timeout_ms);
      if (k < 0 && errno == EINTR)
        return -3;
      if (k == 0)
        return -2;
    }
    ssize_t k = read(r->fd, r->buf + r->end, r->cap - r->end);
    if (k < 0) {
      if (errno == EINTR)
        return -3;
      return -1;
    }
    if (k == 0)
      r->eof = true;
    else
      r->end += (size_t)k;
  }
}
