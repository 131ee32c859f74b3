/* push_bisect.c: finding the line the server refused in a batch, by
 * bisection with rolled-back probes (push.h). */
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

bool push_data_error(oq_err e, const char *sqlstate)
{
  return e == OQ_ERR_INVALID || (sqlstate && (strncmp(sqlstate, "22", 2) == 0 ||
                                              strncmp(sqlstate, "23", 2) == 0 ||
                                              strncmp(sqlstate, "54", 2) == 0));
}

/* The server's refusal of one line in words that name the fix: the
 * payload size limit (schema v4) and the two program limits a line can hit
 * get our own sentence, the rest the server's message. */
static void server_why(oq_db *db, char *why, size_t whylen)
{
  const char *m = oq_db_errmsg(db);
  if (oq_enqueue_too_large(db))
    snprintf(why, whylen,
             "payload is larger than the 1 MiB limit (%d bytes of JSON "
             "text, constraint onceq_items_payload_size): store the data "
             "elsewhere and enqueue a reference to it",
             OQ_MAX_PAYLOAD_BYTES);
  else if (oq_db_sqlstate_is(db, OQ_SQLSTATE_STATEMENT_TOO_COMPLEX))
    snprintf(why, whylen,
             "JSON nested too deep for the server (stack depth limit "
             "exceeded, SQLSTATE 54001)");
  else if (oq_db_sqlstate_is(db, OQ_SQLSTATE_PROGRAM_LIMIT_EXCEEDED) &&
           strstr(m, "index row size"))
    snprintf(why, whylen,
             "the unique key is too long for the index (at most %d bytes; "
             "SQLSTATE 54000)",
             MAX_NAME_BYTES);
  else
    snprintf(why, whylen, "%s", m);
}

/* A probe: the batch's own insert, rolled back whatever happens. */
typedef struct probe_ctx {
  push_state *st;
  const char *text;
} probe_ctx;

static oq_err probe_tx(oq_db *db, void *ud)
{
  probe_ctx *p = ud;
  oq_err e =
      oq_enqueue_many(db, &p->st->eo, p->text, p->st->o->key_field, NULL, NULL);
  return e == OQ_OK ? OQ_ERR_CALLBACK : e; /* never commit a probe */
}

/*
 * Does the server accept items [lo, hi) of b? Runs the real insert and
 * rolls it back, so whatever the insert refuses (a jsonb cast, the unique
 * index's row size, a nesting too deep for the server) is found on its
 * own line, not only what a jsonb cast refuses. An error that is not about
 * the data (a lost connection) counts as accepted: the caller then reports
 * the batch as a whole.
 */
static bool server_accepts(push_state *st, const push_batch *b, size_t lo,
                           size_t hi, char *why, size_t whylen)
{
  size_t need = 2;
  for (size_t k = lo; k < hi; k++)
    need += b->ilen[k] + 1;
  char *t = malloc(need + 1);
  if (!t)
    return true; /* cannot tell: let the caller report the batch */
  size_t n = 0;
  t[n++] = '[';
  for (size_t k = lo; k < hi; k++) {
    if (k > lo)
      t[n++] = ',';
    memcpy(t + n, b->text + b->off[k], b->ilen[k]);
    n += b->ilen[k];
  }
  t[n++] = ']';
  t[n] = '\0';
  probe_ctx pc = {.st = st, .text = t};
  oq_err e = oq_db_transact(st->db, probe_tx, &pc);
  free(t);
  if (e == OQ_ERR_CALLBACK)
    return true;
  if (!push_data_error(e, oq_db_sqlstate(st->db)))
    return true;
  server_why(st->db, why, whylen);
  return false;
}

long push_bisect(push_state *st, const push_batch *b, char *why, size_t whylen)
{
  size_t lo = 0, hi = b->n;
  if (server_accepts(st, b, lo, hi, why, whylen))
    return 0;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (!server_accepts(st, b, lo, mid, why, whylen))
      hi = mid;
    else
      lo = mid;
  }
  server_accepts(st, b, lo, lo + 1, why, whylen); /* its own message */
  return b->line[lo];
}
