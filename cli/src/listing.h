/*
 * listing.h: how the commands that list rows (list, sessions) print them:
 * a table for people, or with --json one document {"<key>":[row,...],...}
 * that is built in memory and printed only once complete, so a failure
 * half way prints an error, not a cut JSON document.
 *
 * Typical use:
 *
 *   static const cli_listing_col cols[] = {{"ID", 0}, ..., {NULL, 0}};
 *   cli_listing l;
 *   rc = cli_listing_open(&l, g->json, "items", cols, "list");
 *   per row: l.json ? cm_json_obj(&l.j, NULL)... : cli_table_cell(l.t, ...)
 *   if (l.json) { cli_listing_end_rows(&l); more top-level fields in l.j }
 *   rc = cli_listing_print(&l, stdout, "list");
 *   cli_listing_free(&l);
 *
 * Thread safety: a cli_listing is used by one thread.
 */
#ifndef ONCEQ_COORD_LISTING_H
#define ONCEQ_COORD_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "table.h"

/* A table column: header and CLI_COL_* flags. */
typedef struct cli_listing_col {
  const char *header;
  unsigned flags;
} cli_listing_col;

typedef struct cli_listing {
  bool json;
  cli_table *t; /* !json: the table; NULL out of memory (print says so) */
  cm_json j;    /* json: the writer, inside the rows array at first */
  FILE *jf;     /* json: the memory stream j writes to */
  char *jbuf;
  size_t jlen;
} cli_listing;

/* Start a listing of command cmd: with json the document and its array
 * key, else a table with cols (ended by a NULL header). Returns
 * CLI_EXIT_OK, or CLI_EXIT_RUNTIME after one line on stderr; free with
 * cli_listing_free either way. */
int cli_listing_open(cli_listing *l, bool json, const char *key,
                     const cli_listing_col *cols, const char *cmd);

/* json: close the rows array; top-level fields may follow in l->j. */
void cli_listing_end_rows(cli_listing *l);

/* json: close the document and write it to out. Else print the table to
 * out (fitted to out's width). Returns CLI_EXIT_OK, or CLI_EXIT_RUNTIME
 * after one line on stderr. */
int cli_listing_print(cli_listing *l, FILE *out, const char *cmd);

/* Free what the listing holds; a zeroed one is fine. */
void cli_listing_free(cli_listing *l);

#endif
