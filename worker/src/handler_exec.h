/*
 * handler_exec.h: the --exec handler, PerfectQueue style. The payload goes
 * to the child's stdin, the item id is appended as the last argument, and
 * ONCEQ_ITEM_ID, ONCEQ_QUEUE, ONCEQ_ATTEMPT are set in its environment. No
 * shell: fork/exec directly (PATH is searched). Exit 0 means success. The
 * child leads its own process group; at the timeout (or on cancel) the
 * whole group gets SIGTERM, then SIGKILL after the kill grace. When the
 * child ends by itself, whatever is left of its group gets SIGKILL at once:
 * a process that must outlive its item has to leave the group (setsid).
 * The child starts with default signal dispositions, an empty signal mask
 * and no fd but 0, 1 and 2 (every other fd is marked close-on-exec in the
 * child; on Linux < 5.11 only the handler's own fds are).
 *
 * Thread safety: wk_exec_run may run on many threads at once (each call
 * owns its child and reaps only that pid); the config is read-only. It
 * copies environ, so nobody may call setenv once threads run. SIGPIPE is
 * blocked in the calling thread during the call and the one a closed stdin
 * raises is swallowed; the process-wide disposition is not touched. The
 * program must not set SIGCHLD to SIG_IGN (exit statuses would be lost).
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
 * Run one item; blocks until the child is reaped, checking t->cancelled
 * at least every 100 ms. Fills r (r->output is always the stdout tail, at
 * most WK_TAIL_MAX bytes):
 *  - exit 0: WK_OK, r->error "";
 *  - non-zero exit: WK_FAILED, "exit status N: <stderr tail>";
 *  - killed: WK_FAILED, "killed by signal N (SIGSEGV): <stderr tail>";
 *  - timeout: WK_FAILED, "timed out after N ms: <stderr tail>", or
 *    "timed out after N ms, SIGKILL after G ms grace: ..." when SIGTERM
 *    was not enough;
 *  - cancelled: WK_ABANDONED, "cancelled" (same SIGKILL suffix).
 * The ": <stderr tail>" part is left out when stderr was empty; the tail
 * is cut at the front to fit. Returns 0, or -1 when the child could not
 * be started: outcome WK_FAILED and r->error "cannot run CMD: <reason>",
 * e.g. "cannot run foo: No such file or directory".
 */
int wk_exec_run(const wk_exec_cfg *cfg, const wk_task *t, wk_result *r);

#endif
