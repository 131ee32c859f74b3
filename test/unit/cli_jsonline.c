/*
 * cli_jsonline.c (unit): json_check (cli/src/jsonline.h), the check of
 * every `onceq push` payload: jansson's verdict in push's words, with the
 * byte column where the offending token starts, the nesting limit, and
 * what --unique-key-field finds.
 */
#include "oq_test.h"

#include "jsonline.h"

static char err[256];

static void bad(const char *line, const char *want)
{
  field_info fi;
  bool obj;
  err[0] = '\0';
  if (json_check(line, strlen(line), NULL, &fi, &obj, err, sizeof err))
    OQT_FAIL("json_check(%s) accepted it, want \"%s\"", line, want);
  ASSERT_STREQ(err, want);
}

static void field(const char *line, const char *name, field_state want,
                  size_t bytes, bool want_obj)
{
  field_info fi;
  bool obj;
  if (!json_check(line, strlen(line), name, &fi, &obj, err, sizeof err))
    OQT_FAIL("json_check(%s) refused it: %s", line, err);
  ASSERT_EQ(fi.state, want);
  ASSERT_EQ(obj, want_obj);
  if (want == FIELD_OK)
    ASSERT_EQ(fi.bytes, bytes);
}

int main(void)
{
  /* the structural mistakes, worded and placed as push always did */
  bad("{\"a\":1 \"b\":2}", "invalid JSON: expected ',' or '}' at column 8");
  bad("{\"a\":1,}", "invalid JSON: expected a \"key\" at column 8");
  bad("{\"a\" 1}", "invalid JSON: expected ':' at column 6");
  bad("{\"a\":}", "invalid JSON: expected a value at column 6");
  bad("[1 2]", "invalid JSON: expected ',' or ']' at column 4");
  bad("[1,2", "invalid JSON: expected ',' or ']' at column 5");
  bad("[1,", "invalid JSON: unexpected end at column 4");
  bad("{\"a\":", "invalid JSON: unexpected end at column 6");
  bad("{\"a\":1}x", "invalid JSON: text after the value at column 8");
  bad("nope", "invalid JSON: expected a value at column 1");
  /* inside a token: the column of the token */
  bad("{\"a\":\"x\\u0000\"}",
      "invalid JSON: \\u0000 (PostgreSQL jsonb refuses it) at column 6");
  bad("{\"a\":\"\\ud800\"}", "invalid JSON: unpaired surrogate at column 6");
  bad("{\"a\":01}", "invalid JSON: bad number at column 6");
  bad("{\"a\":\"open", "invalid JSON: unterminated string at column 6");
  bad("{\"a\":\"\xff\"}", "invalid JSON: invalid UTF-8 at column 6");
  /* the nesting limit is ours, the same on every server */
  char deep[CLI_JSON_MAX_NESTING + 3];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  bad(deep, "invalid JSON: nested deeper than 1000 levels at column 1001");

  /* valid values of every kind; numbers beyond a double are the server's */
  field("42", NULL, FIELD_NONE, 0, false);
  field("\"s\"", NULL, FIELD_NONE, 0, false);
  field("{\"a\":123456789012345678901234567890}", NULL, FIELD_NONE, 0, true);
  field("{\"a\":1e400}", NULL, FIELD_NONE, 0, true);
  /* --unique-key-field: the last duplicate wins, as in jsonb */
  field("{\"id\":\"abc\"}", "id", FIELD_OK, 3, true);
  field("{\"id\":\"M\\u00fcller\"}", "id", FIELD_OK, 7, true);
  field("{\"id\":5}", "id", FIELD_OK, 1, true);
  field("{\"id\":[1]}", "id", FIELD_BAD, 0, true);
  field("{\"id\":null}", "id", FIELD_BAD, 0, true);
  field("{\"x\":1}", "id", FIELD_NONE, 0, true);
  field("[{\"id\":1}]", "id", FIELD_NONE, 0, false);
  field("{\"id\":1,\"id\":\"two\"}", "id", FIELD_OK, 3, true);
  field("{\"id\":\"two\",\"id\":{}}", "id", FIELD_BAD, 0, true);
  printf("PASS unit_cli_jsonline\n");
  return 0;
}
