/*
 * logsink.h: the daemons' log lines on stderr (onceq-worker and
 * `onceq coordinator` log alike), one per event, as text (key=value) or
 * JSON for log shippers. Installed as libonceq's sink, which itself never
 * writes to stderr.
 *
 * Every line is masked by libonceq's one rule (oq_text_mask_secrets) and
 * then scrubbed of the secrets registered at start-up (the passwords of
 * --db, the tokens of --http and --notify-url, the status token): a last
 * line of defence for a message that echoes a secret without its key or
 * URL around it (a server's or libcurl's error text).
 *
 * Thread safety: lines are written whole under a mutex. The sink and the
 * secrets are set once, before any thread starts, and only read after.
 */
#ifndef ONCEQ_COMMON_LOGSINK_H
#define ONCEQ_COMMON_LOGSINK_H

#include <stdbool.h>

#include "onceq/log.h"

/* Install the sink (before any thread starts). */
void cm_logsink_install(oq_log_level level, bool json);

/*
 * Register secrets to scrub from every line (before any thread starts):
 * with whole, text itself (a bearer token); else each credential the
 * masking rule finds in text (a conninfo, a URL). Pieces shorter than
 * CM_SECRET_MIN bytes are not registered (scrubbing "ab" everywhere would
 * garble the log; the rule still masks them next to their key); at most
 * CM_SECRETS_MAX are kept. NULL or "" registers nothing.
 */
#define CM_SECRET_MIN 4
#define CM_SECRETS_MAX 16
void cm_logsink_secret(const char *text, bool whole);

/* Mask buf (cap bytes, a NUL-terminated line) by the rule, then scrub the
 * registered secrets, in place (truncating to cap). For every line a
 * daemon writes: the sink, and cm_say's one-line errors. */
void cm_logsink_scrub(char *buf, size_t cap);

#endif
