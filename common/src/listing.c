/* listing.c: rows as a table or one buffered JSON document (listing.h). */
#include <stdlib.h>
#include <string.h>

#include "listing.h"
#include "say.h"

/* "onceq: CMD: out of memory" on stderr; CM_EXIT_RUNTIME. */
static int fail_oom(const char *cmd)
{
  cm_say("onceq", cmd, NULL, "out of memory");
  return CM_EXIT_RUNTIME;
}

int cm_listing_open(cm_listing *l, bool json, const char *key,
                    const cm_listing_col *cols, const char *cmd)
{
  memset(l, 0, sizeof *l);
  l->json = json;
  if (!json) {
    l->t = cm_table_new();
    for (; cols->header; cols++)
      cm_table_col(l->t, cols->header, cols->flags);
    return CM_EXIT_OK;
  }
  l->jf = open_memstream(&l->jbuf, &l->jlen);
  if (!l->jf)
    return fail_oom(cmd);
  cm_json_init(&l->j, l->jf);
  cm_json_obj(&l->j, NULL);
  cm_json_arr(&l->j, key);
  return CM_EXIT_OK;
}

void cm_listing_end_rows(cm_listing *l)
{
  if (l->json)
    cm_json_end(&l->j);
}

int cm_listing_print(cm_listing *l, FILE *out, const char *cmd)
{
  if (!l->json) {
    if (cm_table_print(l->t, out, 0) != 0)
      return fail_oom(cmd);
    return CM_EXIT_OK;
  }
  cm_json_end(&l->j);
  /* jbuf and jlen are final only once the stream is closed. */
  fclose(l->jf);
  l->jf = NULL;
  fwrite(l->jbuf, 1, l->jlen, out);
  return CM_EXIT_OK;
}

void cm_listing_free(cm_listing *l)
{
  if (l->jf)
    fclose(l->jf);
  free(l->jbuf);
  cm_table_free(l->t);
  memset(l, 0, sizeof *l);
}
