/*
 * schedule_race.c: four firers (threads, each with its own connection) run
 * co_schedule_fire_due on the same schedule at once, as a deposed leader
 * and a new one might. The schedule is 300 minutes behind. Each occurrence
 * must be enqueued exactly once: a BEFORE INSERT trigger writes a ledger
 * row for every committed insert attempt, even one the unique key turns
 * away, so a firing that the compare-and-set failed to stop shows up as a
 * second ledger row for its key. The firers' own counts must add up to the
 * number of occurrences too.
 */
#include <pthread.h>
#include "signals.h"
#include <stdlib.h>

#include "rows.h"
#include "oq_test.h"
#include "schedule.h"

#define FIRERS 4
#define OCCURRENCES 300

static const char *dsn;
static cm_signal_count stop_flag;
/* all firers connected before any fires: they really race */
static pthread_barrier_t start;

typedef struct firer {
  pthread_t t;
  long fired; /* items this firer enqueued */
  int passes;
  int failures; /* passes that returned an error (restarts exhausted) */
  char err[OQ_ERRBUF_SIZE];
} firer;

static void *run(void *arg)
{
  firer *f = arg;
  oq_db *db = oqt_connect(dsn);
  pthread_barrier_wait(&start);
  /* bounded: 300 occurrences need 30 winning passes; losers end early */
  for (f->passes = 0; f->passes < 2000; f->passes++) {
    long n = 0;
    oq_err e = co_schedule_fire_due(db, &stop_flag, &n);
    if (e != OQ_OK) {
      f->failures++;
      snprintf(f->err, sizeof f->err, "%s", oq_db_errmsg(db));
      continue;
    }
    f->fired += n;
    if (oqt_scalar(db, "SELECT (next_run_at > now())::int FROM "
                       "onceq_schedules WHERE name = 'race'") == 1)
      break;
  }
  oq_db_close(db);
  return NULL;
}

int main(void)
{
  dsn = oqt_fresh_db("coord_sched_race", 1);
  oq_db *db = oqt_connect(dsn);
  oqt_exec(db, "CREATE TABLE ledger (key TEXT NOT NULL)");
  oqt_exec(db,
           "CREATE FUNCTION ledger_add() RETURNS trigger LANGUAGE plpgsql AS "
           "$$ BEGIN INSERT INTO ledger VALUES (NEW.unique_key); RETURN NEW; "
           "END $$");
  oqt_exec(db, "CREATE TRIGGER ledger_add BEFORE INSERT ON onceq_items FOR "
               "EACH ROW WHEN (NEW.unique_key LIKE 'schedule:%') EXECUTE "
               "FUNCTION ledger_add()");
  long t0 = oqt_scalar(db, "SELECT extract(epoch FROM date_trunc('minute', "
                           "now()))::int8 - 300 * 60");
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO onceq_schedules (name, cron, queue, payload, "
           "next_run_at) VALUES ('race', '* * * * *', 'q', '{}', "
           "to_timestamp(%ld))",
           t0);
  oqt_exec(db, sql);

  firer f[FIRERS];
  memset(f, 0, sizeof f);
  ASSERT_EQ(pthread_barrier_init(&start, NULL, FIRERS), 0);
  for (int i = 0; i < FIRERS; i++)
    ASSERT_EQ(pthread_create(&f[i].t, NULL, run, &f[i]), 0);
  long fired = 0;
  for (int i = 0; i < FIRERS; i++) {
    pthread_join(f[i].t, NULL);
    fprintf(stderr, "firer %d: %ld fired in %d passes, %d failed%s%s\n", i,
            f[i].fired, f[i].passes, f[i].failures, f[i].failures ? ": " : "",
            f[i].err);
    fired += f[i].fired;
  }
  pthread_barrier_destroy(&start);
  long next = oqt_scalar(db, "SELECT extract(epoch FROM next_run_at)::int8 "
                             "FROM onceq_schedules WHERE name = 'race'");
  long want = (next - t0) / 60;
  ASSERT_LE(OCCURRENCES, want);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM ledger"), want);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(DISTINCT key) FROM ledger"), want);
  ASSERT_EQ(oqt_scalar(db, "SELECT count(*) FROM onceq_items"), want);
  ASSERT_EQ(fired, want);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generate_series(%ld, %ld, 60) t WHERE NOT "
           "EXISTS (SELECT 1 FROM onceq_items WHERE unique_key = "
           "'schedule:race:' || t)",
           t0, next - 60);
  ASSERT_EQ(oqt_scalar(db, sql), 0);
  /* more than one firer won some occurrences: they really raced */
  int winners = 0;
  for (int i = 0; i < FIRERS; i++)
    winners += f[i].fired > 0;
  oqt_metric("coord_schedule_race_firers_that_won", winners, "firers");
  ASSERT_LE(2, winners);
  oq_db_close(db);
  printf("schedule race: %ld occurrences, each enqueued once\n", want);
  return 0;
}
