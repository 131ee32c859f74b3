/*
 * hold.c: how much the worker's claim stream holds at an observed rate
 * (wk_hold_for_rate, docs/worker.md "How much a worker claims"): the
 * floor at no rate, about 250 ms of work in between, the ceiling for fast
 * handlers, per handler kind. No database.
 */
#include <stdio.h>
#include <string.h>

#include "handler.h"
#include "oq_test.h"
#include "worker.h"

static wk_config cfg(const char *handler, bool per_item, int conc, int batch)
{
  wk_config c;
  memset(&c, 0, sizeof c);
  c.handler = wk_handler_named(handler);
  ASSERT(c.handler != NULL);
  c.sql_per_item = per_item;
  c.concurrency = conc;
  c.batch = batch;
  return c;
}

int main(void)
{
  /* batched --sql, defaults: floor 2 x batch, ceiling 2 x batch x conc */
  wk_config s = cfg("sql", false, 4, 64);
  ASSERT_EQ(wk_hold_for_rate(&s, 0), 128);
  ASSERT_EQ(wk_hold_for_rate(&s, 1000), 250); /* 250 ms of work */
  ASSERT_EQ(wk_hold_for_rate(&s, 1e6), 512);
  /* the ceiling is at most 2,000, never below the floor */
  wk_config big = cfg("sql", false, 16, 256);
  ASSERT_EQ(wk_hold_for_rate(&big, 1e6), 2000);
  wk_config huge = cfg("sql", false, 4, 1500);
  ASSERT_EQ(wk_hold_for_rate(&huge, 1e6), 3000);
  /* --exec: floor conc + min(batch, conc), ceiling 4 x conc */
  wk_config e = cfg("exec", false, 4, 64);
  ASSERT_EQ(wk_hold_for_rate(&e, 0), 8);
  ASSERT_EQ(wk_hold_for_rate(&e, 48), 12);
  ASSERT_EQ(wk_hold_for_rate(&e, 1e6), 16);
  /* --sql-per-item is sized like the per-item handlers */
  wk_config p = cfg("sql", true, 4, 64);
  ASSERT_EQ(wk_hold_for_rate(&p, 1e6), 16);
  /* --concurrency 1 --batch 1: never less than one */
  wk_config one = cfg("sql", false, 1, 1);
  ASSERT_LE(1, wk_hold_for_rate(&one, 0));
  printf("unit_worker_hold: ok\n");
  return 0;
}
