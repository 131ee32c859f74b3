/* listing.c: rows as a table or one buffered JSON document (listing.h). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "listing.h"

int cli_listing_open(cli_listing *l, bool json, const char *key,
                     const cli_listing_col *cols, const char *cmd)
{
  memset(l, 0, sizeof *l);
  l->json = json;
  if (!json) {
    l->t = cli_table_new();
    for (; cols->header; cols++)
      cli_table_col(l->t, cols->header, cols->flags);
    return CLI_EXIT_OK;
  }
  l->jf = open_memstream(&l->jbuf, &l->jlen);
  if (!l->jf)
    return cli_fail(CLI_EXIT_RUNTIME, cmd, "out of memory");
  cm_json_init(&l->j, l->jf);
  cm_json_obj(&l->j, NULL);
  cm_json_arr(&l->j, key);
  return CLI_EXIT_OK;
}

void cli_listing_end_rows(cli_listing *l)
{
  if (l->json)
    cm_json_end(&l->j);
}

int cli_listing_print(cli_listing *l, FILE *out, const char *cmd)
{
  if (!l->json) {
    if (cli_table_print(l->t, out, 0) != 0)
      return cli_fail(CLI_EXIT_RUNTIME, cmd, "out of memory");
    return CLI_EXIT_OK;
  }
  cm_json_end(&l->j);
  /* jbuf and jlen are final only once the stream is closed. */
  fclose(l->jf);
  l->jf = NULL;
  fwrite(l->jbuf, 1, l->jlen, out);
  return CLI_EXIT_OK;
}

void cli_listing_free(cli_listing *l)
{
  if (l->jf)
    fclose(l->jf);
  free(l->jbuf);
  cli_table_free(l->t);
  memset(l, 0, sizeof *l);
}
