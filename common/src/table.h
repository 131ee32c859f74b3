/*
 * table.h: aligned human tables that fit a width (80 columns unless the
 * stream is a terminal), for the CLI's commands and the coordinator's
 * views (query/src/views.h) alike.
 *
 * Terms:
 *  - display width: the number of UTF-8 code points (every code point counts
 *    as one column; double-width scripts are not special-cased).
 *  - flex column: a column that may be narrowed to make the table fit; its
 *    cells are then cut and end in "…". Other columns are never cut.
 *
 * Typical use:
 *
 *   cm_table *t = cm_table_new();
 *   cm_table_col(t, "ID", 0);
 *   cm_table_col(t, "COUNT", CM_COL_RIGHT);
 *   cm_table_col(t, "PAYLOAD", CM_COL_FLEX);
 *   cm_table_cell(t, id); cm_table_cellf(t, "%d", n); cm_table_cell(t, p);
 *   rc = cm_table_print(t, stdout, 0);   // 0: cm_out_width(stdout)
 *   cm_table_free(t);
 *
 * Thread safety: a cm_table is used by one thread.
 */
#ifndef ONCEQ_COMMON_TABLE_H
#define ONCEQ_COMMON_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define CM_COL_RIGHT 1u /* right-align (numbers) */
#define CM_COL_FLEX 2u  /* may be cut to fit the width, with "…" */

typedef struct cm_table cm_table;

/* A new, empty table; NULL when out of memory. Free with cm_table_free. */
cm_table *cm_table_new(void);
/* Free the table and every cell. NULL is allowed. */
void cm_table_free(cm_table *t);

/* Add a column (before the first cell). flags: CM_COL_* or 0. */
void cm_table_col(cm_table *t, const char *header, unsigned flags);
/* Append one cell (copied; NULL prints as "-") to the current row; a row
 * is complete after one cell per column. Control characters (newlines,
 * tabs) become spaces, so one row is always one line. */
void cm_table_cell(cm_table *t, const char *text);
void cm_table_cellf(cm_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Rows added so far. */
size_t cm_table_rows(const cm_table *t);

/*
 * Print the header and the rows, columns separated by two spaces, fitted
 * to width columns (0: cm_out_width(out)) by narrowing the flex columns
 * (never below their header). Returns 0, or -1 when an earlier allocation
 * failed (nothing printed).
 */
int cm_table_print(const cm_table *t, FILE *out, int width);

/* The width to fit: the terminal's when out is a terminal, else 80. */
int cm_out_width(FILE *out);

#endif
