/*
 * text.h: text that comes from outside (a handler's stderr, a response
 * body, a command line) on its way to the database, a terminal or a log.
 *
 * Terms:
 *  - clean text: valid UTF-8 without NUL bytes, bounded: what PostgreSQL
 *    text columns accept. Every text that goes into the database (errors,
 *    results) passes oq_text_clean.
 *  - escaped text: clean text whose control characters (newline, tab, ESC,
 *    DEL, C1 controls) are written as \n, \t, \xHH, so one log line stays
 *    one line and a terminal gets no escape sequences. Every text from
 *    outside that goes to a terminal or a text log passes oq_text_escape.
 *  - masked text: every credential replaced by "***", by the one rule
 *    for conninfo, URLs and free text (lib/src/conninfo.c; users read it
 *    in docs/deployment.md): a URL's userinfo password (a web URL's bare
 *    userinfo token too), a web URL's query values, fragment and path past
 *    its first segment, and every "...password=" value (password,
 *    sslpassword, PGPASSWORD). Every usage error and log line passes
 *    oq_text_mask_secrets.
 *
 * Thread safety: all functions are pure and may be called from any thread.
 */
#ifndef ONCEQ_TEXT_H
#define ONCEQ_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Copy n bytes of src into dst (cap bytes, always NUL-terminated when cap
 * > 0) as clean text: a NUL or a byte that does not start a valid UTF-8
 * sequence becomes '?'; a character that would not fit whole is dropped,
 * as is one cut at the end of src. dst may be src (cleaning in place).
 * Returns strlen(dst).
 * Blocks: never.
 */
size_t oq_text_clean(char *dst, size_t cap, const char *src, size_t n);

/*
 * Copy src (a C string) into dst (cap bytes, always NUL-terminated when
 * cap > 0) as escaped text: invalid UTF-8 becomes '?', control characters
 * become \n, \r, \t or \xHH, a backslash becomes \\; an escape or
 * character that would not fit whole is dropped. Returns strlen(dst).
 * Blocks: never.
 */
size_t oq_text_escape(char *dst, size_t cap, const char *src);

/*
 * Copy in into out (outlen bytes, always NUL-terminated when outlen > 0,
 * truncated to fit) with credentials masked (the rule above): each run of
 * hidden bytes becomes ***, e.g. "https://h/hook?token=***", the Slack
 * webhook "https://hooks.slack.com/services/T0/B0/XYZ" shown as
 * "https://hooks.slack.com/services/" and ***, "host=h sslpassword=***". Text
 * without credentials is copied unchanged.
 * Blocks: never.
 */
void oq_text_mask_secrets(const char *in, char *out, size_t outlen);

/* Overwrite in place, with '*' and keeping the length, every credential
 * oq_text_mask_secrets would mask: for a process's argv, so `ps` and
 * /proc/PID/cmdline do not show a --http or --notify-url password. Use a
 * copy made before for the real value.
 * Blocks: never. */
void oq_text_mask_secrets_in_place(char *s);

/* The next credential oq_text_mask_secrets would hide in text at or after
 * byte from: sets *start and *len and returns 1, or returns 0 when there
 * is none (or no memory). For collecting a URL's secrets once, to scrub
 * them from text that echoes them without the URL around (oq_text_scrub).
 * Blocks: never. */
int oq_text_secret_next(const char *text, size_t from, size_t *start,
                        size_t *len);

/* Replace every occurrence of secret (if not empty) in buf by "***", in
 * place, truncating to cap bytes (always NUL-terminated).
 * Blocks: never. */
void oq_text_scrub(char *buf, size_t cap, const char *secret);

#ifdef __cplusplus
}
#endif
#endif
