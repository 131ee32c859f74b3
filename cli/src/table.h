/*
 * table.h: output helpers the `onceq` commands share: aligned human tables
 * that fit a width (80 columns unless stdout is a terminal), compact
 * durations ("12s", "3m", "2h"), and JSON timestamps (the JSON writer is
 * common/src/jsonout.h).
 *
 * It also holds the few helpers every command needs: option parsing
 * (cli_opt, cli_parse_int, cli_is_uuid, cli_num) and one-line database
 * errors (cli_fail_db).
 *
 * Terms:
 *  - display width: the number of UTF-8 code points (every code point counts
 *    as one column; double-width scripts are not special-cased).
 *  - flex column: a column that may be narrowed to make the table fit; its
 *    cells are then cut and end in "…". Other columns are never cut.
 *
 * Typical use:
 *
 *   cli_table *t = cli_table_new();
 *   cli_table_col(t, "ID", 0);
 *   cli_table_col(t, "COUNT", CLI_COL_RIGHT);
 *   cli_table_col(t, "PAYLOAD", CLI_COL_FLEX);
 *   cli_table_cell(t, id); cli_table_cellf(t, "%d", n); cli_table_cell(t, p);
 *   rc = cli_table_print(t, stdout, 0);   // 0: cli_out_width(stdout)
 *   cli_table_free(t);
 *
 *   cm_json j;
 *   cm_json_init(&j, stdout);
 *   cm_json_obj(&j, NULL);
 *   cm_json_str(&j, "id", id);
 *   cm_json_raw(&j, "payload", payload_json_text);
 *   cm_json_end(&j);                     // closes the object, prints '\n'
 *
 * Thread safety: a cli_table / cm_json is used by one thread.
 */
#ifndef ONCEQ_CLI_TABLE_H
#define ONCEQ_CLI_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "jsonout.h"
#include "onceq/onceq.h"

/* ------------------------------------------------------------ tables */

#define CLI_COL_RIGHT 1u /* right-align (numbers) */
#define CLI_COL_FLEX 2u  /* may be cut to fit the width, with "…" */

typedef struct cli_table cli_table;

/* A new, empty table; NULL when out of memory. Free with cli_table_free. */
cli_table *cli_table_new(void);
/* Free the table and every cell. NULL is allowed. */
void cli_table_free(cli_table *t);

/* Add a column (before the first cell). flags: CLI_COL_* or 0. */
void cli_table_col(cli_table *t, const char *header, unsigned flags);
/* Append one cell (copied; NULL prints as "-") to the current row; a row
 * is complete after one cell per column. Control characters (newlines,
 * tabs) become spaces, so one row is always one line. */
void cli_table_cell(cli_table *t, const char *text);
void cli_table_cellf(cli_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Rows added so far. */
size_t cli_table_rows(const cli_table *t);

/*
 * Print the header and the rows, columns separated by two spaces, fitted
 * to width columns (0: cli_out_width(out)) by narrowing the flex columns
 * (never below their header). Returns 0, or -1 when an earlier allocation
 * failed (nothing printed).
 */
int cli_table_print(const cli_table *t, FILE *out, int width);

/* The width to fit: the terminal's when out is a terminal, else 80. */
int cli_out_width(FILE *out);

/* --------------------------------------------------------- text bits */

/* A compact duration for humans: "0.4s", "5s", "3m5s", "12m", "2h5m",
 * "4d". The sign is ignored. buf should hold 16 bytes. Returns buf. */
const char *cli_fmt_dur(double seconds, char *buf, size_t len);
/* "12s ago" / "in 5m" for seconds since (positive: in the past). */
const char *cli_fmt_ago(double seconds_since, char *buf, size_t len);
/* UTC ISO-8601 with seconds ("2024-05-01T09:30:00Z") for Unix epoch
 * seconds; "-" for NAN. */
const char *cli_fmt_time(double epoch_s, char *buf, size_t len);
/* Parse a strict decimal integer in [min, max]; false on anything else
 * ("", "12x", "1e3", overflow). */
bool cli_parse_int(const char *s, long long min, long long max, long long *out);
/*
 * Option matching for command parsers: true when argv[*i] is "--name" or
 * "--name=VALUE". *val gets VALUE, or the next argument (and *i moves past
 * it), or NULL when there is none (report "--name needs a value").
 */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* A numeric column's text as a double; NAN for NULL or non-numbers. */
double cli_num(const char *s);
/* True when s is a UUID in its canonical text form (8-4-4-4-12 hex). */
bool cli_is_uuid(const char *s);

/*
 * Report a failed database call of command cmd in one line on stderr and
 * return the exit code: a missing onceq table (SQLSTATE 42P01) says to run
 * `onceq migrate` and gives 2; anything else prints oq_db_errmsg(db) with
 * cli_exit_for(e). suffix (may be NULL), e.g. "nothing cancelled", ends
 * the line after "; ".
 */
int cli_fail_db(oq_db *db, oq_err e, const char *cmd, const char *suffix);

/* ------------------------------------------------------------- JSON */

/* A timestamp (epoch seconds) as an ISO-8601 UTC string with
 * milliseconds ("2024-05-01T09:30:00.123Z"); NAN: null. */
void cli_json_time(cm_json *j, const char *key, double epoch_s);

#endif
