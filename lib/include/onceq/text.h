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
 *  - masked text: any credential that looks like one (a URL's userinfo
 *    password, password=... in a conninfo or a query string) replaced by
 *    "***". Every usage error passes oq_text_mask_secrets.
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
 * truncated to fit) with credentials masked: in "scheme://user:PW@host"
 * the PW becomes ***, and the value of every "password=" (any case; quoted
 * or not) becomes ***. Text without credentials is copied unchanged.
 * Blocks: never.
 */
void oq_text_mask_secrets(const char *in, char *out, size_t outlen);

/* Overwrite in place, with '*' and keeping the length, every credential
 * oq_text_mask_secrets would mask: for a process's argv, so `ps` and
 * /proc/PID/cmdline do not show a --http or --notify-url password. Use a
 * copy made before for the real value.
 * Blocks: never. */
void oq_text_mask_secrets_in_place(char *s);

#ifdef __cplusplus
}
#endif
#endif
