/*
 * common_mask.c (unit): cm_mask_url, the one masking rule of the daemons
 * and the CLI (common/src/mask.h): the lib's password rule, plus a bare
 * userinfo token in a non-database URL; and cm_url_secret, what it hides.
 */
#include "oq_test.h"

#include "mask.h"

static char out[256];

static void mask(const char *in, const char *want)
{
  memset(out, 'Q', sizeof out);
  cm_mask_url(in, out, sizeof out);
  ASSERT_STREQ(out, want);
}

static void secret(const char *in, const char *want)
{
  char *got = cm_url_secret(in);
  if (!want) {
    ASSERT(got == NULL);
    return;
  }
  ASSERT(got != NULL);
  ASSERT_STREQ(got, want);
  free(got);
}

int main(void)
{
  /* the lib's rule: a userinfo password, password= values */
  mask("https://user:tok@hooks.example/x", "https://user:***@hooks.example/x");
  mask("http://u:p@ss@127.0.0.1:1/a", "http://u:***@127.0.0.1:1/a");
  mask("https://h.example/x?password=pw&y=1",
       "https://h.example/x?password=***&y=1");
  /* a bare token in a web URL's userinfo */
  mask("http://T0KEN@127.0.0.1:9/hook", "http://***@127.0.0.1:9/hook");
  mask("https://tok@h/x?password=pw", "https://***@h/x?password=***");
  /* a database URL's bare userinfo is the user name: kept */
  mask("postgresql://alice@db/q", "postgresql://alice@db/q");
  mask("postgres://alice:pw@db/q", "postgres://alice:***@db/q");
  /* nothing to hide; an '@' after the path is not a userinfo */
  mask("https://hooks.example/a@b", "https://hooks.example/a@b");
  mask("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook");
  mask(NULL, "");
  mask("", "");
  /* bounded: never a byte past outlen, the secret never half-shown */
  memset(out, 'Q', sizeof out);
  cm_mask_url("http://T0KEN@127.0.0.1:9/hook", out, 9);
  ASSERT_EQ(strlen(out), 8);
  ASSERT_NOT_CONTAINS(out, "T0K");
  ASSERT_EQ(out[9], 'Q');

  secret("https://user:tok@hooks.example/x", "tok");
  secret("http://T0KEN@127.0.0.1:9/hook", "T0KEN");
  secret("http://u:p@ss@h/x", "p@ss");
  secret("postgresql://alice@db/q", NULL);
  secret("https://hooks.example/x", NULL);
  secret(NULL, NULL);

  /* the db rule is lib's, called, not copied */
  char c[128];
  cm_mask_conninfo("host=h password=pw user=u", c, sizeof c);
  ASSERT_STREQ(c, "host=h password=*** user=u");
  printf("PASS unit_lib_common_mask\n");
  return 0;
}
