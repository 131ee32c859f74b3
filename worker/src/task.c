/* task.c: see task.h. */
#include <string.h>

#include "task.h"

void wk_result_init(wk_result *r)
{
  memset(r, 0, sizeof *r);
  r->outcome = WK_FAILED;
  r->retry_after_ms = -1;
}
