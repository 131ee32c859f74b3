/*
 * cmdline.h: onceq-worker's command line, parsed into its settings
 * (config.h). docs/design.md §6: the flag names are an interface scripts
 * rely on. The handler flags come from the handler table (handler.h), the
 * rest from one table of cm_opt rows (common/src/flags.h).
 *
 * Thread safety: called once on the main thread before any other starts.
 */
#ifndef ONCEQ_WORKER_CMDLINE_H
#define ONCEQ_WORKER_CMDLINE_H

#include <stddef.h>

#include "config.h"

/*
 * Parse argv into cfg (defaults first). Returns 0 to run, 1 when --help or
 * --version was printed (exit 0), -1 on bad usage with one line in err
 * naming the fix (exit 2). argv entries holding a password are masked in
 * place so `ps` does not show it. Free with wk_config_free.
 */
int wk_config_parse(int argc, char **argv, wk_config *cfg, char *err,
                    size_t errlen);

#endif
