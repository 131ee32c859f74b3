/* schedule.c: firing due schedule occurrences (schedule.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "due.h"
#include "cron.h"
#include "fmt.h"
#include "schedule.h"

/*
 * Schedules whose cron can never fire (written past `onceq schedule add`,
 * which refuses them: by hand or by an older onceq) stay due on every
 * pass. Each is named in one warning per process, not one per pass: a
 * small set of "name cron" texts already warned about (a fixed or renamed
 * schedule is a new text; past WARNED_MAX, further ones go to debug).
 * Only the pass thread of the coordinator calls co_schedule_fire_due.
 */
#define WARNED_MAX 64
static char warned[WARNED_MAX][160];
static int nwarned;

static bool warn_once(const char *name, const char *expr)
{
  char key[160];
  snprintf(key, sizeof key, "%.100s %.58s", name, expr);
  for (int i = 0; i < nwarned; i++)
    if (strcmp(warned[i], key) == 0)
      return false;
  if (nwarned < WARNED_MAX)
    snprintf(warned[nwarned++], sizeof warned[0], "%s", key);
  return true;
}

void co_schedule_key(char *buf, size_t len, const char *name, long long due_s)
{
  snprintf(buf, len, "schedule:%s:%lld", name, due_s);
}

/* One occurrence's transaction. */
typedef struct fire {
  const char *name, *queue, *payload;
  const char *due_text; /* next_run_at as the database wrote it */
  char next_text[40];   /* the following occurrence, ISO 8601 UTC */
  char key[300];
  /* results of the run that committed (reset on each run) */
  bool advanced;              /* the compare-and-set matched */
  bool still_due;             /* the new next_run_at is also due */
  char item[OQ_UUID_LEN + 1]; /* "" when the key already existed */
} fire;

static oq_err fire_tx(oq_db *db, void *ud)
{
  fire *f = ud;
  f->advanced = f->still_due = false;
  f->item[0] = '\0';
  oq_err e = oq_schedule_advance(db, f->name, f->due_text, f->next_text,
                                 &f->advanced, &f->still_due);
  if (e == OQ_OK && f->advanced) {
    /* through the library's enqueue, in this transaction: the key makes
     * an occurrence fire once, whoever else fires it */
    oq_enqueue_opts o = {
        .queue = f->queue, .payload = f->payload, .unique_key = f->key};
    char id[OQ_UUID_LEN + 1];
    oq_enqueue_status st = OQ_ENQUEUED;
    e = oq_enqueue(db, &o, id, &st);
    if (e == OQ_OK && st == OQ_ENQUEUED) {
      snprintf(f->item, sizeof f->item, "%s", id);
      e = oq_schedule_set_last_item(db, f->name, f->item);
    }
  }
  return e;
}

oq_err co_schedule_fire_due(oq_db *db, const cm_signal_count *stop, long *fired)
{
  qv_rows due = {0}, cur = {0};
  *fired = 0;
  oq_err e = qv_schedules_due(db, &due);
  for (int i = 0; e == OQ_OK && i < due.nrows && !*stop; i++) {
    const char *name = qv_rows_get(&due, i, 0);
    const char *expr = qv_rows_get(&due, i, 1);
    cm_cron c;
    char why[256];
    if (!name || !expr)
      continue;
    if (cm_cron_parse(expr, &c, why, sizeof why) != 0) {
      /* OQ_LOG evaluates its level twice: decide it once */
      oq_log_level lvl = warn_once(name, expr) ? OQ_LOG_WARN : OQ_LOG_DEBUG;
      OQ_LOG(lvl, NULL, NULL,
             "schedule %s: %s; it is skipped on every pass and named once "
             "(fix it with `onceq schedule rm %s` and `add`)",
             name, why, name);
      continue;
    }
    char due_text[64];
    snprintf(due_text, sizeof due_text, "%s", qv_rows_get(&due, i, 4));
    double due_s = cm_atof(qv_rows_get(&due, i, 5), 0);
    /* each occurrence: its own transaction; the text of the next due time
     * comes from the database again so the compare-and-set stays exact */
    for (int k = 0; k < CO_SCHEDULE_CATCHUP && !*stop; k++) {
      fire f;
      memset(&f, 0, sizeof f);
      f.name = name;
      f.queue = qv_rows_get(&due, i, 2);
      f.payload = qv_rows_get(&due, i, 3);
      f.due_text = due_text;
      long long due_sec = (long long)floor(due_s);
      int64_t next;
      if (cm_cron_next(&c, due_sec, &next) != 0) {
        oq_log_level lvl = warn_once(name, expr) ? OQ_LOG_WARN : OQ_LOG_DEBUG;
        OQ_LOG(lvl, NULL, NULL,
               "schedule %s: cron '%s' never fires after %lld; it is skipped "
               "on every pass and named once (fix it with `onceq schedule rm "
               "%s` and `add`)",
               name, expr, due_sec, name);
        break;
      }
      cm_fmt_utc(f.next_text, sizeof f.next_text, (double)next);
      co_schedule_key(f.key, sizeof f.key, name, due_sec);
      e = oq_db_transact(db, fire_tx, &f);
      if (e != OQ_OK)
        break;
      if (!f.advanced) {
        OQ_LOG(OQ_LOG_INFO, NULL, NULL,
               "schedule %s: occurrence %lld already fired or changed "
               "meanwhile",
               name, due_sec);
        break;
      }
      if (f.item[0]) {
        (*fired)++;
        OQ_LOG(OQ_LOG_INFO, NULL, f.item,
               "schedule %s fired occurrence %lld on queue %s (key %s)", name,
               due_sec, f.queue, f.key);
      } else {
        OQ_LOG(OQ_LOG_INFO, NULL, NULL,
               "schedule %s: occurrence %lld was already enqueued (key %s)",
               name, due_sec, f.key);
      }
      if (!f.still_due)
        break;
      /* the next occurrence is due too (catching up): re-read its text */
      e = qv_schedule_next(db, name, &cur);
      if (e != OQ_OK || cur.nrows != 1)
        break;
      snprintf(due_text, sizeof due_text, "%s", qv_rows_get(&cur, 0, 0));
      due_s = cm_atof(qv_rows_get(&cur, 0, 1), 0);
      qv_rows_free(&cur);
    }
    qv_rows_free(&cur);
  }
  qv_rows_free(&due);
  return e;
}
