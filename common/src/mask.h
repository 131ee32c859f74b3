/*
 * mask.h: the one rule for keeping credentials out of what the daemons
 * and the CLI print (docs/design.md §6: passwords never appear in logs,
 * errors or `ps`). Every URL a program shows (a --http handler's URL, a
 * redirect's Location, the coordinator's --notify-url) goes through
 * cm_mask_url.
 *
 * The rule: what libonceq's oq_text_mask_secrets masks (the password of a
 * URL's userinfo, "scheme://user:PW@host", and the value of every
 * "password=", any case), and, in a URL whose userinfo has no ':', the
 * whole userinfo ("https://TOKEN@host": web services put API tokens
 * there). A database URL's userinfo without ':' is a user name, not a
 * secret, and is kept: oq_conninfo_mask (lib/) stays the rule for --db
 * values, and this module calls it rather than repeating it.
 *
 * Thread safety: no shared state.
 */
#ifndef ONCEQ_COMMON_MASK_H
#define ONCEQ_COMMON_MASK_H

#include <stddef.h>

/* Copy url into out (outlen bytes, NUL-terminated when outlen > 0,
 * truncated to fit) with its credentials replaced by "***" per the rule
 * above. NULL reads as "". */
void cm_mask_url(const char *url, char *out, size_t outlen);

/*
 * The credential cm_mask_url hides in url's userinfo (the password, or
 * the whole userinfo when it has no ':'), as a new string (free with
 * free), so a message that echoes it (libcurl's error text) can be
 * scrubbed; NULL when there is none or on out-of-memory.
 */
char *cm_url_secret(const char *url);

/* --db's value: oq_conninfo_mask (a database URL or key=value conninfo). */
void cm_mask_conninfo(const char *conninfo, char *out, size_t outlen);

#endif
