/*
 * rowjson.c: oq__pgresult_row_json, the --sql result's JSON form, on a
 * PGresult built by hand (no database): numbers, booleans, json/jsonb as
 * themselves, NULL as null, text escaped, NaN as a string, a missing row.
 */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oq_test.h"

static PGresult *make(void)
{
  PGresAttDesc cols[7] = {
      {.name = "id", .typid = 23, .typlen = 4, .atttypmod = -1},
      {.name = "ok", .typid = 16, .typlen = 1, .atttypmod = -1},
      {.name = "doc", .typid = 3802, .typlen = -1, .atttypmod = -1},
      {.name = "note", .typid = 25, .typlen = -1, .atttypmod = -1},
      {.name = "gone", .typid = 25, .typlen = -1, .atttypmod = -1},
      {.name = "x", .typid = 1700, .typlen = -1, .atttypmod = -1},
      {.name = "say \"hi\"", .typid = 701, .typlen = 8, .atttypmod = -1},
  };
  PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
  ASSERT(r != NULL);
  ASSERT(PQsetResultAttrs(r, 7, cols));
  const char *vals[7] = {"42", "t",   "{\"a\": [1, 2]}", "a\"b\\c\nd\x01",
                         NULL, "NaN", "-1.5e3"};
  for (int c = 0; c < 7; c++)
    ASSERT(PQsetvalue(r, 0, c, (char *)vals[c],
                      vals[c] ? (int)strlen(vals[c]) : -1));
  return r;
}

int main(void)
{
  PGresult *r = make();
  char *j = oq__pgresult_row_json(r, 0);
  ASSERT(j != NULL);
  ASSERT_STREQ(j, "{\"id\": 42, \"ok\": true, \"doc\": {\"a\": [1, 2]}, "
                  "\"note\": \"a\\\"b\\\\c\\nd\\u0001\", \"gone\": null, "
                  "\"x\": \"NaN\", \"say \\\"hi\\\"\": -1.5e3}");
  free(j);
  ASSERT(oq__pgresult_row_json(r, 1) == NULL);
  ASSERT(oq__pgresult_row_json(NULL, 0) == NULL);
  PQclear(r);
  printf("PASS rowjson\n");
  return 0;
}
