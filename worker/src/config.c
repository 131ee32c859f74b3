/*
 * config.c: what the worker's settings own (config.h).
 */
#include <stdlib.h>

#include "config.h"
#include "handler_exec.h"

void wk_config_free(wk_config *cfg)
{
  free(cfg->db);
  cfg->db = NULL;
  free(cfg->listen_db);
  cfg->listen_db = NULL;
  free((char *)cfg->http_url);
  cfg->http_url = NULL;
  for (size_t i = 0; i < cfg->nenv; i++)
    free(cfg->env[i]);
  cfg->nenv = 0;
  wk_exec_env_free(cfg->exec_env);
  cfg->exec_env = NULL;
}
