/*
 * conninfo_mask.c (unit): oq_conninfo_mask hides every password libpq
 * would read (key=value, quoted values, URL userinfo, URL query
 * parameters), leaves conninfo without a password byte-for-byte unchanged,
 * and never overruns or leaks through truncation; the in-place form (for
 * argv) keeps the length. Issue 20: every key that is or ends in
 * "password" (sslpassword), not only "password".
 */
#include "oq_test.h"

static char out[1024];

static const char *mask(const char *in)
{
  memset(out, 'Q', sizeof out);
  oq_conninfo_mask(in, out, sizeof out);
  ASSERT(memchr(out, '\0', sizeof out) != NULL);
  return out;
}

/* in -> exactly want. */
static void check_exact(const char *in, const char *want)
{
  const char *got = mask(in);
  if (strcmp(got, want) != 0)
    OQT_FAIL("mask(\"%s\") = \"%s\", want \"%s\"", in, got, want);
}

/* in -> no `secret`, a "***" in its place, and each of keep[] still there. */
static void check_hidden(const char *in, const char *secret,
                         const char *const *keep)
{
  const char *got = mask(in);
  if (strstr(got, secret))
    OQT_FAIL("mask(\"%s\") = \"%s\" still contains \"%s\"", in, got, secret);
  if (!strstr(got, "***"))
    OQT_FAIL("mask(\"%s\") = \"%s\" has no \"***\"", in, got);
  for (; keep && *keep; keep++)
    if (!strstr(got, *keep))
      OQT_FAIL("mask(\"%s\") = \"%s\" lost \"%s\"", in, got, *keep);
}

static void test_keyvalue(void)
{
  check_exact("password=abc", "password=***");
  check_exact("host=h password=abc user=u", "host=h password=*** user=u");
  check_exact("host=h port=5432 password=s3cr3t dbname=d sslmode=disable",
              "host=h port=5432 password=*** dbname=d sslmode=disable");

  const char *k1[] = {"host=h", "dbname=d", NULL};
  check_hidden("host=h password='a b' dbname=d", "a b", k1);
  check_hidden("host=h password='a b' dbname=d", "'a", k1);
  /* An escaped quote inside the quoted value. */
  check_hidden("host=h password='p\\'q r' dbname=d", "q r", k1);
  /* Spaces around '=' are allowed by libpq. */
  const char *k2[] = {"host=h", "user=u", NULL};
  check_hidden("host=h password = s3cr3t user=u", "s3cr3t", k2);
  check_hidden("host=h\tpassword=s3cr3t\tuser=u", "s3cr3t", k2);
  /* Every occurrence, not just the first. */
  check_hidden("password=pw1xyz host=h password=pw2xyz user=u", "pw1xyz", k2);
  check_hidden("password=pw1xyz host=h password=pw2xyz user=u", "pw2xyz", k2);
}

static void test_url(void)
{
  check_exact("postgresql://u:abc@h/db", "postgresql://u:***@h/db");
  check_exact("postgres://u:abc@h:5/db?sslmode=disable",
              "postgres://u:***@h:5/db?sslmode=disable");

  const char *k1[] = {"postgresql://u@h/db?", "password=***", NULL};
  check_hidden("postgresql://u@h/db?password=abc", "abc", k1);
  const char *k2[] = {"sslmode=disable", "application_name=x", NULL};
  check_hidden("postgresql://h/db?sslmode=disable&password=abc"
               "&application_name=x",
               "=abc", k2);
  /* Percent-encoded '@' in the password. */
  const char *k3[] = {"postgresql://u:", "@h/db", NULL};
  check_hidden("postgresql://u:p%40ss@h/db", "p%40ss", k3);
  check_hidden("postgresql://u:p%40ss@h/db", "40ss", k3);
  /* Several hosts. */
  const char *k4[] = {"h1:5432,h2:5433/db", NULL};
  check_hidden("postgresql://u:abc@h1:5432,h2:5433/db", "abc", k4);
  /* Found by test/fuzz (fuzz_conninfo): libpq looks for the userinfo's '@'
   * up to the first '/' only, so an unencoded '?' is part of the password;
   * and it percent-decodes query keys, so pass%77ord is password. */
  const char *k5[] = {"postgresql://u:", "@h/db", NULL};
  check_hidden("postgresql://u:ab?cdef@h/db", "cdef", k5);
  const char *k6[] = {"postgresql://h/db?pass%77ord=", NULL};
  check_hidden("postgresql://h/db?pass%77ord=s3cr3t", "s3cr3t", k6);
}

static void test_unchanged(void)
{
  const char *same[] = {
      "",
      "host=h user=u dbname=d",
      "host=127.0.0.1 port=5432 user=postgres dbname=postgres "
      "sslmode=disable",
      "user=password host=h",
      "passfile=/tmp/pgpass host=h",
      "postgresql://u@h:5432/db",
      "postgresql://h/password",
      "postgres://h/db?sslmode=disable&application_name=x",
      "postgresql://",
  };
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    check_exact(same[i], same[i]);
}

/* Every buffer size: NUL-terminated inside the buffer, nothing written
 * past it, and no piece of the password ever shows. */
static void check_truncation(const char *in, const char *pw)
{
  size_t full = strlen(in) + 8;
  char buf[256];
  ASSERT(full + 16 < sizeof buf);
  for (size_t outlen = 0; outlen <= full; outlen++) {
    memset(buf, 0x7f, sizeof buf);
    oq_conninfo_mask(in, buf, outlen);
    for (size_t i = outlen; i < sizeof buf; i++)
      if ((unsigned char)buf[i] != 0x7f)
        OQT_FAIL("mask(\"%s\", outlen %zu) wrote byte %zu", in, outlen, i);
    if (outlen == 0)
      continue;
    if (!memchr(buf, '\0', outlen))
      OQT_FAIL("mask(\"%s\", outlen %zu): not NUL-terminated", in, outlen);
    for (size_t k = 0; k + 3 <= strlen(pw); k++) {
      char piece[4] = {pw[k], pw[k + 1], pw[k + 2], '\0'};
      if (strstr(buf, piece))
        OQT_FAIL("mask(\"%s\", outlen %zu) = \"%s\" leaks \"%s\"", in, outlen,
                 buf, piece);
    }
  }
}

static void test_truncation(void)
{
  check_truncation("host=h password=Zq9Xw7Vu user=u", "Zq9Xw7Vu");
  check_truncation("password=Zq9Xw7Vu", "Zq9Xw7Vu");
  check_truncation("host=h password='Zq9 Xw7Vu' user=u", "Zq9 Xw7Vu");
  check_truncation("postgresql://u:Zq9Xw7Vu@h/db", "Zq9Xw7Vu");
  check_truncation("postgresql://u@h/db?password=Zq9Xw7Vu", "Zq9Xw7Vu");

  /* A buffer of exactly the masked length + 1 holds it whole. */
  char buf[32];
  const char *want = "password=***";
  oq_conninfo_mask("password=abc", buf, strlen(want) + 1);
  ASSERT_STREQ(buf, want);
  /* One byte short: truncated, still terminated, no password. */
  oq_conninfo_mask("password=abc", buf, strlen(want));
  ASSERT_LE(strlen(buf), strlen(want) - 1);
  ASSERT_NOT_CONTAINS(buf, "abc");
}

/* In place (argv): same length, password gone, no password untouched. */
static void test_in_place(void)
{
  char kv[] = "host=h password=SeCrEt dbname=d";
  oq_conninfo_mask_in_place(kv);
  ASSERT_EQ(strlen(kv), strlen("host=h password=SeCrEt dbname=d"));
  ASSERT_NOT_CONTAINS(kv, "SeCrEt");
  ASSERT_CONTAINS(kv, "host=h password=*** dbname=d");

  char url[] = "postgresql://u:SeCrEt@h/d";
  oq_conninfo_mask_in_place(url);
  ASSERT_EQ(strlen(url), strlen("postgresql://u:SeCrEt@h/d"));
  ASSERT_NOT_CONTAINS(url, "SeCrEt");

  /* the masked form is longer than the original: all '*' */
  char tiny[] = "password=x";
  oq_conninfo_mask_in_place(tiny);
  ASSERT_STREQ(tiny, "**********");

  char plain[] = "host=h dbname=d";
  oq_conninfo_mask_in_place(plain);
  ASSERT_STREQ(plain, "host=h dbname=d");
}

/* Issue 20: sslpassword (and any key ending in "password") is a password
 * too; a path (sslkey, sslcert, passfile) is not a secret and stays. */
static void test_any_password_key(void)
{
  check_exact("host=h sslpassword=S3cr3tX user=u",
              "host=h sslpassword=*** user=u");
  check_exact("host=h sslpassword='a b' password=c user=u",
              "host=h sslpassword=*** password=*** user=u");
  check_exact("postgresql://h/db?sslmode=require&sslpassword=S3cr3tX",
              "postgresql://h/db?sslmode=require&sslpassword=***");
  check_exact("postgresql://h/db?sslpass%77ord=S3cr3tX",
              "postgresql://h/db?sslpass%77ord=***");
  check_exact("host=h sslkey=/etc/k.pem sslcert=/etc/c.pem passfile=/p",
              "host=h sslkey=/etc/k.pem sslcert=/etc/c.pem passfile=/p");
  check_truncation("host=h sslpassword=Zq9Xw7Vu user=u", "Zq9Xw7Vu");
  char kv[] = "host=h sslpassword=SeCrEt dbname=d";
  oq_conninfo_mask_in_place(kv);
  ASSERT_NOT_CONTAINS(kv, "SeCrEt");
  ASSERT_CONTAINS(kv, "host=h sslpassword=*** dbname=d");
}

int main(void)
{
  test_keyvalue();
  test_url();
  test_unchanged();
  test_truncation();
  test_in_place();
  test_any_password_key();
  printf("PASS unit_lib_conninfo_mask\n");
  return 0;
}
