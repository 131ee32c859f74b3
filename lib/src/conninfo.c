/*
 * conninfo.c: where to connect, and keeping passwords out of every line we
 * print. Masking works on the text as given (URL or key=value), so a masked
 * conninfo reads like the original with the password replaced by "***".
 */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *oq_conninfo_from_env(void)
{
  const char *v = getenv("ONCEQ_DATABASE_URL");
  if (v && *v)
    return v;
  v = getenv("DATABASE_URL");
  if (v && *v)
    return v;
  return "";
}

/* Append n bytes of s to out (bounded), keeping it NUL-terminated. */
static void put(char *out, size_t outlen, size_t *pos, const char *s, size_t n)
{
  for (size_t i = 0; i < n && *pos + 1 < outlen; i++)
    out[(*pos)++] = s[i];
  if (outlen)
    out[*pos < outlen ? *pos : outlen - 1] = '\0';
}

static int is_url(const char *s)
{
  return strncmp(s, "postgresql://", 13) == 0 ||
         strncmp(s, "postgres://", 11) == 0;
}

static void mask_url(const char *s, char *out, size_t outlen)
{
  size_t pos = 0;
  const char *auth = strstr(s, "://") + 3;
  const char *auth_end = auth + strcspn(auth, "/?");
  put(out, outlen, &pos, s, (size_t)(auth - s));
  /* userinfo is everything before the last '@' of the authority */
  const char *at = NULL;
  for (const char *p = auth; p < auth_end; p++)
    if (*p == '@')
      at = p;
  if (at) {
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (colon) {
      put(out, outlen, &pos, auth, (size_t)(colon - auth) + 1);
      put(out, outlen, &pos, "***", 3);
      put(out, outlen, &pos, at, (size_t)(auth_end - at));
    } else {
      put(out, outlen, &pos, auth, (size_t)(auth_end - auth));
    }
  } else {
    put(out, outlen, &pos, auth, (size_t)(auth_end - auth));
  }
  /* path, then query parameters: mask password=... */
  const char *q = auth_end;
  const char *query = strchr(q, '?');
  if (!query) {
    put(out, outlen, &pos, q, strlen(q));
    return;
  }
  put(out, outlen, &pos, q, (size_t)(query - q) + 1);
  const char *p = query + 1;
  while (*p) {
    size_t len = strcspn(p, "&");
    if (len >= 9 && strncmp(p, "password=", 9) == 0) {
      put(out, outlen, &pos, "password=***", 12);
    } else {
      put(out, outlen, &pos, p, len);
    }
    p += len;
    if (*p == '&') {
      put(out, outlen, &pos, "&", 1);
      p++;
    }
  }
}

static void mask_kv(const char *s, char *out, size_t outlen)
{
  size_t pos = 0;
  const char *p = s;
  while (*p) {
    const char *start = p;
    while (*p && isspace((unsigned char)*p))
      p++;
    const char *key = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p))
      p++;
    size_t keylen = (size_t)(p - key);
    while (*p && isspace((unsigned char)*p))
      p++;
    if (*p != '=') { /* malformed: copy the rest as is */
      put(out, outlen, &pos, start, strlen(start));
      return;
    }
    p++;
    while (*p && isspace((unsigned char)*p))
      p++;
    const char *val = p;
    if (*p == '\'') {
      p++;
      while (*p && *p != '\'') {
        if (*p == '\\' && p[1])
          p++;
        p++;
      }
      if (*p == '\'')
        p++;
    } else {
      while (*p && !isspace((unsigned char)*p)) {
        if (*p == '\\' && p[1])
          p++;
        p++;
      }
    }
    if (keylen == 8 && strncmp(key, "password", 8) == 0) {
      put(out, outlen, &pos, start, (size_t)(val - start));
      put(out, outlen, &pos, "***", 3);
    } else {
      put(out, outlen, &pos, start, (size_t)(p - start));
    }
  }
}

void oq_conninfo_mask(const char *conninfo, char *out, size_t outlen)
{
  if (!out || outlen == 0)
    return;
  out[0] = '\0';
  if (!conninfo)
    return;
  if (is_url(conninfo))
    mask_url(conninfo, out, outlen);
  else
    mask_kv(conninfo, out, outlen);
}

void oq__scrub(char *buf, size_t buflen, const char *secret)
{
  if (!secret || !*secret || !buf)
    return;
  size_t slen = strlen(secret);
  char *hit;
  char *from = buf;
  while ((hit = strstr(from, secret)) != NULL) {
    size_t tail = strlen(hit + slen);
    size_t head = (size_t)(hit - buf);
    if (head + 3 >= buflen) {
      *hit = '\0';
      return;
    }
    /* make room for "***" in place of the secret */
    size_t keep = tail;
    if (head + 3 + keep + 1 > buflen)
      keep = buflen - head - 3 - 1;
    memmove(hit + 3, hit + slen, keep);
    hit[3 + keep] = '\0';
    memcpy(hit, "***", 3);
    from = hit + 3;
  }
}

void oq__one_line(char *buf)
{
  char *w = buf;
  int space = 0;
  for (char *r = buf; *r; r++) {
    if (*r == '\n' || *r == '\t' || *r == '\r' || *r == ' ') {
      space = 1;
      continue;
    }
    if (space && w != buf)
      *w++ = ' ';
    space = 0;
    *w++ = *r;
  }
  *w = '\0';
  /* "...connections? ; fix" reads badly: drop spaces before ';' */
  for (char *p = strstr(buf, " ;"); p; p = strstr(p, " ;"))
    memmove(p, p + 1, strlen(p + 1) + 1);
}

int oq__int(const char *text)
{
  if (!text)
    return 0;
  char *end;
  long v = strtol(text, &end, 10);
  if (end == text || v > INT_MAX || v < INT_MIN)
    return 0;
  return (int)v;
}

void oq_conninfo_mask_in_place(char *arg)
{
  char masked[1024];
  oq_conninfo_mask(arg, masked, sizeof masked);
  size_t len = strlen(arg), mlen = strlen(masked);
  if (strcmp(masked, arg) == 0)
    return;
  if (mlen <= len) {
    memcpy(arg, masked, mlen);
    memset(arg + mlen, ' ', len - mlen);
  } else {
    memset(arg, '*', len);
  }
}
