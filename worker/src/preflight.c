/*
 * preflight.c: the worker's start-up checks of its handler (see
 * preflight.h). Terms: "the statement" is --sql's text; "the command" is
 * --exec's argv[0].
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onceq/onceq.h"
#include "onceq/stmt.h"
#include "preflight.h"

#define SQL_PARAMS_HINT                                                        \
  "parameters are $1 payload (jsonb), $2 id (uuid), $3 queue (text), "         \
  "$4 attempt (int)"

/* Skip blanks, -- comments, block comments and stray semicolons. Block
 * comments nest, as the server reads them (PostgreSQL docs, "Lexical
 * Structure: Comments"; CockroachDB's scanner alike): a comment that
 * opens a second one inside ends at the second close, not the first. An
 * unclosed comment runs to the end of the text. */
static const char *skip_noise(const char *s)
{
  for (;;) {
    while (*s && (isspace((unsigned char)*s) || *s == ';'))
      s++;
    if (s[0] == '-' && s[1] == '-') {
      s += strcspn(s, "\n");
    } else if (s[0] == '/' && s[1] == '*') {
      int depth = 1;
      for (s += 2; *s && depth > 0;) {
        if (s[0] == '/' && s[1] == '*') {
          depth++;
          s += 2;
        } else if (s[0] == '*' && s[1] == '/') {
          depth--;
          s += 2;
        } else {
          s++;
        }
      }
    } else {
      return s;
    }
  }
}

/* The length of the keyword at s (letters only). */
static size_t word_len(const char *s)
{
  size_t n = 0;
  while (isalpha((unsigned char)s[n]))
    n++;
  return n;
}

static bool word_is(const char *s, size_t n, const char *w)
{
  return strlen(w) == n && strncasecmp(s, w, n) == 0;
}

/*
 * Statements whose effect outlives the ack transaction on the executor's
 * connection, and so reaches the next items' handlers and onceq's own
 * statements (which rely on the defaults and on their prepared
 * statements). s is the first keyword (n letters), next the second. 0, or
 * 2 with err.
 */
static int check_session_state(const char *s, size_t n, const char *next,
                               char *err, size_t errlen)
{
  size_t nn = word_len(next);
  if (word_is(s, n, "set")) {
    /* SET LOCAL, SET TRANSACTION and SET CONSTRAINTS end with the
     * transaction; every other SET (SESSION, ROLE, a plain setting) stays */
    if (word_is(next, nn, "local") || word_is(next, nn, "transaction") ||
        word_is(next, nn, "constraints"))
      return 0;
    snprintf(err, errlen,
             "--sql must not change a session setting (SET): it would stay "
             "on the executor's connection after the ack transaction and "
             "apply to every later item and to onceq's own statements; use "
             "SET LOCAL, which ends with the transaction, or set it for the "
             "worker's role (ALTER ROLE ... SET)");
    return 2;
  }
  if (word_is(s, n, "reset")) {
    snprintf(err, errlen,
             "--sql must not change a session setting (RESET): it would stay "
             "on the executor's connection after the ack transaction; use "
             "SET LOCAL name TO DEFAULT, which ends with the transaction");
    return 2;
  }
  if (word_is(s, n, "listen") || word_is(s, n, "unlisten")) {
    snprintf(err, errlen,
             "--sql must not %s: the subscription stays on the executor's "
             "connection, which never reads notifications; to send one, "
             "use NOTIFY or pg_notify()",
             word_is(s, n, "listen") ? "LISTEN" : "UNLISTEN");
    return 2;
  }
  if (word_is(s, n, "prepare")) {
    if (word_is(next, nn, "transaction")) {
      snprintf(err, errlen,
               "--sql must not control the transaction (PREPARE "
               "TRANSACTION): the statement runs inside onceq's ack "
               "transaction, which commits it; remove the PREPARE "
               "TRANSACTION");
      return 2;
    }
    snprintf(err, errlen,
             "--sql must not PREPARE: the prepared statement would stay on "
             "the executor's connection after the ack transaction; give the "
             "statement itself (onceq prepares it)");
    return 2;
  }
  if (word_is(s, n, "deallocate") || word_is(s, n, "discard")) {
    snprintf(err, errlen,
             "--sql must not %s: it would drop onceq's own prepared "
             "statements and session state on the executor's connection; "
             "remove it",
             word_is(s, n, "discard") ? "DISCARD" : "DEALLOCATE");
    return 2;
  }
  if (word_is(s, n, "load")) {
    snprintf(err, errlen,
             "--sql must not LOAD a library: it stays loaded in the "
             "executor's session; load it on the server instead "
             "(session_preload_libraries)");
    return 2;
  }
  return 0;
}

int wk_preflight_sql_text(const char *sql, char *err, size_t errlen)
{
  static const char *const tx_words[] = {"begin",     "start",    "commit",
                                         "end",       "rollback", "abort",
                                         "savepoint", "release"};
  const char *s = skip_noise(sql ? sql : "");
  if (!*s) {
    snprintf(err, errlen,
             "--sql is empty; give one statement, e.g. --sql "
             "'insert into t (body) values ($1)'");
    return 2;
  }
  size_t n = word_len(s);
  /* COPY streams rows over the connection after its reply; inside the
   * ack transaction nothing would ever read or end that stream (the
   * connection stays in COPY state and the item stays claimed) */
  if (n == 4 && strncasecmp(s, "copy", 4) == 0) {
    snprintf(err, errlen,
             "--sql must not be a COPY: a COPY streams rows over the "
             "connection, which the ack transaction cannot carry; write "
             "INSERT ... SELECT or SELECT instead");
    return 2;
  }
  for (size_t i = 0; i < sizeof tx_words / sizeof tx_words[0]; i++) {
    if (strlen(tx_words[i]) == n && strncasecmp(s, tx_words[i], n) == 0) {
      snprintf(err, errlen,
               "--sql must not control the transaction (%.*s): the "
               "statement runs inside onceq's ack transaction, which commits "
               "it; remove the %.*s",
               (int)n, s, (int)n, s);
      return 2;
    }
  }
  return check_session_state(s, n, skip_noise(s + n), err, errlen);
}

int wk_preflight_sql(const char *sql, oq_db *db, char *err, size_t errlen)
{
  int rc = wk_preflight_sql_text(sql, err, errlen);
  if (rc)
    return rc;
  static const unsigned int types[4] = {OQ_OID_JSONB, OQ_OID_UUID, OQ_OID_TEXT,
                                        OQ_OID_INT4};
  int nparams = 0;
  oq_err e = oq_stmt_check(db, sql, 4, types, &nparams);
  if (e == OQ_ERR_CONN) {
    snprintf(err, errlen, "--sql could not be checked: %s", oq_db_errmsg(db));
    rc = 2;
  } else if (e != OQ_OK) {
    const char *msg = oq_db_errmsg(db);
    if (strncmp(msg, "prepare: ", 9) == 0)
      msg += 9;
    snprintf(err, errlen,
             "--sql is rejected by the server: %s (SQLSTATE %s); fix the "
             "statement (one statement; " SQL_PARAMS_HINT ")",
             msg, oq_db_sqlstate(db));
    rc = 2;
  } else if (nparams > 4) {
    snprintf(err, errlen,
             "--sql uses $%d; only $1..$4 exist (" SQL_PARAMS_HINT ")",
             nparams);
    rc = 2;
  }
  return rc;
}

/* Whether path is a regular file we may execute; 0, or an errno. */
static int executable(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return errno;
  if (S_ISDIR(st.st_mode))
    return EISDIR;
  if (!S_ISREG(st.st_mode))
    return EACCES;
  return access(path, X_OK) == 0 ? 0 : errno;
}

int wk_preflight_exec(const char *cmd, const char *path, char *err,
                      size_t errlen)
{
  if (!cmd || !*cmd) {
    snprintf(err, errlen,
             "--exec needs a command; e.g. --exec /usr/local/bin/job");
    return 2;
  }
  int e;
  if (strchr(cmd, '/')) {
    e = executable(cmd);
  } else {
    /* execvpe's search: PATH, or its default when unset */
    if (!path)
      path = getenv("PATH");
    if (!path)
      path = "/usr/bin:/bin";
    e = ENOENT;
    for (const char *p = path;; p++) {
      size_t len = strcspn(p, ":");
      char full[PATH_MAX];
      /* an empty PATH entry is the current directory */
      int n = snprintf(full, sizeof full, "%.*s/%s", len ? (int)len : 1,
                       len ? p : ".", cmd);
      if (n > 0 && (size_t)n < sizeof full) {
        int r = executable(full);
        if (r == 0) {
          e = 0;
          break;
        }
        if (r != ENOENT && r != ENOTDIR)
          e = r; /* found, but not usable: say that rather than "missing" */
      }
      p += len;
      if (!*p)
        break;
    }
    if (e == ENOENT) {
      snprintf(err, errlen,
               "--exec %s: command not found in PATH; give its full path or "
               "install it",
               cmd);
      return 2;
    }
  }
  if (e == 0)
    return 0;
  if (e == ENOENT || e == ENOTDIR)
    snprintf(err, errlen, "--exec %s: no such file; check the path", cmd);
  else if (e == EISDIR)
    snprintf(err, errlen,
             "--exec %s is a directory; give the program inside it", cmd);
  else if (e == EACCES)
    snprintf(err, errlen,
             "--exec %s is not an executable file; make it one (chmod +x) or "
             "name the interpreter first",
             cmd);
  else
    snprintf(err, errlen, "--exec %s cannot be run: %s", cmd, strerror(e));
  return 2;
}
