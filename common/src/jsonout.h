/*
 * jsonout.h: JSON text for what the programs print (the CLI's --json
 * output, the status page's JSON endpoints, webhook bodies), encoded by
 * jansson. Every string goes through jansson's encoder; the containers
 * around them are written by a small streaming writer, so a long listing
 * is never held in memory and a jsonb payload read from PostgreSQL passes
 * through byte for byte (a jansson round trip would print 0.1 as
 * 0.10000000000000001 and refuse integers beyond 64 bits).
 *
 * Thread safety: no shared state; a writer belongs to one thread.
 */
#ifndef ONCEQ_COMMON_JSONOUT_H
#define ONCEQ_COMMON_JSONOUT_H

#include <stdbool.h>
#include <stdio.h>

/* Write s as a JSON string with its quotes (NULL: null). Text that is not
 * valid UTF-8 is cleaned first (oq_text_clean: '?' per bad byte). */
void cm_json_quote(FILE *out, const char *s);

#define CM_JSON_MAX_DEPTH 32

/* A streaming JSON writer: containers nest up to CM_JSON_MAX_DEPTH;
 * commas are placed for you. Inside an object every value needs its key;
 * inside an array (or at the top) pass key NULL. Closing the top-level
 * value prints a newline, so one value is one line (JSON lines). */
typedef struct cm_json {
  FILE *out;
  int depth;                              /* open containers */
  bool in_obj[CM_JSON_MAX_DEPTH];         /* container kind per depth */
  bool need_comma[CM_JSON_MAX_DEPTH + 1]; /* a value was written */
} cm_json;

void cm_json_init(cm_json *j, FILE *out);
void cm_json_obj(cm_json *j, const char *key); /* open { */
void cm_json_arr(cm_json *j, const char *key); /* open [ */
void cm_json_end(cm_json *j);                  /* close the innermost */
/* A string value; NULL writes null. */
void cm_json_str(cm_json *j, const char *key, const char *val);
/* A value written as is: JSON text from a trusted producer (a jsonb
 * payload from the database, a number we formatted); NULL or "" writes
 * null. */
void cm_json_raw(cm_json *j, const char *key, const char *val);
void cm_json_int(cm_json *j, const char *key, long long val);
/* A number with three decimals; NAN and infinities write null. */
void cm_json_num(cm_json *j, const char *key, double val);
void cm_json_bool(cm_json *j, const char *key, bool val);
/* A number with three decimals, or null when val is negative (the
 * "unknown" of a rate or a lag) or not finite. */
void cm_json_num_or_null(cm_json *j, const char *key, double val);
/* A timestamp (epoch seconds) as an ISO-8601 UTC string with
 * milliseconds ("2024-05-01T09:30:00.123Z", fmt.h); NAN writes null. */
void cm_json_time(cm_json *j, const char *key, double epoch_s);

#endif
