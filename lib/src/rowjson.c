/*
 * rowjson.c: one row of a query result as a JSON object, the result a
 * `--sql` handler keeps for its waiters (wait.h: "the first row of the
 * statement as JSON"). A formatter over a row's names, type oids and texts:
 * it never sees libpq (the connection files, db*.c, take the row out of the
 * result and call it: oq__pgresult_row_json).
 *
 * Types: bool -> true/false; int2/int4/int8/oid/float4/float8/numeric ->
 * a JSON number (NaN and infinities -> a string); json/jsonb -> the value
 * itself; NULL -> null; everything else -> a JSON string of its text.
 * Keys are the column names, in order (a repeated name repeats).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define OID_BOOL 16u
#define OID_INT8 20u
#define OID_INT2 21u
#define OID_INT4 23u
#define OID_OID 26u
#define OID_JSON 114u
#define OID_FLOAT4 700u
#define OID_FLOAT8 701u
#define OID_NUMERIC 1700u
#define OID_JSONB 3802u

typedef struct buf {
  char *p;
  size_t len, cap;
  bool oom;
} buf;

static void put(buf *b, const char *s, size_t n)
{
  if (b->oom)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
  put(b, s, strlen(s));
}

/* s as a JSON string with its quotes (control characters as \uXXXX). */
static void put_str(buf *b, const char *s)
{
  static const char hex[] = "0123456789abcdef";
  put(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char e[2] = {'\\', (char)*c};
      put(b, e, 2);
    } else if (*c == '\n') {
      put(b, "\\n", 2);
    } else if (*c == '\t') {
      put(b, "\\t", 2);
    } else if (*c == '\r') {
      put(b, "\\r", 2);
    } else if (*c < 0x20) {
      char e[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15]};
      put(b, e, 6);
    } else {
      put(b, (const char *)c, 1);
    }
  }
  put(b, "\"", 1);
}

/* A numeric column's text is a JSON number unless it is NaN/Infinity. */
static bool json_number(const char *v)
{
  const char *p = v;
  if (*p == '-')
    p++;
  return *p >= '0' && *p <= '9';
}

char *oq__row_json(int ncols, const char *const *names,
                   const unsigned int *types, const char *const *vals)
{
  buf b = {0};
  put(&b, "{", 1);
  for (int c = 0; c < ncols; c++) {
    if (c)
      put(&b, ", ", 2);
    put_str(&b, names[c] ? names[c] : "");
    put(&b, ": ", 2);
    if (!vals[c]) {
      puts_(&b, "null");
      continue;
    }
    const char *v = vals[c];
    switch (types[c]) {
    case OID_BOOL:
      puts_(&b, v[0] == 't' ? "true" : "false");
      break;
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
    case OID_OID:
    case OID_FLOAT4:
    case OID_FLOAT8:
    case OID_NUMERIC:
      if (json_number(v))
        puts_(&b, v);
      else
        put_str(&b, v);
      break;
    case OID_JSON:
    case OID_JSONB:
      puts_(&b, v);
      break;
    default:
      put_str(&b, v);
    }
  }
  put(&b, "}", 1);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
