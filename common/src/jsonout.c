/*
 * jsonout.c: JSON text out (jsonout.h), strings encoded by jansson.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fmt.h"
#include "jsonout.h"
#include "onceq/text.h"

void cm_json_quote(FILE *out, const char *s)
{
  if (!s) {
    fputs("null", out);
    return;
  }
  json_t *v = json_string(s);
  char *clean = NULL;
  if (!v) { /* not valid UTF-8 (or no memory) */
    size_t n = strlen(s);
    clean = malloc(n + 1);
    if (clean) {
      oq_text_clean(clean, n + 1, s, n);
      v = json_string(clean);
    }
  }
  if (!v || json_dumpf(v, out, JSON_ENCODE_ANY) != 0)
    fputs("null", out);
  json_decref(v);
  free(clean);
}

void cm_json_init(cm_json *j, FILE *out)
{
  memset(j, 0, sizeof *j);
  j->out = out;
}

/* Comma and key before a value at the current depth. */
static void json_pre(cm_json *j, const char *key)
{
  if (j->need_comma[j->depth])
    fputc(',', j->out);
  j->need_comma[j->depth] = true;
  if (j->depth > 0 && j->in_obj[j->depth - 1]) {
    cm_json_quote(j->out, key ? key : "");
    fputc(':', j->out);
  }
}

/* After a scalar: at the top level a value is a whole line. */
static void json_post(cm_json *j)
{
  if (j->depth == 0) {
    fputc('\n', j->out);
    j->need_comma[0] = false;
  }
}

static void json_open(cm_json *j, const char *key, bool obj)
{
  if (j->depth >= CM_JSON_MAX_DEPTH)
    return;
  json_pre(j, key);
  fputc(obj ? '{' : '[', j->out);
  j->in_obj[j->depth] = obj;
  j->depth++;
  j->need_comma[j->depth] = false;
}

void cm_json_obj(cm_json *j, const char *key)
{
  json_open(j, key, true);
}

void cm_json_arr(cm_json *j, const char *key)
{
  json_open(j, key, false);
}

void cm_json_end(cm_json *j)
{
  if (j->depth == 0)
    return;
  j->depth--;
  fputc(j->in_obj[j->depth] ? '}' : ']', j->out);
  json_post(j);
}

void cm_json_str(cm_json *j, const char *key, const char *val)
{
  json_pre(j, key);
  cm_json_quote(j->out, val);
  json_post(j);
}

void cm_json_raw(cm_json *j, const char *key, const char *val)
{
  json_pre(j, key);
  fputs(val && *val ? val : "null", j->out);
  json_post(j);
}

void cm_json_int(cm_json *j, const char *key, long long val)
{
  json_pre(j, key);
  fprintf(j->out, "%lld", val);
  json_post(j);
}

void cm_json_num(cm_json *j, const char *key, double val)
{
  json_pre(j, key);
  if (isnan(val) || isinf(val))
    fputs("null", j->out);
  else
    fprintf(j->out, "%.3f", val);
  json_post(j);
}

void cm_json_bool(cm_json *j, const char *key, bool val)
{
  json_pre(j, key);
  fputs(val ? "true" : "false", j->out);
  json_post(j);
}

void cm_json_num_or_null(cm_json *j, const char *key, double val)
{
  if (val < 0 || isnan(val))
    cm_json_raw(j, key, NULL);
  else
    cm_json_num(j, key, val);
}

void cm_json_time(cm_json *j, const char *key, double epoch_s)
{
  char buf[40];
  if (isnan(epoch_s))
    cm_json_raw(j, key, NULL);
  else
    cm_json_str(j, key, cm_fmt_utc_ms(buf, sizeof buf, epoch_s));
}
