/*
 * fuzz_conninfo.c: oq_conninfo_mask and oq_conninfo_mask_in_place
 * (lib/src/conninfo.c), which hide passwords in URLs and key=value
 * conninfo before anything is logged or shown in ps.
 */
#include <libpq-fe.h>
#include <stdbool.h>

#include "fuzz.h"
#include "onceq/onceq.h"

#define SECRET "Zq9Xw7Vu"

/* Non-overlapping occurrences of needle in hay. */
static size_t count_of(const char *hay, const char *needle)
{
  size_t n = 0, len = strlen(needle);
  for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle))
    n++;
  return n;
}

/* s with its first 0x01 byte replaced by SECRET; NULL when it has none.
 * Free with free(). */
static char *with_secret(const char *s)
{
  const char *m = strchr(s, '\x01');
  if (!m)
    return NULL;
  size_t n = strlen(s), at = (size_t)(m - s);
  char *t = malloc(n + sizeof SECRET);
  if (!t)
    abort();
  memcpy(t, s, at);
  memcpy(t + at, SECRET, sizeof SECRET - 1);
  memcpy(t + at + sizeof SECRET - 1, m + 1, n - at); /* with the NUL */
  return t;
}

/* libpq parses t, a password option (password, sslpassword: issue 20)
 * holds SECRET, and no other option does. */
static bool libpq_only_password_has(const char *t)
{
  char *err = NULL;
  bool pw = false, other = false;
  PQconninfoOption *opts = PQconninfoParse(t, &err);
  PQfreemem(err);
  if (!opts)
    return false;
  for (PQconninfoOption *o = opts; o->keyword; o++) {
    if (!o->val || !strstr(o->val, SECRET))
      continue;
    if (strcmp(o->keyword, "password") == 0 ||
        strcmp(o->keyword, "sslpassword") == 0)
      pw = true;
    else
      other = true;
  }
  PQconninfoFree(opts);
  return pw && !other;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = fz_cstr(data, size);
  size_t len = strlen(s);
  /* a small buffer, an exact one and a roomy one: truncation paths too */
  size_t lens[3] = {1 + (size % 16), len + 1, 2 * len + 64};
  for (int k = 0; k < 3; k++) {
    char *out = malloc(lens[k]);
    if (!out)
      abort();
    memset(out, 'X', lens[k]);
    oq_conninfo_mask(s, out, lens[k]);
    FZ_CHECK(memchr(out, '\0', lens[k]) != NULL, "output is terminated");
    free(out);
  }
  /* The secret stays secret. The first 0x01 byte of the input stands for a
   * password, SECRET: when libpq reads a password holding SECRET, no other
   * option of libpq's holds it and SECRET is written once, the masked text
   * must not show it. */
  char *t = with_secret(s);
  if (t) {
    if (libpq_only_password_has(t) && count_of(t, SECRET) == 1) {
      size_t tlen = strlen(t);
      char *roomy = malloc(2 * tlen + 64);
      if (!roomy)
        abort();
      oq_conninfo_mask(t, roomy, 2 * tlen + 64);
      FZ_CHECK(strstr(roomy, SECRET) == NULL,
               "the password libpq reads is masked");
      free(roomy);
    }
    free(t);
  }
  /* in place: never longer than the input */
  oq_conninfo_mask_in_place(s);
  FZ_CHECK(strlen(s) <= len, "masking in place does not grow the text");
  /* masking is idempotent on a roomy buffer */
  char *once = malloc(2 * len + 64), *twice = malloc(2 * len + 64);
  if (!once || !twice)
    abort();
  oq_conninfo_mask(s, once, 2 * len + 64);
  oq_conninfo_mask(once, twice, 2 * len + 64);
  free(once);
  free(twice);
  free(s);
  return 0;
}
