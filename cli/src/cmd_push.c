/*
 * cmd_push.c: `onceq push`: enqueue one item (PAYLOAD argument, through
 * oq_enqueue), or JSON lines from stdin in bulk.
 *
 * Terms:
 *  - line: one line of stdin, numbered from 1; a blank line is skipped
 *    (it is counted, but it is not an item).
 *  - batch: up to --batch items (default 1000) sent as one JSON array in one
 *    statement (oq_enqueue_many), in its own transaction. Its line range runs
 * from the line after the previous batch to its last line, so the ranges of all
 * batches cover the input without gaps.
 *  - bad line: not JSON (checked here, before anything is sent, by
 *    json_check, jsonline.h: jansson, strict RFC 8259, and what
 *    PostgreSQL's jsonb refuses: \u0000 and unpaired surrogates), or, with
 * --unique-key-field F, not an object whose field F is a string or a number. A
 * line the server still rejects (e.g. a number out of numeric's range) is found
 * by bisecting its batch.
 *
 * Default: a batch with a bad line is not sent; the others are, and the
 * summary names the line ranges inserted and rejected (exit 1). --atomic:
 * every line is read and checked first, then all batches go in one
 * transaction; any bad line means nothing is inserted (exit 2).
 * --ordering-key-field F: ordering_key = the line's field F (a string or
 * a number, not empty, at most MAX_NAME_BYTES), required on every line like
 * --unique-key-field's; the batch's array order is the items' enqueue order.
 * --unique-key-field F makes a re-run safe: unique_key = the line's field F,
 * and ON CONFLICT (unique_key) DO NOTHING skips lines whose item is still
 * live. The ids of new items go to stdout in input order; progress, errors
 * and the summary go to stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "due.h"
#include "jsonline.h"
#include "push.h"
#include "table.h"

_Static_assert(MAX_NAME_BYTES == OQ_MAX_ORDERING_KEY_BYTES,
               "--ordering-key's limit is the library's");

static volatile sig_atomic_t interrupted; /* the signal, 0 if none */

static void on_signal(int sig)
{
  interrupted = sig;
}

/*
 * The one line an interrupted push says: which signal, what was committed,
 * and where to resume. from: the first line not committed after the last
 * batch handled; lines from..st->lines were read but not sent, the input
 * after st->lines was never read. Rejected batches before from are in the
 * summary (they need fixing, not resuming).
 */
static void say_interrupted(push_state *st, long from)
{
  long committed = 0;
  for (size_t k = 0; k < st->nspans; k++)
    if (st->spans[k].kind == SPAN_INSERTED)
      committed += st->spans[k].last - st->spans[k].first + 1;
  const char *sig = interrupted == SIGINT    ? "SIGINT"
                    : interrupted == SIGTERM ? "SIGTERM"
                                             : "a signal";
  char unread[160];
  if (from <= st->lines)
    snprintf(unread, sizeof unread,
             "lines %ld-%ld were read but not sent, and input from line %ld "
             "on was never read",
             from, st->lines, st->lines + 1);
  else
    snprintf(unread, sizeof unread, "input from line %ld on was never read",
             st->lines + 1);
  if (st->o->atomic)
    push_say(st,
             "interrupted by %s: nothing committed (--atomic inserts all or "
             "nothing); %s; run it again with the whole input",
             sig, unread);
  else
    push_say(
        st,
        "interrupted by %s: %ld line%s committed (%ld new item%s); %s; resume "
        "with `tail -n +%ld`",
        sig, committed, committed == 1 ? "" : "s", st->inserted,
        st->inserted == 1 ? "" : "s", unread, from);
}

/*
 * Without --atomic, after the last line read: send the open batch cur
 * unless pushing stopped (an error, a signal: stopped), record the lines
 * read but not sent, and give the exit code (1 when any span was not
 * inserted).
 */
static int end_streamed(push_state *st, push_batch *cur, bool stopped,
                        bool read_error)
{
  int rc = CLI_EXIT_OK;
  if (!stopped) {
    if (cur->nitems > 0)
      push_flush_batch(st, cur);
    else
      push_span_extend(st, st->lines);
  } else {
    long from = 1;
    if (st->nspans > 0)
      from = st->spans[st->nspans - 1].last + 1;
    char why[64];
    snprintf(why, sizeof why, "%s",
             read_error    ? "input error"
             : interrupted ? "interrupted"
                           : "stopped");
    if (from <= st->lines)
      push_span_add(st, from, st->lines, SPAN_NOT_INSERTED, why);
    if (interrupted && !read_error)
      say_interrupted(st, from);
    rc = CLI_EXIT_RUNTIME;
  }
  bool rejected = false;
  for (size_t k = 0; k < st->nspans; k++)
    if (st->spans[k].kind != SPAN_INSERTED)
      rejected = true;
  if (rejected)
    rc = CLI_EXIT_RUNTIME;
  return rc;
}

/* Read stdin. Non-atomic: send each batch as it fills (or when input
 * pauses). Atomic: keep every batch, then send them all in one
 * transaction. Returns the exit code. */
static int bulk(push_state *st)
{
  const push_opts *o = st->o;
  push_reader rd = {.fd = STDIN_FILENO};
  push_batch one = {0};
  push_batch *all = NULL; /* --atomic */
  size_t nall = 0, capall = 0;
  long nbad = 0;
  int rc = CLI_EXIT_OK;
  bool stop = false, read_error = false;
  char *line;
  size_t len;

  struct stat sb;
  if (fstat(STDIN_FILENO, &sb) == 0 && S_ISREG(sb.st_mode)) {
    off_t pos = lseek(STDIN_FILENO, 0, SEEK_CUR);
    if (pos >= 0 && sb.st_size > pos)
      st->total_bytes = (uint64_t)(sb.st_size - pos);
  }
  if (isatty(STDIN_FILENO))
    push_say(st, "reading JSON lines from the terminal; end with Ctrl-D");
  st->t0 = st->last_draw = push_now_s();

  push_batch *cur = &one;
  push_batch_reset(cur, 1);
  while (!stop) {
    int timeout = cur->nitems > 0 ? IDLE_FLUSH_MS : PLAIN_EVERY_MS;
    if (o->atomic)
      timeout = PLAIN_EVERY_MS;
    int r = push_read_line(&rd, timeout, &line, &len);
    if (interrupted) {
      rc = CLI_EXIT_RUNTIME; /* said after the loop (say_interrupted) */
      break;
    }
    if (r == -3)
      continue;
    if (r == -2) { /* input paused */
      if (!o->atomic && cur->nitems > 0) {
        if (!push_flush_batch(st, cur))
          stop = true;
        push_batch_reset(cur, st->lines + 1);
      } else {
        push_progress(st, o->atomic ? "read" : "pushed", false);
      }
      continue;
    }
    if (r == -1 || r == -4) {
      if (r == -4)
        push_say(st, "line %ld is longer than %u MiB; stopped reading",
                 st->lines + 1, MAX_LINE_BYTES >> 20);
      else
        push_say(st, "cannot read stdin: %s", strerror(errno));
      read_error = true;
      break;
    }
    if (r == 0)
      break;
    st->lines++;
    cur->last_line = st->lines;
    cur->bytes += len + 1;
    long bad_before = cur->nbad;
    if (!push_take_line(st, cur, line, len, st->lines)) {
      push_say(st, "out of memory at line %ld", st->lines);
      read_error = true;
      break;
    }
    nbad += cur->nbad - bad_before;
    if (cur->nitems < o->batch) {
      if (o->atomic ||
          (push_now_s() - cur->started_s) * 1000.0 < MAX_BATCH_AGE_MS)
        continue;
    }
    /* the batch is full */
    if (!o->atomic) {
      if (!push_flush_batch(st, cur))
        stop = true;
      push_batch_reset(cur, st->lines + 1);
      if (interrupted)
        stop = true;
      continue;
    }
    if (nall == capall) {
      size_t nc = capall ? capall * 2 : 16;
      push_batch *na = realloc(all, nc * sizeof *na);
      if (!na) {
        push_say(st, "out of memory at line %ld", st->lines);
        read_error = true;
        break;
      }
      all = na;
      capall = nc;
    }
    all[nall++] = *cur;
    memset(cur, 0, sizeof *cur);
    push_batch_reset(cur, st->lines + 1);
    st->done_lines = st->lines;
    st->done_bytes += all[nall - 1].bytes;
    push_progress(st, "read", false);
  }

  if (!o->atomic) {
    rc = end_streamed(st, cur, stop || read_error || rc != CLI_EXIT_OK,
                      read_error);
    goto out;
  }

  /* --atomic */
  if (cur->nitems > 0) {
    if (nall == capall) {
      push_batch *na = realloc(all, (capall + 1) * sizeof *na);
      if (!na) {
        read_error = true;
      } else {
        all = na;
        capall++;
      }
    }
    if (!read_error) {
      all[nall++] = *cur;
      memset(cur, 0, sizeof *cur);
    }
  }
  if (read_error || rc != CLI_EXIT_OK) {
    push_span_add(st, 1, st->lines, SPAN_NOT_INSERTED,
                  interrupted ? "interrupted; --atomic"
                              : "input error; --atomic");
    if (interrupted && !read_error)
      say_interrupted(st, 1);
    rc = CLI_EXIT_RUNTIME;
    goto out;
  }
  if (nbad > 0) {
    char why[200];
    long first = 0;
    for (size_t k = 0; k < nall && !first; k++)
      if (all[k].nbad)
        first = all[k].bad_line;
    snprintf(why, sizeof why,
             "%ld bad line%s, the first is line %ld; "
             "--atomic inserts nothing",
             nbad, nbad == 1 ? "" : "s", first);
    push_span_add(st, 1, st->lines, SPAN_REJECTED, why);
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  if (nall == 0)
    goto out;
  rc = push_send_all(st, all, nall);
out:
  if (st->tty)
    push_progress_clear(st);
  else if (st->done_lines != st->last_drawn_lines &&
           push_now_s() - st->t0 >= PLAIN_EVERY_MS / 1000.0)
    push_progress(st, o->atomic ? "sent" : "pushed", true);
  if (st->oom) {
    push_say(st, "out of memory keeping the summary");
    rc = CLI_EXIT_RUNTIME;
  }
  push_print_summary(st, push_now_s() - st->t0);
  if (o->json)
    push_print_json_summary(st, rc);
  push_batch_free(&one);
  for (size_t k = 0; k < nall; k++)
    push_batch_free(&all[k]);
  free(all);
  free(rd.buf);
  return rc;
}

static void usage(FILE *out)
{
  fprintf(out,
          "usage: onceq push [OPTIONS] PAYLOAD_JSON\n"
          "       onceq push [OPTIONS] < items.jsonl     (bulk)\n"
          "  enqueue one item and print its id; without PAYLOAD_JSON, read\n"
          "  JSON lines from stdin and print the id of each new item\n"
          "options:\n"
          "  --queue Q            queue (default \"default\")\n"
          "  --priority N         higher runs first (default 0)\n"
          "  --delay D            run after D (250ms, 5s, 2m, 1h)\n"
          "  --run-at TS          run at TS (e.g. 2030-01-01T09:00:00Z)\n"
          "  --max-attempts N     dead-lettered after N failures (default %d)\n"
          "  --unique-key K       at most one live item with key K: when it\n"
          "                       exists, print its id (stderr says exists)\n"
          "  --ordering-key K     items of the queue with key K run one at a\n"
          "                       time, in the order they were pushed (bulk:\n"
          "                       every line gets K)\n"
          "  -q, --quiet          do not print ids\n"
          "  --wait               wait for the item's outcome and print its\n"
          "                       result instead of its id; exit 3 dead,\n"
          "                       4 cancelled, 5 timeout (see onceq wait)\n"
          "  --timeout D          with --wait: give up after D\n"
          "bulk only:\n"
          "  --batch N            lines per batch and transaction (default "
          "%d)\n"
          "  --unique-key-field F unique_key = each line's field F (string or\n"
          "                       number): a re-run skips lines whose item\n"
          "                       is still live, so nothing goes in twice\n"
          "  --ordering-key-field F  ordering_key = each line's field F\n"
          "                       (string or number, not empty): per key,\n"
          "                       items run one at a time in line order\n"
          "  --atomic             all lines in one transaction: any bad line\n"
          "                       and nothing is inserted (exit 2); keeps the\n"
          "                       input in memory\n"
          "By default a batch with a bad line is not inserted and the others\n"
          "are; stderr names each bad line and ends with the line ranges\n"
          "inserted and rejected (exit 1). Progress goes to stderr: a redrawn\n"
          "line on a terminal, a plain line every second otherwise.\n"
          "With --json: ids as {\"line\":N,\"id\":\"...\"} lines, then one\n"
          "summary object.\n",
          OQ_DEFAULT_MAX_ATTEMPTS, DEFAULT_BATCH);
}

/* Row callback of the --run-at check: "t" when the time is usable. */
static oq_err run_at_row(void *ud, int ncols, const char *const *vals)
{
  *(bool *)ud = ncols == 1 && vals[0] && strcmp(vals[0], "t") == 0;
  return OQ_OK;
}

/*
 * --run-at must be a finite calendar time a person wrote: it starts with
 * its year (so no 'infinity', 'tomorrow', 'epoch' or 'now', which the
 * server would take), and the server reads it as a time after 1970 and
 * before 100 years from now (so no '4000-01-01 BC'). An item due at
 * infinity can never run. Returns CLI_EXIT_OK or the exit code after one
 * line; nothing is inserted either way.
 */
static int check_run_at(oq_db *db, const char *run_at)
{
  static const char sql[] =
      "SELECT $1::timestamptz > '1970-01-01 00:00:00+00'::timestamptz "
      "AND $1::timestamptz < now() + interval '100 years'";
  bool ok =
      isdigit((unsigned char)run_at[0]) && isdigit((unsigned char)run_at[1]) &&
      isdigit((unsigned char)run_at[2]) && isdigit((unsigned char)run_at[3]);
  if (ok) {
    const char *p[1] = {run_at};
    oq_err e = oq_db_query(db, sql, 1, p, run_at_row, &ok);
    if (e != OQ_OK && e != OQ_ERR_INVALID)
      return cli_fail_db(db, e, "push", "nothing inserted");
    if (e != OQ_OK)
      ok = false;
  }
  if (!ok)
    return cli_fail(CLI_EXIT_USAGE, "push",
                    "--run-at %s is not a usable timestamp; write it like "
                    "2030-01-01T09:00:00Z (ISO 8601, from 1970 to 100 years "
                    "ahead); nothing inserted",
                    run_at);
  return CLI_EXIT_OK;
}

int cmd_push(const cli_globals *g, int argc, char **argv)
{
  push_opts o = {.queue = OQ_DEFAULT_QUEUE,
                 .max_attempts = OQ_DEFAULT_MAX_ATTEMPTS,
                 .batch = DEFAULT_BATCH,
                 .json = g->json,
                 .wait_timeout_ms = -1};
  const char *val = NULL, *delay_text = NULL;
  bool positional_only = false;
  static const char *const once[] = {"--queue",
                                     "--priority",
                                     "--delay",
                                     "--run-at",
                                     "--unique-key",
                                     "--max-attempts",
                                     "--unique-key-field",
                                     "--ordering-key",
                                     "--ordering-key-field",
                                     "--batch",
                                     "--timeout",
                                     NULL};
  int rc0 = cli_no_repeats("push", argc, argv, once);
  if (rc0 != CLI_EXIT_OK)
    return rc0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!positional_only && a[0] == '-' && a[1] != '\0') {
      if (strcmp(a, "--") == 0) {
        positional_only = true;
      } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
      } else if (strcmp(a, "--atomic") == 0) {
        o.atomic = true;
      } else if (strcmp(a, "--wait") == 0) {
        o.wait = true;
      } else if (cli_opt(argc, argv, &i, "--timeout", &val)) {
        int64_t ms = 0;
        if (!val || oq_duration_parse(val, &ms) != OQ_OK || ms <= 0)
          return cli_usage_error("push",
                                 "--timeout must be a duration above zero "
                                 "like 250ms, 5s, 2m or 1h (got %s)",
                                 val ? val : "nothing");
        o.wait_timeout_ms = (long)ms;
      } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
        o.quiet = true;
      } else if (cli_opt(argc, argv, &i, "--queue", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--queue needs a queue name");
        if (strlen(val) > MAX_NAME_BYTES)
          return cli_usage_error("push",
                                 "--queue is %zu bytes long; a queue name is "
                                 "at most %d bytes",
                                 strlen(val), MAX_NAME_BYTES);
        o.queue = val;
      } else if (cli_opt(argc, argv, &i, "--priority", &val)) {
        if (!cli_parse_int(val, INT32_MIN, INT32_MAX, &o.priority))
          return cli_usage_error("push",
                                 "--priority must be an integer from %d to %d "
                                 "(got %s)",
                                 INT32_MIN, INT32_MAX, val ? val : "nothing");
      } else if (cli_opt(argc, argv, &i, "--delay", &val)) {
        if (!val || oq_duration_parse(val, &o.delay_ms) != OQ_OK ||
            o.delay_ms < 0)
          return cli_usage_error("push",
                                 "--delay must be a duration like 250ms, 5s, "
                                 "2m or 1h (got %s)",
                                 val ? val : "nothing");
        delay_text = val;
      } else if (cli_opt(argc, argv, &i, "--run-at", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--run-at needs a timestamp");
        o.run_at = val;
      } else if (cli_opt(argc, argv, &i, "--unique-key", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--unique-key needs a key");
        if (strlen(val) > MAX_NAME_BYTES)
          return cli_usage_error("push",
                                 "--unique-key is %zu bytes long; a key is at "
                                 "most %d bytes (hash a longer one)",
                                 strlen(val), MAX_NAME_BYTES);
        o.unique_key = val;
      } else if (cli_opt(argc, argv, &i, "--ordering-key", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--ordering-key needs a key (an "
                                         "empty key is not one)");
        if (strlen(val) > MAX_NAME_BYTES)
          return cli_usage_error("push",
                                 "--ordering-key is %zu bytes long; a key is "
                                 "at most %d bytes (hash a longer one)",
                                 strlen(val), MAX_NAME_BYTES);
        o.ordering_key = val;
      } else if (cli_opt(argc, argv, &i, "--ordering-key-field", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--ordering-key-field needs a field");
        o.ordering_key_field = val;
      } else if (cli_opt(argc, argv, &i, "--max-attempts", &val)) {
        if (!cli_parse_int(val, 1, INT32_MAX, &o.max_attempts))
          return cli_usage_error("push",
                                 "--max-attempts must be a number >= 1");
      } else if (cli_opt(argc, argv, &i, "--unique-key-field", &val)) {
        if (!val || !*val)
          return cli_usage_error("push", "--unique-key-field needs a field");
        o.key_field = val;
      } else if (cli_opt(argc, argv, &i, "--batch", &val)) {
        if (!cli_parse_int(val, 1, MAX_BATCH, &o.batch))
          return cli_usage_error("push", "--batch must be from 1 to %d",
                                 MAX_BATCH);
        o.batch_set = true;
      } else {
        return cli_usage_error("push",
                               "unknown option %s (a payload that starts "
                               "with '-' goes after --)",
                               a);
      }
    } else if (o.payload) {
      return cli_usage_error("push",
                             "one PAYLOAD_JSON at a time (quote it: "
                             "'{\"k\": 1}'); for many, pipe JSON lines to "
                             "stdin");
    } else {
      o.payload = a;
    }
  }
  if (delay_text && o.run_at)
    return cli_usage_error("push", "give --delay or --run-at, not both");
  if ((o.wait || o.wait_timeout_ms >= 0) && !o.payload)
    return cli_usage_error("push",
                           "--wait and --timeout are for one PAYLOAD_JSON "
                           "(for many items: onceq wait ID...)");
  if (o.wait_timeout_ms >= 0 && !o.wait)
    return cli_usage_error("push", "--timeout needs --wait");
  if (o.ordering_key && o.ordering_key_field)
    return cli_usage_error("push", "give --ordering-key or "
                                   "--ordering-key-field, not both");
  if (o.payload) {
    if (o.atomic || o.key_field || o.ordering_key_field || o.batch_set)
      return cli_usage_error("push",
                             "--atomic, --unique-key-field, "
                             "--ordering-key-field and --batch are for bulk "
                             "pushes from stdin");
    char err[200];
    field_info fi;
    bool obj;
    if (!json_check(o.payload, strlen(o.payload), NULL, &fi, &obj, err,
                    sizeof err))
      return cli_fail(CLI_EXIT_USAGE, "push",
                      "PAYLOAD_JSON is not valid JSON (%s); quote it for the "
                      "shell, e.g. '{\"order\": 42}'; nothing inserted",
                      err + strlen("invalid JSON: "));
  } else if (o.unique_key) {
    return cli_usage_error("push",
                           "--unique-key would give every line the same key; "
                           "use --unique-key-field F for bulk pushes");
  }

  int rc = CLI_EXIT_OK;
  push_state st = {.o = &o, .tty = isatty(STDERR_FILENO) != 0};
  st.eo = (oq_enqueue_opts){.queue = o.queue,
                            .priority = (int)o.priority,
                            .delay_ms = o.delay_ms,
                            .run_at = o.run_at,
                            .max_attempts = (int)o.max_attempts,
                            .ordering_key = o.ordering_key,
                            .ordering_key_field = o.ordering_key_field};
  cm_json_init(&st.j, stdout);
  st.db = cli_connect(g, "push", &rc);
  if (!st.db)
    return rc;
  if (o.run_at) {
    rc = check_run_at(st.db, o.run_at);
    if (rc != CLI_EXIT_OK)
      goto out;
  }
  if (!o.payload) {
    /* bulk: a missing schema is found before stdin is read */
    oq_err e = qv_items_probe(st.db);
    if (e != OQ_OK) {
      rc = cli_fail_db(st.db, e, "push", "nothing read or inserted");
      goto out;
    }
  }
  if (o.payload) {
    rc = push_single(&st);
  } else {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: reads return EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = bulk(&st);
  }
out:
  free(st.ins_ord);
  free(st.ins_id);
  free(st.spans);
  oq_db_close(st.db);
  return rc;
}
