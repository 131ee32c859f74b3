/*
 * jsonline.h: the check every `onceq push` payload goes through (one
 * PAYLOAD argument, or each line of a bulk push) before anything is sent:
 * one JSON value, parsed by jansson (strict RFC 8259; like PostgreSQL's
 * jsonb it refuses \u0000 and unpaired surrogates), nested at most
 * CLI_JSON_MAX_NESTING deep, and, with --unique-key-field F, whether the
 * value is an object whose field F is usable as a unique key.
 *
 * A refusal is one line in err, "invalid JSON: <what> at column <n>" with
 * n the byte column where the offending token starts, so a bulk push can name
 * the line and the place (docs/cli.md). Numbers beyond a double's range are
 * left to the server (jsonb's numeric is wider); push finds such a line by
 * bisecting its batch if the server refuses it.
 *
 * Thread safety: no shared state.
 */
#ifndef ONCEQ_CLI_JSONLINE_H
#define ONCEQ_CLI_JSONLINE_H

#include <stdbool.h>
#include <stddef.h>

/* Deepest JSON nesting push accepts. PostgreSQL's JSON parser recurses and
 * runs out of stack (54001) somewhere above 10,000 levels with the default
 * max_stack_depth, sooner with a smaller one; a limit of our own gives one
 * clear line, the same on every server (docs/design.md §6). */
#define CLI_JSON_MAX_NESTING 1000

/* What --unique-key-field found in a line. */
typedef enum field_state {
  FIELD_NONE = 0, /* absent (or not checked) */
  FIELD_OK,       /* a string or a number: usable as unique_key */
  FIELD_BAD       /* present, but an object, array, bool or null */
} field_state;

/* The field's value as unique_key: its state and its length in bytes (a
 * string decoded, as `->>` gives it; a number as jansson prints it). */
typedef struct field_info {
  field_state state;
  size_t bytes;
} field_info;

/*
 * Check that s[0..n) is one JSON value. With field (may be NULL), also
 * find the top-level member named field (the last one, as jsonb keeps the
 * last duplicate) and say in *fi whether it is usable; *top_obj: the value
 * is an object. false with one line in err ("out of memory" when that is
 * why).
 */
bool json_check(const char *s, size_t n, const char *field, field_info *fi,
                bool *top_obj, char *err, size_t errlen);

#endif
