/*
 * text.c: clean, escaped and masked text (see onceq/text.h for the terms).
 * The one place that decides what "valid UTF-8" means for onceq.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
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

/* The masking rule itself is conninfo.c's (oq__mask_marks): one rule for
 * conninfo, URLs and free text. */
void oq_text_mask_secrets(const char *in, char *out, size_t outlen)
{
  const char *s = in ? in : "";
  if (!out || outlen == 0)
    return;
  unsigned char *hide = oq__mask_marks(s, OQ__MASK_TEXT);
  oq__mask_render(s, hide, out, outlen);
  free(hide);
}

void oq_text_mask_secrets_in_place(char *s)
{
  if (!s)
    return;
  size_t n = strlen(s);
  unsigned char *hide = oq__mask_marks(s, OQ__MASK_TEXT);
  for (size_t i = 0; i < n; i++)
    if (!hide || hide[i])
      s[i] = '*';
  free(hide);
}

int oq_text_secret_next(const char *text, size_t from, size_t *start,
                        size_t *len)
{
  if (!text || from >= strlen(text))
    return 0;
  unsigned char *hide = oq__mask_marks(text, OQ__MASK_TEXT);
  if (!hide)
    return 0;
  size_t i = from;
  while (text[i] && !hide[i])
    i++;
  size_t j = i;
  while (text[j] && hide[j])
    j++;
  free(hide);
  if (j == i)
    return 0;
  *start = i;
  *len = j - i;
  return 1;
}

void oq_text_scrub(char *buf, size_t cap, const char *secret)
{
  size_t slen = secret ? strlen(secret) : 0;
  if (!buf || cap == 0 || slen == 0)
    return;
  char *p = strstr(buf, secret);
  while (p) {
    size_t room = cap - (size_t)(p - buf) - 1; /* bytes from p to the last */
    size_t tail = strlen(p + slen);
    if (room < 3) {
      *p = '\0';
      return;
    }
    if (tail > room - 3)
      tail = room - 3;
    memmove(p + 3, p + slen, tail);
    p[3 + tail] = '\0';
    memcpy(p, "***", 3);
    p = strstr(p + 3, secret);
  }
}
