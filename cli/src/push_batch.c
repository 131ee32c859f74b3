/* push_batch.c: checking lines, batching them and sending a batch in its
 * own transaction through oq_enqueue_many (push.h). */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonline.h"
#include "push.h"

typedef struct push_tx {
  push_state *st;
  push_batch *b; /* the batches to send in this transaction */
  size_t nb;
  double t_last;
} push_tx;

void push_batch_reset(push_batch *b, long first_line)
{
  b->len = 0;
  b->n = 0;
  b->nitems = 0;
  b->first_line = first_line;
  b->last_line = first_line - 1;
  b->bytes = 0;
  b->bad_line = 0;
  b->bad_reason[0] = '\0';
  b->nbad = 0;
}

void push_batch_free(push_batch *b)
{
  free(b->text);
  free(b->off);
  free(b->ilen);
  free(b->line);
  memset(b, 0, sizeof *b);
}

static bool grow_text(push_batch *b, size_t more)
{
  if (b->len + more <= b->cap)
    return true;
  size_t nc = b->cap ? b->cap : 1u << 16;
  while (nc < b->len + more)
    nc *= 2;
  char *t = realloc(b->text, nc);
  if (!t)
    return false;
  b->text = t;
  b->cap = nc;
  return true;
}

/* Append one good item. */
static bool batch_add(push_batch *b, const char *s, size_t n, long line)
{
  if (b->n == b->icap) {
    size_t nc = b->icap ? b->icap * 2 : 1024;
    size_t *o = realloc(b->off, nc * sizeof *o);
    if (o)
      b->off = o;
    size_t *l = realloc(b->ilen, nc * sizeof *l);
    if (l)
      b->ilen = l;
    long *ln = realloc(b->line, nc * sizeof *ln);
    if (ln)
      b->line = ln;
    if (!o || !l || !ln)
      return false;
    b->icap = nc;
  }
  if (!grow_text(b, n + 3))
    return false;
  b->text[b->len++] = b->n == 0 ? '[' : ',';
  b->off[b->n] = b->len;
  b->ilen[b->n] = n;
  b->line[b->n] = line;
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->n++;
  return true;
}

/* Close the array: "]" and a NUL (the text is a statement parameter). */
static void batch_close(push_batch *b)
{
  if (b->n == 0)
    return;
  b->text[b->len] = ']';
  b->text[b->len + 1] = '\0';
}

static oq_err on_inserted(void *ud, int ncols, const char *const *v)
{
  push_state *st = ud;
  if (ncols < 2 || !v[0] || !v[1])
    return OQ_ERR_SQL;
  if (st->nins == st->cap_ins) {
    size_t nc = st->cap_ins ? st->cap_ins * 2 : 1024;
    long *o = realloc(st->ins_ord, nc * sizeof *o);
    if (o)
      st->ins_ord = o;
    char(*ids)[37] = realloc(st->ins_id, nc * sizeof *ids);
    if (ids)
      st->ins_id = ids;
    if (!o || !ids)
      return OQ_ERR_NOMEM;
    st->cap_ins = nc;
  }
  st->ins_ord[st->nins] = strtol(v[0], NULL, 10);
  snprintf(st->ins_id[st->nins], 37, "%s", v[1]);
  st->nins++;
  return OQ_OK;
}

/* The statement for one batch; its rows append to st->ins_*. */
static oq_err send_batch(push_state *st, const push_batch *b)
{
  return oq_enqueue_many(st->db, &st->eo, b->text, st->o->key_field,
                         on_inserted, st);
}

/* Transaction body: every batch in ctx (one, or all with --atomic). May
 * run again on a restart, so it starts from nothing each time. */
static oq_err insert_tx(oq_db *db, void *ud)
{
  push_tx *c = ud;
  (void)db;
  c->st->nins = 0;
  if (c->nb > 1)
    c->st->done_bytes = 0; /* --atomic: counts what this run sent */
  long base = 0;           /* items in the batches before this one */
  for (size_t k = 0; k < c->nb; k++) {
    size_t before = c->st->nins;
    oq_err e = send_batch(c->st, &c->b[k]);
    if (e != OQ_OK)
      return e;
    /* RETURNING ords count from 1 in each batch: make them run on across
     * the batches of this transaction. */
    for (size_t r = before; r < c->st->nins; r++)
      c->st->ins_ord[r] += base;
    base += (long)c->b[k].n;
    if (c->nb > 1) { /* --atomic: progress while sending */
      c->st->done_lines = c->b[k].last_line;
      c->st->done_bytes += c->b[k].bytes;
      push_progress(c->st, "sent", false);
    }
  }
  return OQ_OK;
}

/* A bad line: say it now, remember it on its batch. */
static void bad_line(push_state *st, push_batch *b, long line,
                     const char *reason, const char *detail)
{
  if (b->nbad == 0) {
    b->bad_line = line;
    snprintf(b->bad_reason, sizeof b->bad_reason, "%s", reason);
  }
  b->nbad++;
  push_say(st, "line %ld: %s", line, detail);
}

bool push_take_line(push_state *st, push_batch *b, char *s, size_t n, long line)
{
  while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  size_t lead = 0;
  while (lead < n && (s[lead] == ' ' || s[lead] == '\t'))
    lead++;
  if (lead == n)
    return true; /* blank */
  st->items++;
  if (b->nitems++ == 0)
    b->started_s = push_now_s();
  char err[200];
  field_info fi;
  bool obj;
  if (!json_check(s + lead, n - lead, st->o->key_field, &fi, &obj, err,
                  sizeof err)) {
    if (strcmp(err, "out of memory") == 0)
      return false;
    bad_line(st, b, line, "invalid JSON", err);
    return true;
  }
  field_state fs = fi.state;
  if (st->o->key_field && fs == FIELD_OK && fi.bytes > MAX_NAME_BYTES) {
    /* the unique index refuses a long key only at insert time, with a raw
     * btree error and no line (the limit: see MAX_NAME_BYTES) */
    char detail[300];
    snprintf(detail, sizeof detail,
             "field \"%s\" is %zu bytes long; a unique key is at most %d "
             "bytes (--unique-key-field)",
             st->o->key_field, fi.bytes, MAX_NAME_BYTES);
    bad_line(st, b, line, "unique key too long", detail);
    return true;
  }
  if (st->o->key_field && fs != FIELD_OK) {
    char detail[300];
    if (!obj)
      snprintf(detail, sizeof detail,
               "not a JSON object, so it has no field \"%s\" "
               "(--unique-key-field)",
               st->o->key_field);
    else if (fs == FIELD_NONE)
      snprintf(detail, sizeof detail,
               "no field \"%s\" (--unique-key-field needs it on every line)",
               st->o->key_field);
    else
      snprintf(detail, sizeof detail,
               "field \"%s\" is not a string or a number "
               "(--unique-key-field)",
               st->o->key_field);
    bad_line(st, b, line, "no usable unique key field", detail);
    return true;
  }
  const char *of = st->o->ordering_key_field;
  if (of) {
    /* a second look for the other field: only pushes that ask pay it */
    (void)json_check(s + lead, n - lead, of, &fi, &obj, err, sizeof err);
    const char *why = NULL;
    char detail[300];
    if (!obj)
      why = "not a JSON object, so it has no field";
    else if (fi.state == FIELD_NONE)
      why = "no field";
    else if (fi.state == FIELD_BAD)
      why = "not a string or a number:";
    else if (fi.bytes == 0)
      why = "an empty ordering key in field";
    if (why) {
      snprintf(detail, sizeof detail,
               "%s \"%s\" (--ordering-key-field needs a string or a number "
               "on every line)",
               why, of);
      bad_line(st, b, line, "no usable ordering key field", detail);
      return true;
    }
    if (fi.bytes > MAX_NAME_BYTES) {
      snprintf(detail, sizeof detail,
               "field \"%s\" is %zu bytes long; an ordering key is at most "
               "%d bytes (--ordering-key-field)",
               of, fi.bytes, MAX_NAME_BYTES);
      bad_line(st, b, line, "ordering key too long", detail);
      return true;
    }
  }
  if (b->nbad > 0)
    return true; /* the batch is rejected anyway: keep no text */
  return batch_add(b, s + lead, n - lead, line);
}

static void rejected_why(const push_batch *b, char *why, size_t len)
{
  if (b->nbad <= 1)
    snprintf(why, len, "line %ld: %s", b->bad_line, b->bad_reason);
  else
    snprintf(why, len, "line %ld: %s, and %ld more bad line%s", b->bad_line,
             b->bad_reason, b->nbad - 1, b->nbad == 2 ? "" : "s");
}

bool push_flush_batch(push_state *st, push_batch *b)
{
  char why[200];
  bool go_on = true;
  if (b->nbad > 0) {
    rejected_why(b, why, sizeof why);
    push_span_add(st, b->first_line, b->last_line, SPAN_REJECTED, why);
    st->rejected_items += (long)b->n + b->nbad;
    goto done;
  }
  if (b->n == 0)
    goto done; /* only blank lines */
  batch_close(b);
  push_tx c = {.st = st, .b = b, .nb = 1};
  oq_err e = oq_db_transact(st->db, insert_tx, &c);
  if (e == OQ_OK) {
    push_span_add(st, b->first_line, b->last_line, SPAN_INSERTED, NULL);
    st->inserted += (long)st->nins;
    st->existed += (long)b->n - (long)st->nins;
    push_print_ids(st, b, 1);
  } else if (e == OQ_ERR_AMBIGUOUS) {
    snprintf(why, sizeof why,
             "unknown whether inserted: %s; a re-run with "
             "--unique-key-field skips what went in",
             oq_db_errmsg(st->db));
    push_span_add(st, b->first_line, b->last_line, SPAN_UNKNOWN, why);
    go_on = false;
  } else if (push_data_error(e, oq_db_sqlstate(st->db))) {
    char msg[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", oq_db_errmsg(st->db));
    long bad = push_bisect(st, b, why, sizeof why);
    if (bad > 0) {
      b->bad_line = bad;
      b->nbad = 1;
      snprintf(b->bad_reason, sizeof b->bad_reason, "rejected by the server");
      push_say(st, "line %ld: rejected by the server: %s", bad, why);
    } else {
      b->bad_line = b->first_line;
      b->nbad = 1;
      snprintf(b->bad_reason, sizeof b->bad_reason, "batch rejected");
      push_say(st, "lines %ld-%ld: rejected by the server: %s", b->first_line,
               b->last_line, msg);
    }
    rejected_why(b, why, sizeof why);
    push_span_add(st, b->first_line, b->last_line, SPAN_REJECTED, why);
    st->rejected_items += (long)b->n;
    go_on = oq_db_connected(st->db);
  } else {
    snprintf(why, sizeof why, "%s", oq_db_errmsg(st->db));
    push_span_add(st, b->first_line, b->last_line, SPAN_NOT_INSERTED, why);
    go_on = false;
  }
done:
  st->done_lines = b->last_line;
  st->done_bytes += b->bytes;
  push_progress(st, "pushed", false);
  return go_on;
}

int push_send_all(push_state *st, push_batch *all, size_t nall)
{
  int rc = CLI_EXIT_OK;
  for (size_t k = 0; k < nall; k++)
    batch_close(&all[k]);
  st->done_lines = 0;
  st->done_bytes = 0;
  push_tx c = {.st = st, .b = all, .nb = nall};
  oq_err e = oq_db_transact(st->db, insert_tx, &c);
  if (e == OQ_OK) {
    push_span_add(st, 1, st->lines, SPAN_INSERTED, NULL);
    long items = 0;
    for (size_t k = 0; k < nall; k++)
      items += (long)all[k].n;
    st->inserted = (long)st->nins;
    st->existed = items - (long)st->nins;
    push_print_ids(st, all, nall);
  } else if (e == OQ_ERR_AMBIGUOUS) {
    char why[OQ_ERRBUF_SIZE + 64];
    snprintf(why, sizeof why, "unknown whether inserted: %s",
             oq_db_errmsg(st->db));
    push_span_add(st, 1, st->lines, SPAN_UNKNOWN, why);
    rc = CLI_EXIT_RUNTIME;
  } else if (push_data_error(e, oq_db_sqlstate(st->db))) {
    char msg[OQ_ERRBUF_SIZE], why[OQ_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", oq_db_errmsg(st->db));
    long bad = 0;
    for (size_t k = 0; k < nall && !bad; k++)
      bad = push_bisect(st, &all[k], why, sizeof why);
    char span_why[OQ_ERRBUF_SIZE + 80];
    if (bad > 0) {
      push_say(st, "line %ld: rejected by the server: %s", bad, why);
      snprintf(span_why, sizeof span_why,
               "line %ld: rejected by the server; --atomic inserts nothing",
               bad);
    } else {
      snprintf(span_why, sizeof span_why, "rejected by the server: %s", msg);
    }
    push_span_add(st, 1, st->lines, SPAN_REJECTED, span_why);
    rc = CLI_EXIT_USAGE;
  } else {
    char why[OQ_ERRBUF_SIZE + 32];
    snprintf(why, sizeof why, "%s; --atomic", oq_db_errmsg(st->db));
    push_span_add(st, 1, st->lines, SPAN_NOT_INSERTED, why);
    rc = cli_exit_for(e) == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
  }
  return rc;
}
