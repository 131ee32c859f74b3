/*
 * retention.c: one batch of history retention in the caller's transaction
 * (retention.h; the statements: OQ__SQL_RETAIN_*, dialect.c).
 */
#include <stdio.h>

#include "internal.h"

oq_err oq_retention_delete(oq_db *db, oq_retained what, int64_t keep_ms,
                           long *deleted)
{
  char ms[32];
  snprintf(ms, sizeof ms, "%lld", (long long)keep_ms);
  oq__stmt stmt = OQ__SQL_RETAIN_DONE;
  /* dead rows: $2 true lets every old row go, false keeps unnotified ones */
  const char *p[2] = {ms, NULL};
  int np = 1;
  switch (what) {
  case OQ_RETAINED_DONE:
    stmt = OQ__SQL_RETAIN_DONE;
    break;
  case OQ_RETAINED_DEAD:
  case OQ_RETAINED_DEAD_NOTIFIED:
    stmt = OQ__SQL_RETAIN_DEAD;
    p[1] = what == OQ_RETAINED_DEAD ? "true" : "false";
    np = 2;
    break;
  case OQ_RETAINED_RESULTS:
    stmt = OQ__SQL_RETAIN_RESULTS;
    break;
  default:
    return oq__db_fail(db, OQ_ERR_INVALID, NULL, "unknown retention target %d",
                       (int)what);
  }
  if (deleted)
    *deleted = 0;
  return oq_db_exec(db, oq__sql(oq_db_engine(db), stmt), np, p, deleted);
}
