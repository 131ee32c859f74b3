/*
 * say.h: how every program reports a usage or configuration error and
 * which exit code goes with it (docs/design.md §4 and §6): one line on
 * stderr, "<program>: [<command>: ]<message>[<suffix>]", with anything
 * that looks like a credential masked (a mistyped flag may carry a
 * database URL).
 *
 * Thread safety: stderr lines are written whole by one fprintf.
 */
#ifndef ONCEQ_COMMON_SAY_H
#define ONCEQ_COMMON_SAY_H

#include <stdarg.h>

#include "onceq/err.h"

#define CM_EXIT_OK 0
#define CM_EXIT_RUNTIME 1 /* the environment failed; a later run may pass */
#define CM_EXIT_USAGE 2   /* bad usage or configuration: fix, then rerun */

/* The exit code for a library error (docs/cli.md "Exit codes"): 2 when
 * what the user gave is wrong and running again cannot help (flags,
 * conninfo syntax, a role or database that does not exist, the schema
 * missing or newer, bad data); 1 when the environment failed and a later
 * run may succeed (server unreachable, password refused, lost connection,
 * timeouts, interrupted). */
int cm_exit_for(oq_err e);

/* One masked line on stderr. cmd and suffix may be NULL. */
void cm_say(const char *prog, const char *cmd, const char *suffix,
            const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void cm_vsay(const char *prog, const char *cmd, const char *suffix,
             const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

#endif
