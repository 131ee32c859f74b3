/*
 * http_new_fails.c: a fault hook for it_worker_http_new_fails, linked
 * into a test-only copy of onceq-worker with -Wl,--wrap=wk_http_new (the
 * executors' call to wk_http_new lands here). The first OQT_HTTP_NEW_FAILS
 * calls return NULL, as an out-of-memory wk_http_new does; the rest create
 * the client. There is no other way to make it fail: libcurl is loaded
 * with dlopen (common/src/lazylib.h), out of LD_PRELOAD's reach.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "handler_http.h"

wk_http *__real_wk_http_new(const wk_http_cfg *cfg);
wk_http *__wrap_wk_http_new(const wk_http_cfg *cfg);

wk_http *__wrap_wk_http_new(const wk_http_cfg *cfg)
{
  static atomic_long calls;
  const char *env = getenv("OQT_HTTP_NEW_FAILS");
  long fails = env ? strtol(env, NULL, 10) : 0;
  if (atomic_fetch_add(&calls, 1) < fails)
    return NULL;
  return __real_wk_http_new(cfg);
}
