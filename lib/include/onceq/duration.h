/*
 * duration.h: durations as people write them on command lines: "250ms",
 * "5s", "2m", "1h" (and combinations like "1m30s"). A bare number is
 * rejected: the unit is never guessed.
 *
 * Thread safety: pure functions.
 */
#ifndef ONCEQ_DURATION_H
#define ONCEQ_DURATION_H

#include <stdint.h>

#include "onceq/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse text into milliseconds. OQ_ERR_INVALID for anything else.
 * Blocks: never. */
OQ_MUST_CHECK oq_err oq_duration_parse(const char *text, int64_t *ms);

#ifdef __cplusplus
}
#endif
#endif
