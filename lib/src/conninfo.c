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

/* Is the query parameter key k[0..n) "password" once percent-decoded, as
 * libpq decodes it ("pass%77ord" is "password")? */
static int is_password_key(const char *k, size_t n)
{
  static const char want[] = "password";
  size_t j = 0;
  for (size_t i = 0; i < n; i++, j++) {
    int c = (unsigned char)k[i];
    if (c == '%' && i + 2 < n && isxdigit((unsigned char)k[i + 1]) &&
        isxdigit((unsigned char)k[i + 2])) {
      char hex[3] = {k[i + 1], k[i + 2], '\0'};
      c = (int)strtol(hex, NULL, 16);
      i += 2;
    }
    if (j >= sizeof want - 1 || c != want[j])
      return 0;
  }
  return j == sizeof want - 1;
}

/* Hide the password values of the query parameters from the '?' at q on. */
static void hide_query(const char *q, const char *s, unsigned char *hide)
{
  const char *p = q + 1;
  while (*p) {
    size_t len = strcspn(p, "&");
    size_t klen = strcspn(p, "=&");
    if (klen < len && is_password_key(p, klen))
      memset(hide + (p + klen + 1 - s), 1, len - klen - 1);
    p += len;
    if (*p == '&')
      p++;
  }
}

/* Hide the userinfo's password: after its first ':', up to at. */
static void hide_userinfo(const char *auth, const char *at, const char *s,
                          unsigned char *hide)
{
  const char *colon = memchr(auth, ':', (size_t)(at - auth));
  if (colon)
    memset(hide + (colon + 1 - s), 1, (size_t)(at - colon - 1));
}

/*
 * A URL's password is hidden wherever libpq could read one, and wherever a
 * reader would take for one: the userinfo up to the first '@' before any
 * '/' (libpq's rule: a '?' may be part of the password) and up to the last
 * such '@' (a password with an unencoded '@'), and the value of every query
 * parameter whose percent-decoded key is "password", with the query taken
 * from the first '?' after either '@'. Each run of hidden bytes becomes
 * "***"; everything else is copied as written.
 */
static void mask_url(const char *s, char *out, size_t outlen)
{
  size_t n = strlen(s), pos = 0;
  unsigned char *hide = calloc(n + 1, 1);
  if (!hide) { /* no memory: hide everything after the scheme */
    put(out, outlen, &pos, s, (size_t)(strstr(s, "://") + 3 - s));
    put(out, outlen, &pos, "***", 3);
    return;
  }
  const char *auth = strstr(s, "://") + 3;
  const char *slash = auth + strcspn(auth, "/");
  const char *first_at = memchr(auth, '@', (size_t)(slash - auth));
  const char *last_at = NULL;
  for (const char *p = auth; p < slash; p++)
    if (*p == '@')
      last_at = p;
  const char *from[2] = {first_at ? first_at : auth, last_at ? last_at : auth};
  for (int k = 0; k < 2; k++) {
    if (k == 0 ? first_at != NULL : last_at != NULL)
      hide_userinfo(auth, k == 0 ? first_at : last_at, s, hide);
    const char *q = strchr(from[k], '?');
    if (q)
      hide_query(q, s, hide);
  }
  for (size_t i = 0; i < n;) {
    if (!hide[i]) {
      put(out, outlen, &pos, s + i, 1);
      i++;
      continue;
    }
    put(out, outlen, &pos, "***", 3);
    while (i < n && hide[i])
      i++;
  }
  if (outlen)
    out[pos < outlen ? pos : outlen - 1] = '\0';
  free(hide);
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
