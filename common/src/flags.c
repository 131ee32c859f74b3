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
