/*
 * conninfo.c: where to connect, and the one masking rule that keeps
 * credentials out of every line we print (docs/deployment.md "Secrets in
 * logs and ps"). Masking works on the text as given (a URL, key=value
 * conninfo or free text), so a masked text reads like the original with
 * each credential replaced by "***". The rule:
 *  - key=value conninfo: the value of every key that is or ends in
 *    "password" (password, sslpassword); paths (sslkey, passfile) stay;
 *  - a database URL (postgres[ql]://): the userinfo's password and the
 *    query values of those same keys (its other parameters are libpq
 *    settings);
 *  - any other URL: the userinfo's password (a userinfo without ':' is a
 *    token: all of it), every query value, the fragment, and, in an
 *    http(s) URL, the path past its first segment (see mark_web_url);
 *  - free text: each URL in it as above, and every "password=" value.
 * oq_conninfo_mask, oq_text_mask_secrets and their in-place forms all
 * apply it; there is no other.
 */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* A database URL (libpq's two schemes): its path is the database name and
 * its query holds libpq settings, so only the password keys are secret. */
static int is_db_url(const char *s)
{
  return strncmp(s, "postgresql://", 13) == 0 ||
         strncmp(s, "postgres://", 11) == 0;
}

static int is_scheme_char(int c)
{
  return isalnum(c) || c == '+' || c == '-' || c == '.';
}

/* Whether s starts with "scheme://" (a URL rather than key=value). */
static int is_url(const char *s)
{
  const char *p = s;
  while (is_scheme_char((unsigned char)*p))
    p++;
  return p > s && isalpha((unsigned char)*s) && strncmp(p, "://", 3) == 0;
}

/* Does the key k[0..n), percent-decoded as libpq decodes a URL's query
 * ("pass%77ord" is "password"), end in "password" (password, sslpassword)?
 * Case-insensitive: no libpq key differs from a password key by case. */
static int is_password_key(const char *k, size_t n)
{
  static const char want[] = "password";
  char dec[64];
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    int c = (unsigned char)k[i];
    if (c == '%' && i + 2 < n && isxdigit((unsigned char)k[i + 1]) &&
        isxdigit((unsigned char)k[i + 2])) {
      char hex[3] = {k[i + 1], k[i + 2], '\0'};
      c = (int)strtol(hex, NULL, 16);
      i += 2;
    }
    if (j == sizeof dec)
      memmove(dec, dec + 1, --j); /* keep the last bytes: a suffix test */
    dec[j++] = (char)tolower(c);
  }
  return j >= sizeof want - 1 &&
         memcmp(dec + j - (sizeof want - 1), want, sizeof want - 1) == 0;
}

/* Mark hidden the values of the query parameters in [q, end) (q is just
 * past the '?'): every value in a web URL (all_values), only the password
 * keys' in a database URL. A web parameter without '=' is hidden whole. */
static void hide_query(const char *q, const char *end, const char *s,
                       unsigned char *hide, int all_values)
{
  const char *p = q;
  while (p < end) {
    size_t len = strcspn(p, "&");
    if (len > (size_t)(end - p))
      len = (size_t)(end - p);
    size_t klen = strcspn(p, "=&");
    if (klen < len && (all_values || is_password_key(p, klen)))
      memset(hide + (p + klen + 1 - s), 1, len - klen - 1);
    else if (klen >= len && all_values)
      memset(hide + (p - s), 1, len);
    p += len;
    if (p < end && *p == '&')
      p++;
  }
}

/* Hide the userinfo's password: after its first ':', up to at; in a web
 * URL a userinfo without ':' is a bare token ("https://TOKEN@host") and is
 * hidden whole (in a database URL it is the user name). */
static void hide_userinfo(const char *auth, const char *at, const char *s,
                          unsigned char *hide, int web)
{
  const char *colon = memchr(auth, ':', (size_t)(at - auth));
  if (colon)
    memset(hide + (colon + 1 - s), 1, (size_t)(at - colon - 1));
  else if (web)
    memset(hide + (auth - s), 1, (size_t)(at - auth));
}

/*
 * A database URL's password is hidden wherever libpq could read one, and
 * wherever a reader would take for one: the userinfo up to the first '@'
 * before any '/' (libpq's rule: a '?' may be part of the password) and up
 * to the last such '@' (a password with an unencoded '@'), and the value
 * of every query parameter whose percent-decoded key ends in "password",
 * with the query taken from the first '?' after either '@'.
 */
static void mark_db_url(const char *s, unsigned char *hide)
{
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
      hide_userinfo(auth, k == 0 ? first_at : last_at, s, hide, 0);
    const char *q = strchr(from[k], '?');
    if (q)
      hide_query(q + 1, q + strlen(q), s, hide, 0);
  }
}

/*
 * Any other URL (a --http handler, a --notify-url webhook): web services
 * put tokens in the userinfo, in the query (?token=, ?code=, ?sig=), in
 * the fragment and in the path (Slack's /services/T000/B000/XXXX,
 * Discord's /api/webhooks/ID/TOKEN). We hide all of them but, in an
 * http(s) URL, the first path segment (another scheme's path, such as
 * file:///etc/x, is a place, not a token): "https://host[:port]/first/" then
 * "***" keeps enough to tell one endpoint from another, and no rule on what a
 * token looks like can miss one. The authority ends at the first '/', '?' or
 * '#' and its userinfo at its last '@'.
 */
static void mark_web_url(const char *s, unsigned char *hide)
{
  const char *auth = strstr(s, "://") + 3;
  const char *end = auth + strcspn(auth, "/?#");
  const char *at = NULL;
  for (const char *p = auth; p < end; p++)
    if (*p == '@')
      at = p;
  if (at)
    hide_userinfo(auth, at, s, hide, 1);
  const char *p = end;
  int web =
      strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0;
  if (*p == '/' && web) {
    const char *seg_end = p + 1 + strcspn(p + 1, "/?#");
    if (*seg_end == '/') {
      size_t rest = strcspn(seg_end + 1, "?#");
      memset(hide + (seg_end + 1 - s), 1, rest);
    }
    p = seg_end;
  }
  p += strcspn(p, "?#");
  if (*p == '?') {
    const char *q_end = p + 1 + strcspn(p + 1, "#");
    hide_query(p + 1, q_end, s, hide, 1);
    p = q_end;
  }
  if (*p == '#')
    memset(hide + (p + 1 - s), 1, strlen(p + 1));
}

static void mark_url(const char *s, unsigned char *hide)
{
  if (is_db_url(s))
    mark_db_url(s, hide);
  else
    mark_web_url(s, hide);
}

/* key=value conninfo: the value of every key ending in "password". */
static void mark_kv(const char *s, unsigned char *hide)
{
  const char *p = s;
  while (*p) {
    while (*p && isspace((unsigned char)*p))
      p++;
    const char *key = p;
    while (*p && *p != '=' && !isspace((unsigned char)*p))
      p++;
    size_t keylen = (size_t)(p - key);
    while (*p && isspace((unsigned char)*p))
      p++;
    if (*p != '=') /* malformed: nothing more libpq would read */
      return;
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
    if (keylen && is_password_key(key, keylen))
      memset(hide + (val - s), 1, (size_t)(p - val));
  }
}

/* At s (just after "password", blanks and '='), the length of a value in
 * free text: a quoted conninfo value up to its closing quote, else up to a
 * blank, '&' or the end. */
static size_t text_value_len(const char *s)
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

/* Free text (a usage error, a log line, argv): every URL in it gets the
 * URL rule, up to the first blank or quote; every "password=" (any case,
 * so also sslpassword= and PGPASSWORD=; blanks around '=') hides its
 * value. */
static void mark_text(const char *s, unsigned char *hide)
{
  for (const char *p = strstr(s, "://"); p; p = strstr(p, "://")) {
    const char *from = p;
    while (from > s && is_scheme_char((unsigned char)from[-1]))
      from--;
    size_t n = strcspn(p, " \t\r\n'\"<>`");
    if (from < p && isalpha((unsigned char)*from)) {
      char *url = strndup(from, (size_t)(p + n - from));
      if (!url) {
        memset(hide + (p + 3 - s), 1, n >= 3 ? n - 3 : 0);
      } else {
        mark_url(url, hide + (from - s));
        free(url);
      }
    }
    p += n > 3 ? n : 3;
  }
  for (const char *p = s; *p; p++) {
    if (strncasecmp(p, "password", 8) != 0)
      continue;
    const char *q = p + 8;
    while (*q == ' ' || *q == '\t')
      q++;
    if (*q != '=')
      continue;
    q++;
    while (*q == ' ' || *q == '\t')
      q++;
    memset(hide + (q - s), 1, text_value_len(q));
  }
}

unsigned char *oq__mask_marks(const char *s, oq__mask_mode mode)
{
  unsigned char *hide = calloc(strlen(s) + 1, 1);
  if (!hide)
    return NULL;
  if (mode == OQ__MASK_TEXT)
    mark_text(s, hide);
  else if (is_url(s))
    mark_url(s, hide);
  else
    mark_kv(s, hide);
  return hide;
}

void oq__mask_render(const char *s, const unsigned char *hide, char *out,
                     size_t outlen)
{
  size_t n = strlen(s), pos = 0;
  if (!outlen)
    return;
  out[0] = '\0';
  if (!hide) { /* no memory to find them: hide it all */
    put(out, outlen, &pos, "***", 3);
    return;
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
}

void oq_conninfo_mask(const char *conninfo, char *out, size_t outlen)
{
  if (!out || outlen == 0)
    return;
  out[0] = '\0';
  if (!conninfo)
    return;
  unsigned char *hide = oq__mask_marks(conninfo, OQ__MASK_CONNINFO);
  oq__mask_render(conninfo, hide, out, outlen);
  free(hide);
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
