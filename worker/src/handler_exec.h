/*
 * handler_exec.h: the --exec handler, PerfectQueue style. The payload goes
 * to the child's stdin, the item id is appended as the last argument, and
 * its environment is the documented one (docs/worker.md "Handler
 * environment"): the base built once by wk_exec_env_new (a few safe
 * variables of the worker's, plus the operator's --env), then
 * ONCEQ_ITEM_ID, ONCEQ_QUEUE, ONCEQ_ATTEMPT. Nothing else of the worker's
 * environment reaches it: not its database URL, password or tokens. No
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
 * owns its child and reaps only that pid); the config is read-only.
 * wk_exec_env_new reads environ: call it before threads start. SIGPIPE is
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
  char *const *env;  /* "NAME=VALUE"s, NULL-terminated (wk_exec_env_new);
                        NULL: the item's three variables only */
} wk_exec_cfg;

/*
 * The environment every child starts from, built once at start-up, before
 * threads run (it reads environ):
 *  - the safe base, each copied when the worker has it set: PATH, HOME,
 *    USER, LOGNAME, SHELL, TERM, LANG, LANGUAGE, LC_*, TZ, TMPDIR;
 *  - then specs[0..n): "NAME" copies the worker's value (none when it is
 *    unset, with a warning), "NAME=VALUE" sets one; a later entry replaces
 *    an earlier one of the same name, the base's included. An explicit
 *    name wins even if it is a credential (ONCEQ_DATABASE_URL,
 *    DATABASE_URL, ONCEQ_STATUS_TOKEN, PG*), with a warning naming it.
 * Names are checked by the caller (config.c); the item's own names are
 * skipped. Warnings name variables, never values. Returns a NULL-terminated
 * array of "NAME=VALUE" strings, owned: free with wk_exec_env_free; NULL on
 * out-of-memory.
 */
char **wk_exec_env_new(const char *const *specs, size_t n);
/* Free what wk_exec_env_new returned; NULL is allowed. */
void wk_exec_env_free(char **env);
/* Whether name[0..len) is one the worker sets per item (ONCEQ_ITEM_ID,
 * ONCEQ_QUEUE, ONCEQ_ATTEMPT), which --env may not set. */
bool wk_exec_env_is_item_name(const char *name, size_t len);

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
