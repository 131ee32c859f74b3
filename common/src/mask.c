/*
 * mask.c: credentials out of printed URLs (mask.h). The password rule is
 * libonceq's (oq_text_mask_secrets, oq_conninfo_mask); this file adds only
 * the bare-token userinfo of a non-database URL.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mask.h"
#include "onceq/db.h"
#include "onceq/text.h"

/* A database URL: a userinfo without ':' is the user name (libpq). */
static bool is_db_url(const char *s)
{
  return strncmp(s, "postgresql://", 13) == 0 ||
         strncmp(s, "postgres://", 11) == 0;
}

/* The userinfo of the URL at s: [*from, *to) before the last '@' of the
 * authority (a password may hold an unencoded '@'); false when there is
 * none. The authority ends where oq_text_mask_secrets ends it. */
static bool userinfo(const char *s, const char **from, const char **to)
{
  const char *sep = strstr(s, "://");
  if (!sep)
    return false;
  const char *auth = sep + 3;
  const char *end = auth + strcspn(auth, "/?#'\" \t\r\n");
  const char *at = NULL;
  for (const char *p = auth; p < end; p++)
    if (*p == '@')
      at = p;
  if (!at)
    return false;
  *from = auth;
  *to = at;
  return true;
}

void cm_mask_url(const char *url, char *out, size_t outlen)
{
  const char *u = url ? url : "";
  const char *from, *to;
  if (outlen == 0)
    return;
  if (!is_db_url(u) && userinfo(u, &from, &to) && to > from &&
      !memchr(from, ':', (size_t)(to - from))) {
    /* a bare token: scheme:// + *** + the rest, masked by the lib rule
     * (a "password=" in the query) */
    size_t head = (size_t)(from - u);
    char *tmp = malloc(head + 3 + strlen(to) + 1);
    if (!tmp) {
      out[0] = '\0';
      return;
    }
    memcpy(tmp, u, head);
    memcpy(tmp + head, "***", 3);
    memcpy(tmp + head + 3, to, strlen(to) + 1);
    oq_text_mask_secrets(tmp, out, outlen);
    free(tmp);
    return;
  }
  oq_text_mask_secrets(u, out, outlen);
}

char *cm_url_secret(const char *url)
{
  const char *from, *to;
  if (!url || !userinfo(url, &from, &to) || to == from)
    return NULL;
  const char *colon = memchr(from, ':', (size_t)(to - from));
  if (colon)
    from = colon + 1;
  else if (is_db_url(url))
    return NULL; /* a user name */
  if (to == from)
    return NULL;
  return strndup(from, (size_t)(to - from));
}

void cm_mask_conninfo(const char *conninfo, char *out, size_t outlen)
{
  oq_conninfo_mask(conninfo, out, outlen);
}
