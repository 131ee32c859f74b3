/*
 * handler_exec.h: the --exec handler, PerfectQueue style. The payload goes
 * to the child's stdin, the item id is appended as the last argument, and
 * ONCEQ_ITEM_ID, ONCEQ_QUEUE, ONCEQ_ATTEMPT are set in its environment. No
 * shell: fork/exec directly. Exit 0 means success. The child leads its own
 * process group; at the timeout (or on cancel) the whole group gets SIGTERM,
 * then SIGKILL after the kill grace.
 *
 * Thread safety: wk_exec_run may run on many threads at once (each call
 * owns its child); the config is read-only.
 */
#ifndef ONCEQ_WORKER_HANDLER_EXEC_H
#define ONCEQ_WORKER_HANDLER_EXEC_H

#include "task.h"

typedef struct wk_exec_cfg {
  char *const *argv; /* command and its arguments, NULL-terminated */
  int timeout_ms;    /* 0: no timeout */
  int kill_grace_ms; /* SIGTERM -> SIGKILL delay; 0: 5000 */
} wk_exec_cfg;

/*
 * Run one item. Fills r: WK_OK on exit 0 (r->output = stdout tail);
 * WK_FAILED on non-zero exit, signal or timeout (r->error = stderr tail
 * plus the reason); WK_ABANDONED when cancelled (the group was killed).
 * Returns 0, or -1 when the child could not be started (r->error says why;
 * outcome WK_FAILED).
 */
int wk_exec_run(const wk_exec_cfg *cfg, const wk_task *t, wk_result *r);

#endif
