/*
 * text.c: clean, escaped and masked text (see onceq/text.h for the terms).
 * The one place that decides what "valid UTF-8" means for onceq.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "onceq/text.h"

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 when
 * the bytes there are not one (invalid, overlong, surrogate, or cut). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
  unsigned c = s[0];
  size_t len;
  unsigned min;
  unsigned cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    min = 0x80;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    min = 0x800;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    min = 0x10000;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

/* Whether the bytes from s[0] to s[n) are a valid but cut UTF-8 prefix:
 * a lead byte followed only by continuation bytes, fewer than it needs. */
static int cut_prefix(const unsigned char *s, size_t n)
{
  if (n >= 4 || s[0] < 0xC2 || s[0] > 0xF4)
    return 0;
  for (size_t k = 1; k < n; k++)
    if ((s[k] & 0xC0) != 0x80)
      return 0;
  return 1;
}

size_t oq_text_clean(char *dst, size_t cap, const char *src, size_t n)
{
  const unsigned char *s = (const unsigned char *)src;
  size_t in = 0, out = 0;
  if (cap == 0)
    return 0;
  while (in < n) {
    size_t len = s[in] ? utf8_seq_len(s + in, n - in) : 0;
    if (len == 0 && cut_prefix(s + in, n - in))
      break; /* a character cut by whoever bounded src */
    if (out + (len ? len : 1) > cap - 1)
      break;
    if (len == 0) {
      dst[out++] = '?';
      in++;
    } else {
      memmove(dst + out, s + in, len); /* dst may be src */
      out += len;
      in += len;
    }
  }
  dst[out] = '\0';
  return out;
}

size_t oq_text_escape(char *dst, size_t cap, const char *src)
{
  const unsigned char *s = (const unsigned char *)src;
  size_t n = strlen(src), in = 0, out = 0;
  if (cap == 0)
    return 0;
  while (in < n) {
    char esc[8];
    size_t len = utf8_seq_len(s + in, n - in);
    const char *put = esc;
    size_t plen;
    unsigned c = s[in];
    if (len == 0) {
      esc[0] = '?';
      plen = 1;
      len = 1;
    } else if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
      esc[0] = '\\';
      esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
      plen = 2;
    } else if (c < 0x20 || c == 0x7F) {
      plen = (size_t)snprintf(esc, sizeof esc, "\\x%02X", c);
    } else if (len == 2 && c == 0xC2 && s[in + 1] < 0xA0) {
      /* C1 controls (U+0080..U+009F): some terminals act on them */
      plen = (size_t)snprintf(esc, sizeof esc, "\\u%04X", s[in + 1]);
    } else {
      put = (const char *)s + in;
      plen = len;
    }
    if (out + plen > cap - 1)
      break;
    memcpy(dst + out, put, plen);
    out += plen;
    in += len;
  }
  dst[out] = '\0';
  return out;
}

/* Append n bytes of s to out (bounded), keeping it NUL-terminated. */
static void put(char *out, size_t outlen, size_t *pos, const char *s, size_t n)
{
  for (size_t i = 0; i < n && *pos + 1 < outlen; i++)
    out[(*pos)++] = s[i];
  if (outlen)
    out[*pos < outlen ? *pos : outlen - 1] = '\0';
}

/* Where the authority after "://" at p ends. */
static const char *authority_end(const char *p)
{
  return p + strcspn(p, "/?#'\" \t\r\n");
}

/* At s (just after "password" and optional blanks and '='), the length of
 * the value: a quoted conninfo value up to its closing quote, else up to
 * a blank, '&' or the end. */
static size_t value_len(const char *s)
{
  if (*s == '\'') {
    size_t i = 1;
    while (s[i] && s[i] != '\'') {
      if (s[i] == '\\' && s[i + 1])
        i++;
      i++;
    }
    return s[i] ? i + 1 : i;
  }
  return strcspn(s, " \t\r\n&");
}

/* The next credential at or after p: its first byte, with its length in
 * *len; NULL when there is none. A credential is the password of a URL's
 * userinfo (scheme://user:PW@host) or the value of "password=" (any case,
 * so also PGPASSWORD= and sslpassword=; blanks around '=' as libpq allows). */
static const char *find_secret(const char *p, size_t *len)
{
  while (*p) {
    if (strncmp(p, "://", 3) == 0) {
      const char *auth = p + 3;
      const char *end = authority_end(auth);
      const char *at = NULL;
      for (const char *q = auth; q < end; q++)
        if (*q == '@')
          at = q;
      const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
      if (colon && at > colon + 1) {
        *len = (size_t)(at - colon - 1);
        return colon + 1;
      }
      p = auth;
      continue;
    }
    if (strncasecmp(p, "password", 8) == 0) {
      const char *q = p + 8;
      while (*q == ' ' || *q == '\t')
        q++;
      if (*q == '=') {
        q++;
        while (*q == ' ' || *q == '\t')
          q++;
        size_t vl = value_len(q);
        if (vl) {
          *len = vl;
          return q;
        }
      }
      p += 8;
      continue;
    }
    p++;
  }
  return NULL;
}

void oq_text_mask_secrets(const char *in, char *out, size_t outlen)
{
  size_t pos = 0, len = 0;
  const char *p = in ? in : "";
  if (outlen)
    out[0] = '\0';
  for (const char *sec = find_secret(p, &len); sec;
       sec = find_secret(p, &len)) {
    put(out, outlen, &pos, p, (size_t)(sec - p));
    put(out, outlen, &pos, "***", 3);
    p = sec + len;
  }
  put(out, outlen, &pos, p, strlen(p));
}

void oq_text_mask_secrets_in_place(char *s)
{
  size_t len = 0;
  const char *p = s;
  for (const char *sec = find_secret(p, &len); sec;
       sec = find_secret(p, &len)) {
    memset(s + (sec - s), '*', len);
    p = sec + len;
  }
}
