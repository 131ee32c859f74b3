/*
 * common_mask.c (unit): the daemons' log sink as the last line of defence
 * (common/src/logsink.h, issue 20): every line is masked by libonceq's one
 * rule, then scrubbed of the secrets registered at start-up, so a message
 * that echoes a token without its URL around it (libcurl's or a server's
 * text) shows "***" instead.
 */
#include "oq_test.h"

#include "logsink.h"

static char buf[256];

static void scrub(const char *in, const char *want)
{
  snprintf(buf, sizeof buf, "%s", in);
  cm_logsink_scrub(buf, sizeof buf);
  ASSERT_STREQ(buf, want);
}

int main(void)
{
  /* the rule alone, before anything is registered */
  scrub("POST http://127.0.0.1:9/x?token=S3cr3tX: refused",
        "POST http://127.0.0.1:9/x?token=*** refused"); /* ":" is the value's */
  scrub("echo: S3cr3tX", "echo: S3cr3tX");
  scrub("connect to host=h sslpassword=Pw5eCrEt user=u",
        "connect to host=h sslpassword=*** user=u");

  /* registered: a --db conninfo, a --notify-url, a status token */
  cm_logsink_secret("host=h sslpassword=Pw5eCrEt password=pw user=u", false);
  cm_logsink_secret("https://hooks.slack.com/services/T000/B000/XyZ0tok3n",
                    false);
  cm_logsink_secret("http://127.0.0.1:9/x?token=S3cr3tX&a=b", false);
  cm_logsink_secret("St4tusT0ken", true);
  cm_logsink_secret("host=h password='qu0ted pw'", false);
  cm_logsink_secret(NULL, true);
  cm_logsink_secret("", false);
  scrub("server said: Pw5eCrEt is wrong", "server said: *** is wrong");
  scrub("echo: S3cr3tX", "echo: ***");
  scrub("bearer St4tusT0ken refused", "bearer *** refused");
  scrub("said qu0ted pw", "said ***"); /* the value, not its quotes */
  scrub("invalid path T000/B000/XyZ0tok3n", "invalid path ***");
  /* too short to scrub everywhere ("pw", "b"): only next to their key */
  scrub("pw and b stay", "pw and b stay");
  /* bounded: truncated, terminated, never the secret */
  char small[12] = "x Pw5eCrEt";
  cm_logsink_scrub(small, sizeof small);
  ASSERT_STREQ(small, "x ***");
  printf("PASS unit_lib_common_mask\n");
  return 0;
}
