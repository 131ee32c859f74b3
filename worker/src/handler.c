/*
 * handler.c: the table of handler kinds (handler.h). Each kind's section
 * binds its runner (handler_exec.h, handler_http.h, handler_sql.h), which
 * knows nothing of the worker's flags, to wk_config and the row's hooks;
 * the table at the end lists the rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curlpost.h"
#include "handler.h"
#include "handler_exec.h"
#include "handler_http.h"
#include "handler_sql.h"
#include "preflight.h"

/* ---- --exec CMD [ARG...] ------------------------------------------------ */

static int exec_parse(wk_config *cfg, int argc, char **argv, int i, char *val,
                      bool inline_val, char *err, size_t errlen)
{
  static const char need_cmd[] =
      "--exec needs a command; e.g. --exec /usr/local/bin/job --flag";
  if (inline_val) {
    /* --exec=CMD [ARG...]: the command starts in this argument */
    if (!*val) {
      snprintf(err, errlen, "%s", need_cmd);
      return -1;
    }
    argv[i] = val;
    cfg->exec_argv = &argv[i];
    return 0;
  }
  if (!val) {
    snprintf(err, errlen, "%s", need_cmd);
    return -1;
  }
  /* "--exec CMD --sql X" is almost always two handlers by mistake; a
   * command that takes such flags itself goes after "--". */
  if (strcmp(val, "--") == 0) {
    if (i + 2 >= argc) {
      snprintf(err, errlen, "--exec -- needs a command after --");
      return -1;
    }
    cfg->exec_argv = &argv[i + 2];
    return 0;
  }
  for (int k = i + 1; k < argc; k++)
    if (wk_handler_for_arg(argv[k])) {
      snprintf(err, errlen,
               "more than one handler given (--exec and %s); choose one, or "
               "write --exec -- CMD if %s is the command's own argument",
               argv[k], argv[k]);
      return -1;
    }
  cfg->exec_argv = &argv[i + 1];
  return 0;
}

static int exec_check(const wk_config *cfg, oq_db *db, char *err, size_t errlen)
{
  (void)db;
  return wk_preflight_exec(cfg->exec_argv ? cfg->exec_argv[0] : NULL, NULL, err,
                           errlen);
}

/* The children's base environment: after the start-up checks, so that a
 * usage error stays one line (it warns about unset --env names), and
 * before the threads (it reads environ, and nobody may setenv then). */
static int exec_prepare(wk_config *cfg)
{
  cfg->exec_env = wk_exec_env_new((const char *const *)cfg->env, cfg->nenv);
  return cfg->exec_env ? 0 : -1;
}

static void exec_run(void *state, const wk_config *cfg, const wk_task *t,
                     wk_result *r)
{
  (void)state;
  wk_exec_cfg ec = {.argv = cfg->exec_argv,
                    .timeout_ms = (int)cfg->timeout_ms,
                    .kill_grace_ms = (int)cfg->kill_grace_ms,
                    .env = cfg->exec_env};
  wk_exec_run(&ec, t, r); /* a child that cannot start: WK_FAILED in r */
}

static const wk_handler exec_handler = {
    .flag = "--exec",
    .synopsis = "--exec CMD [ARG...]",
    .brief = "--exec CMD",
    .help = "run CMD per item: payload on stdin, item id as\n"
            "                       the last argument; exit 0 = success. "
            "Takes the\n"
            "                       rest of the command line.",
    .takes_rest = true,
    .children = true,
    .parse = exec_parse,
    .check = exec_check,
    .prepare = exec_prepare,
    .run = exec_run,
};

/* ---- --http URL --------------------------------------------------------- */

static int http_parse(wk_config *cfg, int argc, char **argv, int i, char *val,
                      bool inline_val, char *err, size_t errlen)
{
  (void)argc, (void)argv, (void)i, (void)inline_val;
  if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8)) {
    snprintf(err, errlen, "--http %s is not an http:// or https:// URL", val);
    return -1;
  }
  /* its password stays in a copy and leaves argv (ps) */
  free((char *)cfg->http_url);
  cfg->http_url = strdup(val);
  if (!cfg->http_url) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  oq_text_mask_secrets_in_place(val);
  return 0;
}

static int http_check(const wk_config *cfg, oq_db *db, char *err, size_t errlen)
{
  (void)db;
  return cm_curl_check_url("--http", cfg->http_url, err, errlen);
}

/* Only this kind uses libcurl's transfers: its TLS set-up costs about
 * 3 MiB of resident memory that an --sql or --exec worker does not need
 * (the README's memory figure). */
static int http_init(char *err, size_t errlen)
{
  return cm_curl_global_init(err, errlen);
}

/* Called from here, not from handler_http.c: a test links the worker with
 * -Wl,--wrap=wk_http_new (http_new_fails.c), which reaches only calls from
 * another object file. */
static void *http_state_new(const wk_config *cfg)
{
  wk_http_cfg hc = {.url = cfg->http_url,
                    .timeout_ms = (int)cfg->timeout_ms,
                    .insecure = cfg->insecure};
  return wk_http_new(&hc);
}

static void http_state_free(void *state)
{
  wk_http_free(state);
}

static void http_run(void *state, const wk_config *cfg, const wk_task *t,
                     wk_result *r)
{
  (void)cfg;
  wk_http_run(state, t, r);
}

static const wk_handler http_handler = {
    .flag = "--http",
    .synopsis = "--http URL",
    .brief = "--http URL",
    .help = "POST the payload; 2xx = success",
    .parse = http_parse,
    .check = http_check,
    .init = http_init,
    .cleanup = cm_curl_global_cleanup,
    .state_new = http_state_new,
    .state_free = http_state_free,
    .state_what = "the HTTP client",
    .run = http_run,
};

/* ---- --sql STATEMENT ---------------------------------------------------- */

static int sql_parse(wk_config *cfg, int argc, char **argv, int i, char *val,
                     bool inline_val, char *err, size_t errlen)
{
  (void)argc, (void)argv, (void)i, (void)inline_val, (void)err, (void)errlen;
  cfg->sql = val;
  return 0;
}

static int sql_check(const wk_config *cfg, oq_db *db, char *err, size_t errlen)
{
  return wk_preflight_sql(cfg->sql, db, err, errlen);
}

/* Batched unless --sql-per-item: up to --batch items in one ack
 * transaction (each transaction costs a commit). */
static int sql_batch_max(const wk_config *cfg)
{
  return !cfg->sql_per_item && cfg->batch > 1 ? cfg->batch : 1;
}

static const wk_handler sql_handler = {
    .flag = "--sql",
    .synopsis = "--sql STATEMENT",
    .brief = "--sql STATEMENT",
    .help = "run in the ack transaction: $1 payload (jsonb),\n"
            "                       $2 id (uuid), $3 queue (text), $4 attempt "
            "(int)",
    .parse = sql_parse,
    .check = sql_check,
    .handle = wk_sql_handle,
    .handle_batch = wk_sql_handle_batch,
    .batch_max = sql_batch_max,
};

/* ---- the table ---------------------------------------------------------- */

const wk_handler *const wk_handlers[] = {&exec_handler, &http_handler,
                                         &sql_handler};
const size_t wk_nhandlers = sizeof wk_handlers / sizeof wk_handlers[0];

const wk_handler *wk_handler_for_arg(const char *arg)
{
  for (size_t i = 0; i < wk_nhandlers; i++) {
    size_t n = strlen(wk_handlers[i]->flag);
    if (strncmp(arg, wk_handlers[i]->flag, n) == 0 &&
        (arg[n] == '\0' || arg[n] == '='))
      return wk_handlers[i];
  }
  return NULL;
}

const wk_handler *wk_handler_named(const char *name)
{
  for (size_t i = 0; i < wk_nhandlers; i++)
    if (strcmp(wk_handlers[i]->flag + 2, name) == 0)
      return wk_handlers[i];
  return NULL;
}

int wk_handler_batch_max(const wk_config *cfg)
{
  const wk_handler *h = cfg->handler;
  int n = h && h->batch_max ? h->batch_max(cfg) : 1;
  return n > 1 ? n : 1;
}
