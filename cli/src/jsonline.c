/*
 * jsonline.c: push's payload check (jsonline.h) on jansson. jansson's
 * error texts are put in the words push has always used, so the line a
 * user sees for a given mistake stays the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jsonline.h"

/* jansson's message (error.text up to " near ...") in push's words; NULL
 * for messages kept as jansson words them. */
static const char *our_words(const char *text)
{
  static const struct {
    const char *jansson, *ours;
  } map[] = {
      /* longest first where one is the tail of another */
      {"string or '}' expected", "expected a \"key\""},
      {"'}' expected", "expected ',' or '}'"},
      {"']' expected", "expected ',' or ']'"},
      {"':' expected", "expected ':'"},
      {"unexpected token", "expected a value"},
      {"'[' or '{' expected", "expected a value"},
      {"end of file expected", "text after the value"},
      {"premature end of input", "unexpected end"},
      {"control character", "control character in a string (escape it)"},
      {"unexpected newline", "control character in a string (escape it)"},
      {"invalid escape", "bad escape"},
      {"invalid Unicode escape", "bad \\u escape"},
      {"invalid Unicode '", "unpaired surrogate"},
      {"\\u0000 is not allowed", "\\u0000 (PostgreSQL jsonb refuses it)"},
      {"NUL byte in object key", "\\u0000 (PostgreSQL jsonb refuses it)"},
      {"unable to decode byte", "invalid UTF-8"},
      {"invalid token", "expected a value"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strncmp(text, map[i].jansson, strlen(map[i].jansson)) == 0)
      return map[i].ours;
  return NULL;
}

/* The byte column (1-based) where the token jansson stopped at begins:
 * its error position is just past the token, whose text the message
 * quotes ("... near 'TOKEN'"); at the end of input, one past the end. */
static size_t error_column(const json_error_t *e, size_t n)
{
  const char *near = strstr(e->text, " near '");
  size_t pos = e->position > 0 ? (size_t)e->position : 0;
  if (strstr(e->text, " near end of file") || pos > n)
    return n + 1;
  if (near) {
    const char *tok = near + 7;
    const char *end = strrchr(tok, '\'');
    size_t len = end && end > tok ? (size_t)(end - tok) : 0;
    /* a quoted token the message cut short: no way back to its start */
    if (strlen(e->text) + 2 < JSON_ERROR_TEXT_LENGTH && len <= pos)
      return pos - len + 1;
  }
  return pos > 0 ? pos : 1;
}

/* The last byte of s[0..n) that is not white space, or '\0'. */
static char last_byte(const char *s, size_t n)
{
  while (n > 0 && strchr(" \t\r\n", s[n - 1]))
    n--;
  return n > 0 ? s[n - 1] : '\0';
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  return i;
}

/* Past the string that starts at s[i] (a '"'), escapes included. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
  for (i++; i < n && s[i] != '"'; i++)
    if (s[i] == '\\')
      i++;
  return i < n ? i + 1 : n;
}

/* Nesting deeper than CLI_JSON_MAX_NESTING: the byte index of the first
 * bracket too deep, else n. Strings are skipped (escapes included). */
static size_t too_deep_at(const char *s, size_t n)
{
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      i = skip_string(s, n, i) - 1;
    } else if (c == '{' || c == '[') {
      if (++depth > CLI_JSON_MAX_NESTING)
        return i;
    } else if ((c == '}' || c == ']') && depth > 0) {
      depth--;
    }
  }
  return n;
}

static void find_field(const json_t *root, const char *field, field_info *fi)
{
  const json_t *v = json_object_get(root, field);
  if (!v)
    return;
  if (json_is_string(v)) {
    fi->state = FIELD_OK;
    fi->bytes = json_string_length(v);
  } else if (json_is_number(v)) {
    char *txt = json_dumps(v, JSON_ENCODE_ANY);
    fi->state = FIELD_OK;
    fi->bytes = txt ? strlen(txt) : 0;
    free(txt);
  } else {
    fi->state = FIELD_BAD;
  }
}

/* Past the value that starts at s[i]: a string, a nested object or array
 * (strings in it skipped whole), or a number or literal. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
  if (i < n && s[i] == '"')
    return skip_string(s, n, i);
  int depth = 0;
  while (i < n) {
    char c = s[i];
    if (c == '"') {
      i = skip_string(s, n, i);
      continue;
    }
    if (c == '{' || c == '[')
      depth++;
    else if (c == '}' || c == ']') {
      if (depth == 0)
        break;
      if (--depth == 0)
        return i + 1;
    } else if (depth == 0 &&
               (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'))
      break;
    i++;
  }
  return i;
}

/*
 * The key field of a line jansson could not load because a number in it
 * does not fit a double (the server's numeric takes it): found by a scan
 * of the top-level object's members, its length from its text (a string's
 * escapes count as written).
 */
static void find_field_raw(const char *s, size_t n, const char *field,
                           field_info *fi)
{
  size_t flen = strlen(field);
  size_t i = skip_ws(s, n, 0);
  if (i >= n || s[i] != '{')
    return;
  for (i = skip_ws(s, n, i + 1); i < n && s[i] == '"';) {
    size_t k = i;
    i = skip_string(s, n, i);
    bool match = i - k == flen + 2 && memcmp(s + k + 1, field, flen) == 0;
    i = skip_ws(s, n, i);
    if (i >= n || s[i] != ':')
      return;
    i = skip_ws(s, n, i + 1);
    size_t v = i;
    i = skip_value(s, n, i);
    if (match) {
      char c = v < n ? s[v] : '\0';
      fi->state =
          c == '"' || c == '-' || (c >= '0' && c <= '9') ? FIELD_OK : FIELD_BAD;
      fi->bytes = c == '"' && i - v >= 2 ? i - v - 2 : i - v;
      return;
    }
    i = skip_ws(s, n, i);
    if (i >= n || s[i] != ',')
      return;
    i = skip_ws(s, n, i + 1);
  }
}

bool json_check(const char *s, size_t n, const char *field, field_info *fi,
                bool *top_obj, char *err, size_t errlen)
{
  fi->state = FIELD_NONE;
  fi->bytes = 0;
  size_t lead = skip_ws(s, n, 0);
  *top_obj = lead < n && s[lead] == '{';
  if (lead == n) {
    snprintf(err, errlen, "invalid JSON: empty line at column %zu", n + 1);
    return false;
  }
  size_t deep = too_deep_at(s, n);
  if (deep < n) {
    snprintf(err, errlen,
             "invalid JSON: nested deeper than %d levels at column %zu",
             CLI_JSON_MAX_NESTING, deep + 1);
    return false;
  }
  json_error_t e;
  json_t *root = json_loadb(s, n, JSON_DECODE_ANY, &e);
  if (!root) {
    enum json_error_code code = json_error_code(&e);
    if (code == json_error_out_of_memory) {
      snprintf(err, errlen, "out of memory");
      return false;
    }
    /* a number beyond a double: the server's numeric may take it */
    if (code == json_error_numeric_overflow) {
      if (field)
        find_field_raw(s + lead, n - lead, field, fi);
      return true;
    }
    char what[sizeof e.text];
    const char *ours = our_words(e.text);
    const char *near = strstr(e.text, " near '");
    char first = near ? near[7] : '\0'; /* the token's first byte */
    if (strstr(e.text, " near end of file") &&
        (!ours || strcmp(ours, "expected a value") == 0 ||
         (strncmp(ours, "expected ','", 12) == 0 &&
          strchr(",:[{", last_byte(s, n)))))
      ours = "unexpected end"; /* a value was still owed */
    else if (first == '"' && strncmp(e.text, "premature end", 13) == 0)
      ours = "unterminated string";
    else if ((first == '-' || (first >= '0' && first <= '9')) &&
             strncmp(e.text, "invalid token", 13) == 0)
      ours = "bad number";
    if (ours) {
      snprintf(what, sizeof what, "%s", ours);
    } else {
      snprintf(what, sizeof what, "%s", e.text);
      char *cut = strstr(what, " near ");
      if (cut)
        *cut = '\0';
    }
    snprintf(err, errlen, "invalid JSON: %s at column %zu", what,
             error_column(&e, n));
    return false;
  }
  if (field && json_is_object(root))
    find_field(root, field, fi);
  json_decref(root);
  return true;
}
