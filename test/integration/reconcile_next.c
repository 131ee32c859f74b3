/*
 * reconcile_next.c: the reconciliation sweep (worker/src/reconcile.c)
 * while an --sql ack that claims next items is in flight (docs/design.md
 * 5a). Such an ack's next items are ours in the database before a job
 * holds them, so the sweep must not release an unheld *keyed* claim then;
 * but a claim without a key is never a next item, and it must be released
 * at once: deferring every unheld claim while any such ack ran kept a busy
 * worker's ambiguous claims unreleased for as long as it stayed busy.
 * One session holds two claims nobody holds in memory, one keyed and one
 * not; with an ack in flight (wk_next_begin) the sweep releases the plain
 * one and asks for a later sweep; with none in flight it releases the
 * keyed one too.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "oq_test.h"
#include "reconcile.h"
#include "runtime.h"
#include "sem_util.h"

static long claimed(oq_db *db, const oq_session *s, const char *keyed)
{
  return QLONG(db,
               "SELECT count(*) FROM onceq_items WHERE claim = $1::uuid"
               " AND (ordering_key IS NOT NULL) = $2::bool",
               oq_session_id(s), keyed);
}

int main(void)
{
  const char *dsn = oqt_fresh_db("reconcile_next", 1);
  oq_db *db = oqt_connect(dsn);
  oq_session *s = SEM_LONG_SESSION(db);
  QEXEC(db, "INSERT INTO onceq_items (queue, ordering_key, payload)"
            " VALUES ('rn', 'k', '{}'), ('rn', NULL, '{}')");
  oq_item *it = NULL;
  size_t n = SEM_CLAIM(db, s, "rn", 10, &it);
  ASSERT_EQ(n, 2);
  oq_items_free(it, n); /* claimed in the database, held by no job */

  wk w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.slot_cv, NULL);
  w.wake_fd[0] = w.wake_fd[1] = -1;
  wk_gen g = {.session = s};

  /* an ack that may claim next items is in flight */
  wk_next_begin(&w);
  size_t rel = 0;
  ASSERT_OK(db, wk_reconcile(&w, db, &g, "test", &rel));
  if (claimed(db, s, "false") != 0)
    OQT_FAIL("an unheld claim without a key was kept while an ack took "
             "next items (released %zu)",
             rel);
  ASSERT_EQ(rel, 1);
  ASSERT_EQ(claimed(db, s, "true"), 1);
  ASSERT(atomic_load(&w.sweep_due)); /* the keyed one: a later sweep */
  wk_next_end(&w);
  printf("ok with an ack in flight: the plain claim released, the keyed "
         "one kept for later\n");

  atomic_store(&w.sweep_due, false);
  ASSERT_OK(db, wk_reconcile(&w, db, &g, "test", &rel));
  ASSERT_EQ(rel, 1);
  ASSERT_EQ(claimed(db, s, "true"), 0);
  ASSERT(!atomic_load(&w.sweep_due));
  printf("ok with none in flight: the keyed claim released too\n");

  pthread_cond_destroy(&w.slot_cv);
  wk_jobs_fini(&w);
  pthread_mutex_destroy(&w.mu);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  printf("PASS it_worker_reconcile_next (isolation: %s)\n", oqt_isolation());
  return 0;
}
