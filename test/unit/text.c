/*
 * text.c (unit): oq_text_clean (valid UTF-8 for the database, bounded),
 * oq_text_escape (one line for a terminal or log) and oq_text_mask_secrets
 * (no credential in a usage error).
 */
#include "oq_test.h"

static char out[256];

static void clean(const char *src, size_t n, size_t cap, const char *want)
{
  memset(out, 'Q', sizeof out);
  size_t len = oq_text_clean(out, cap, src, n);
  ASSERT_EQ(len, strlen(out));
  ASSERT_STREQ(out, want);
}

static void escape(const char *src, size_t cap, const char *want)
{
  memset(out, 'Q', sizeof out);
  size_t len = oq_text_escape(out, cap, src);
  ASSERT_EQ(len, strlen(out));
  ASSERT_STREQ(out, want);
}

static void mask(const char *in, const char *want)
{
  memset(out, 'Q', sizeof out);
  oq_text_mask_secrets(in, out, sizeof out);
  ASSERT_STREQ(out, want);
}

int main(void)
{
  /* clean: Latin-1 stderr ("M\374ller") becomes valid UTF-8 */
  clean("Fehler: Datei M\374ller.txt fehlt", 30, sizeof out,
        "Fehler: Datei M?ller.txt fehlt");
  clean("a\0b\377c", 5, sizeof out, "a?b?c");
  clean("M\xc3\xbcller", 7, sizeof out, "M\xc3\xbcller");
  clean("\xed\xa0\x80x", 4, sizeof out, "???x"); /* a surrogate */
  clean("\xc0\xaf", 2, sizeof out, "??");        /* overlong */
  clean("ab\xc3", 3, sizeof out, "ab");          /* cut at the end */
  clean("ab\xe2\x82", 4, sizeof out, "ab");
  clean("ab\xc3\xbc", 4, 4, "ab"); /* the whole char does not fit */
  clean("abcdef", 6, 4, "abc");
  clean("", 0, sizeof out, "");
  ASSERT_EQ(oq_text_clean(out, 0, "x", 1), 0);

  /* escape: one line, no terminal controls */
  escape("line1\nline2", sizeof out, "line1\\nline2");
  escape("a\tb\r\n", sizeof out, "a\\tb\\r\\n");
  escape("\033[31mred", sizeof out, "\\x1B[31mred");
  escape("del\x7f", sizeof out, "del\\x7F");
  escape("c1\xc2\x9b", sizeof out, "c1\\u009B");
  escape("back\\slash", sizeof out, "back\\\\slash");
  escape("M\xfcller \xc3\xbc", sizeof out, "M?ller \xc3\xbc");
  escape("ab\ncd", 4, "ab"); /* "\n" would not fit whole */
  escape("2026-01-01T00:00:00Z error forged", sizeof out,
         "2026-01-01T00:00:00Z error forged");

  /* mask */
  mask("unknown option --db=postgresql://u:pw@h/d",
       "unknown option --db=postgresql://u:***@h/d");
  mask("postgres://alice:s3cr%40t@db.example:5432/q?sslmode=require",
       "postgres://alice:***@db.example:5432/q?sslmode=require");
  mask("https://user:tok@hooks.example/x", "https://user:***@hooks.example/x");
  mask("postgresql://u@h/d", "postgresql://u@h/d"); /* no password */
  mask("postgresql://h/d?user=u&password=pw&x=1",
       "postgresql://h/d?user=u&password=***&x=1");
  mask("host=h password=pw user=u", "host=h password=*** user=u");
  mask("host=h password = 'p w\\'x' user=u", "host=h password = *** user=u");
  mask("PGPASSWORD=pw onceq list", "PGPASSWORD=*** onceq list");
  mask("unknown command a:b@c", "unknown command a:b@c");
  mask("no secrets here: 5s, 2m", "no secrets here: 5s, 2m");
  mask("", "");
  memset(out, 'Q', sizeof out);
  oq_text_mask_secrets("postgresql://u:pw@h/d", out, 12);
  ASSERT_EQ(strlen(out), 11);
  ASSERT_NOT_CONTAINS(out, "pw");
  /* in place, for argv: same length, password gone */
  char argv1[] = "https://user:tok3n@hooks.example/x?password=abc&y=1";
  oq_text_mask_secrets_in_place(argv1);
  ASSERT_STREQ(argv1, "https://user:*****@hooks.example/x?password=***&y=*");
  char argv2[] = "http://127.0.0.1:8080/hook";
  oq_text_mask_secrets_in_place(argv2);
  ASSERT_STREQ(argv2, "http://127.0.0.1:8080/hook");

  /* issue 20: one rule for every URL. A web URL's query values, its
   * fragment, its path past the first segment (Slack-style webhook
   * tokens) and a bare userinfo token are hidden; a database URL keeps its
   * non-password settings. */
  mask("http://127.0.0.1:9/x?token=S3cr3tX", "http://127.0.0.1:9/x?token=***");
  mask("https://h.example/hook?code=A1&sig=B2&v=1",
       "https://h.example/hook?code=***&sig=***&v=***");
  mask("https://h.example/x?password=pw&y=1",
       "https://h.example/x?password=***&y=***");
  mask("https://hooks.slack.com/services/T000/B000/XXXXS3cr3tX",
       "https://hooks.slack.com/services/***");
  mask("https://h.example/cb#access_token=S3cr3tX", "https://h.example/cb#***");
  mask("http://T0KEN@127.0.0.1:9/hook", "http://***@127.0.0.1:9/hook");
  mask("postgresql://alice@db/q", "postgresql://alice@db/q");
  mask("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook");
  mask("http://127.0.0.1:8080/hook/", "http://127.0.0.1:8080/hook/");
  mask("file:///etc/passwd", "file:///etc/passwd"); /* a place, no token */
  mask("POST http://127.0.0.1:9/x?token=S3cr3tX failed: refused",
       "POST http://127.0.0.1:9/x?token=*** failed: refused");
  mask("host=h sslpassword=S3cr3tX user=u", "host=h sslpassword=*** user=u");
  char argv3[] = "http://127.0.0.1:9/x?token=S3cr3tX";
  oq_text_mask_secrets_in_place(argv3);
  ASSERT_STREQ(argv3, "http://127.0.0.1:9/x?token=*******");
  char argv4[] = "https://hooks.slack.com/services/T000/B000/XXXX";
  oq_text_mask_secrets_in_place(argv4);
  ASSERT_STREQ(argv4, "https://hooks.slack.com/services/**************");
  printf("PASS unit_lib_text\n");
  return 0;
}
