/*
 * flags.c: the daemons' shared flags (flags.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "onceq/onceq.h"

int cm_flag_duration(const char *flag, const char *val, bool off_ok,
                     int64_t *ms, char *err, size_t errlen)
{
  if (off_ok && strcmp(val, "off") == 0) {
    *ms = -1;
    return 0;
  }
  int64_t v;
  if (oq_duration_parse(val, &v) != OQ_OK || v <= 0) {
    snprintf(err, errlen,
             "%s %s: expected a duration above zero, e.g. 250ms, 5s, 2m, "
             "1h%s",
             flag, val, off_ok ? ", or off" : "");
    return -1;
  }
  *ms = v;
  return 0;
}

int cm_flag_log_level(const char *val, int *level, char *err, size_t errlen)
{
  int lv = oq_log_level_parse(val);
  if (lv < 0) {
    snprintf(err, errlen,
             "--log-level %s is unknown; use debug, info, warn or error", val);
    return -1;
  }
  *level = lv;
  return 0;
}

int cm_flag_log_format(const char *val, bool *json, char *err, size_t errlen)
{
  if (strcmp(val, "json") != 0 && strcmp(val, "text") != 0) {
    snprintf(err, errlen, "--log-format %s is unknown; use text or json", val);
    return -1;
  }
  *json = strcmp(val, "json") == 0;
  return 0;
}

int cm_flag_listen_db(char *val, char **db, char *err, size_t errlen)
{
  if (!*val) {
    snprintf(err, errlen,
             "--listen-db is empty; give a direct database URL (not through "
             "the pooler), or leave --listen-db out to poll");
    return -1;
  }
  return cm_flag_db(val, db, err, errlen);
}

const char *cm_listen_db(const char *flag_value)
{
  if (flag_value && *flag_value)
    return flag_value;
  const char *env = getenv(CM_LISTEN_DB_ENV);
  return env && *env ? env : NULL;
}

void cm_log_pooler(const char *who, const char *sid, const char *listen_db,
                   long poll_ms)
{
  if (listen_db)
    OQ_LOG(OQ_LOG_INFO, sid, NULL,
           "%s: the database is reached through a connection pooler: "
           "no session state outside a transaction; wake-ups (LISTEN) through "
           "--listen-db",
           who);
  else
    OQ_LOG(OQ_LOG_INFO, sid, NULL,
           "%s: the database is reached through a connection pooler: "
           "no session state outside a transaction; LISTEN/NOTIFY cannot work "
           "through a transaction "
           "pooler, so it polls every %ld ms; for wake-ups give --listen-db "
           "URL (or " CM_LISTEN_DB_ENV ") a direct connection to the server",
           who, poll_ms);
}

int cm_flag_db(char *val, char **db, char *err, size_t errlen)
{
  if (!*val) {
    snprintf(err, errlen,
             "--db is empty; give a database URL, or leave --db out to use "
             "ONCEQ_DATABASE_URL, DATABASE_URL or libpq's PG* variables");
    return -1;
  }
  char *copy = strdup(val);
  if (!copy) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  free(*db);
  *db = copy;
  oq_conninfo_mask_in_place(val); /* ps shows argv */
  return 0;
}

const cm_opt *cm_opt_find(const cm_opt *opts, size_t n, const char *arg,
                          const char **inline_val)
{
  for (size_t k = 0; k < n; k++) {
    size_t len = strlen(opts[k].name);
    if (strncmp(arg, opts[k].name, len) == 0 &&
        (arg[len] == '\0' || arg[len] == '=')) {
      if (inline_val)
        *inline_val = arg[len] == '=' ? arg + len + 1 : NULL;
      return &opts[k];
    }
  }
  return NULL;
}

int cm_opt_set(const cm_opt *o, const char *val, void *base, char *err,
               size_t errlen)
{
  char *field = (char *)base + o->offset;
  switch (o->kind) {
  case CM_OPT_DURATION:
  case CM_OPT_DURATION_OFF:
    return cm_flag_duration(o->name, val, o->kind == CM_OPT_DURATION_OFF,
                            (int64_t *)(void *)field, err, errlen);
  case CM_OPT_INT: {
    char *end;
    long v = strtol(val, &end, 10);
    if (*end || v < 1 || v > 4096) {
      snprintf(err, errlen, "%s %s must be a whole number from 1 to 4096",
               o->name, val);
      return -1;
    }
    *(int *)(void *)field = (int)v;
    return 0;
  }
  case CM_OPT_STRING:
    *(const char **)(void *)field = val;
    return 0;
  case CM_OPT_FLAG:
    *(bool *)(void *)field = true;
    return 0;
  case CM_OPT_LOG_LEVEL:
    return cm_flag_log_level(val, (int *)(void *)field, err, errlen);
  case CM_OPT_LOG_FORMAT:
    return cm_flag_log_format(val, (bool *)(void *)field, err, errlen);
  }
  return 0;
}

void cm_opt_print_help(FILE *out, const cm_opt *opts, size_t n, int width)
{
  for (size_t i = 0; i < n; i++) {
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", opts[i].name,
             opts[i].arg[0] ? " " : "", opts[i].arg);
    fprintf(out, "  %-*s %s\n", width, left, opts[i].help);
  }
}
