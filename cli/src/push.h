/*
 * push.h: the pieces of `onceq push` (cmd_push.c: options, the bulk loop,
 * the single form's entry), one file per job:
 *  - push_read.c: reading lines from stdin, with a timeout;
 *  - push_batch.c: checking lines and batching them, sending a batch
 *    (oq_enqueue_many) in its transaction;
 *  - push_bisect.c: finding the line the server refused in a batch;
 *  - push_progress.c: the progress line, the spans of lines and the
 *    summary;
 *  - push_single.c: one PAYLOAD argument (oq_enqueue) and its --wait.
 * The terms (line, batch, bad line) are cmd_push.c's.
 *
 * Thread safety: one push runs on one thread.
 */
#ifndef ONCEQ_CLI_PUSH_H
#define ONCEQ_CLI_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "table.h"

/* Longest queue name, unique key or ordering key push accepts, in bytes
 * (OQ_MAX_ORDERING_KEY_BYTES, onceq/enqueue.h): all are index
 * keys (a btree entry holds at most about 2700 bytes) and a queue name
 * travels in the wake-up NOTIFY (payload under 8000 bytes). */
#define MAX_NAME_BYTES 1000
#define DEFAULT_BATCH 1000
#define MAX_BATCH 100000
#define MAX_LINE_BYTES (256u << 20) /* jsonb's own limit is 255 MiB */
#define IDLE_FLUSH_MS 200     /* input paused this long: send what we have */
#define MAX_BATCH_AGE_MS 1000 /* a slow, steady producer: send each second */
#define TTY_REDRAW_MS 100
#define PLAIN_EVERY_MS 1000

typedef struct push_opts {
  const char *queue;
  long long priority;
  int64_t delay_ms;
  const char *run_at;
  const char *unique_key;
  long long max_attempts;
  const char *payload;            /* single form; NULL: bulk from stdin */
  const char *key_field;          /* --unique-key-field */
  const char *ordering_key;       /* --ordering-key */
  const char *ordering_key_field; /* --ordering-key-field */
  long long batch;
  bool batch_set; /* --batch was given */
  bool atomic, quiet, json;
  bool wait;            /* --wait: wait for the result (cmd_wait.c) */
  long wait_timeout_ms; /* --timeout; < 0: no limit */
} push_opts;

/* A line reader on a file descriptor that can wait with a timeout, so a
 * slow producer's lines are sent without waiting for a full batch. */
typedef struct push_reader {
  int fd;
  char *buf;
  size_t start, end, cap, scanned; /* scanned: no '\n' in [start,scanned) */
  bool eof;
} push_reader;

typedef struct push_batch {
  char *text; /* "[l1,l2,...]" once closed */
  size_t len, cap;
  size_t *off, *ilen; /* each item's place in text */
  long *line;         /* each item's input line */
  size_t n, icap;
  long nitems;                /* non-blank lines, good or bad */
  long first_line, last_line; /* the range this batch covers */
  double started_s;           /* monotonic time of its first item */
  uint64_t bytes;             /* input bytes of that range */
  long bad_line;              /* first bad line, 0 if none */
  char bad_reason[96];        /* its short reason */
  long nbad;
} push_batch;

typedef enum push_span_kind {
  SPAN_INSERTED,
  SPAN_REJECTED,
  SPAN_UNKNOWN,     /* the commit's outcome is unknown */
  SPAN_NOT_INSERTED /* stopped (error, interrupt) before it went in */
} push_span_kind;

typedef struct push_span {
  long first, last;
  push_span_kind kind;
  char why[160]; /* rejected / unknown / not inserted: the reason */
} push_span;

typedef struct push_state {
  const push_opts *o;
  oq_db *db;
  oq_enqueue_opts eo; /* queue, priority, delay or run_at, max_attempts,
                         ordering_key or ordering_key_field */
  /* per batch insert (reset on each run of the transaction) */
  long *ins_ord; /* RETURNING ords */
  char (*ins_id)[37];
  size_t nins, cap_ins;
  /* totals */
  long lines, items, inserted, existed, rejected_items;
  push_span *spans;
  size_t nspans, cap_spans;
  bool oom;
  /* progress */
  bool tty;
  uint64_t total_bytes; /* 0: unknown */
  uint64_t done_bytes;
  long done_lines; /* lines of batches handled */
  double t0, last_draw;
  long last_drawn_lines;
  bool drew_tty;
  /* --json output of ids */
  cm_json j;
} push_state;

/* ---- push_read.c: reading lines */

/*
 * The next line (without its '\n') in *line and *len, valid until the next
 * call. Returns 1: a line; 0: end of input; -2: no whole line within
 * timeout_ms (< 0: wait as long as it takes); -3: interrupted by a signal;
 * -1: read error (errno); -4: a line longer than MAX_LINE_BYTES.
 */
int push_read_line(push_reader *r, int timeout_ms, char **line, size_t *len);

/* ---- push_batch.c: checking and batching lines, sending a batch */

/* Empty b for the lines from first_line on (its buffers are kept). */
void push_batch_reset(push_batch *b, long first_line);

/* Free b's buffers; b is then empty. */
void push_batch_free(push_batch *b);

/* Check one input line and add it to b. Returns false only on OOM. */
bool push_take_line(push_state *st, push_batch *b, char *s, size_t n,
                    long line);

/* Non-atomic: send one finished batch in its own transaction. Returns
 * false when pushing must stop (a runtime error). */
bool push_flush_batch(push_state *st, push_batch *b);

/* --atomic: send the nall batches of all in one transaction (bisecting
 * for the line the server refuses) and record the outcome as one span over
 * every line. Returns the exit code. */
int push_send_all(push_state *st, push_batch *all, size_t nall);

/* ---- push_bisect.c: bisection of a refused batch */

/* A server error that is about the data (bisect for the line), not about
 * the connection or the schema: data exceptions (22), program limits (54)
 * and integrity constraints (23: a CHECK or trigger an operator added to
 * onceq_items refuses some lines; a unique key conflict is DO NOTHING). */
bool push_data_error(oq_err e, const char *sqlstate);

/*
 * The server refused a batch that passed our checks: find its first bad
 * line by bisection (about log2(batch) round trips). Returns the line, or
 * 0 when every half is accepted (the refusal was about something else).
 */
long push_bisect(push_state *st, const push_batch *b, char *why, size_t whylen);

/* ---- push_progress.c: progress, spans and the summary */

/* Monotonic time, in seconds. */
double push_now_s(void);

/* Record lines first..last as kind (why: the reason, NULL for inserted);
 * an inserted span right after an inserted one extends it. Sets st->oom
 * when out of memory. */
void push_span_add(push_state *st, long first, long last, push_span_kind kind,
                   const char *why);

/* Trailing blank lines after the last batch belong to the last span. */
void push_span_extend(push_state *st, long last);

/* Draw the progress: a redrawn line on a terminal, a plain line at most
 * every PLAIN_EVERY_MS otherwise. force: draw now (the last one). */
void push_progress(push_state *st, const char *verb, bool force);

/* Before any other stderr line: clear the redrawn one. */
void push_progress_clear(push_state *st);

/* One line on stderr, "onceq: push: ...", after clearing the progress
 * line. */
void push_say(push_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print the ids of the new items in input order. */
void push_print_ids(push_state *st, const push_batch *b, size_t nb);

/* Print "inserted lines 1-1000, 2001-3000; rejected lines 1001-2000
 * (line 1500: invalid JSON)". */
void push_print_summary(push_state *st, double secs);

/* --json: the summary object (the spans, the counts, exit code rc). */
void push_print_json_summary(push_state *st, int rc);

/* ---- push_single.c: one item */

/* The single form: enqueue st->o->payload; with --wait, wait for its
 * outcome. Returns the exit code. */
int push_single(push_state *st);

#endif
