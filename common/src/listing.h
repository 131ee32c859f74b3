/*
 * listing.h: how the views that list rows (`onceq list`, `onceq sessions`,
 * the status page's /api/sessions and /api/dead) print them:
 * a table for people, or with --json one document {"<key>":[row,...],...}
 * that is built in memory and printed only once complete, so a failure
 * half way prints an error, not a cut JSON document.
 *
 * Typical use:
 *
 *   static const cm_listing_col cols[] = {{"ID", 0}, ..., {NULL, 0}};
 *   cm_listing l;
 *   rc = cm_listing_open(&l, json, "items", cols, "list");
 *   per row: l.json ? cm_json_obj(&l.j, NULL)... : cm_table_cell(l.t, ...)
 *   if (l.json) { cm_listing_end_rows(&l); more top-level fields in l.j }
 *   rc = cm_listing_print(&l, stdout, "list");
 *   cm_listing_free(&l);
 *
 * Thread safety: a cm_listing is used by one thread.
 */
#ifndef ONCEQ_COMMON_LISTING_H
#define ONCEQ_COMMON_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "jsonout.h"
#include "say.h" /* CM_EXIT_* */
#include "table.h"

/* A table column: header and CM_COL_* flags (table.h). */
typedef struct cm_listing_col {
  const char *header;
  unsigned flags;
} cm_listing_col;

typedef struct cm_listing {
  bool json;
  cm_table *t; /* !json: the table; NULL out of memory (print says so) */
  cm_json j;   /* json: the writer, inside the rows array at first */
  FILE *jf;    /* json: the memory stream j writes to */
  char *jbuf;
  size_t jlen;
} cm_listing;

/* Start a listing of command cmd: with json the document and its array
 * key, else a table with cols (ended by a NULL header). Returns
 * CM_EXIT_OK, or CM_EXIT_RUNTIME after "onceq: CMD: out of memory" on
 * stderr; free with cm_listing_free either way. */
int cm_listing_open(cm_listing *l, bool json, const char *key,
                    const cm_listing_col *cols, const char *cmd);

/* json: close the rows array; top-level fields may follow in l->j. */
void cm_listing_end_rows(cm_listing *l);

/* json: close the document and write it to out. Else print the table to
 * out (fitted to out's width). Returns CM_EXIT_OK, or CM_EXIT_RUNTIME
 * after one line on stderr. */
int cm_listing_print(cm_listing *l, FILE *out, const char *cmd);

/* Free what the listing holds; a zeroed one is fine. */
void cm_listing_free(cm_listing *l);

#endif
