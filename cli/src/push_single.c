/* push_single.c: `onceq push PAYLOAD_JSON`: one item through oq_enqueue,
 * and with --wait its outcome (push.h). */
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

typedef struct single_ctx {
  oq_enqueue_opts eo;
  char id[OQ_UUID_LEN + 1];
  oq_enqueue_status status;
} single_ctx;

static oq_err single_tx(oq_db *db, void *ud)
{
  single_ctx *c = ud;
  return oq_enqueue(db, &c->eo, c->id, &c->status);
}

int push_single(push_state *st)
{
  const push_opts *o = st->o;
  single_ctx c = {.eo = st->eo};
  c.eo.payload = o->payload;
  c.eo.unique_key = o->unique_key;
  c.eo.keep_result = o->wait;
  oq_err e = oq_db_transact(st->db, single_tx, &c);
  if (e != OQ_OK)
    return cli_fail_db(st->db, e, "push", "nothing inserted");
  bool existed = c.status == OQ_ENQUEUE_DUPLICATE;
  if (o->wait) { /* the result instead of the id (--json: both) */
    if (existed) /* cm_say: the key is outside text, escaped */
      cm_say("onceq", "push", NULL,
             "exists: unique key \"%s\" is held by live item %s; waiting "
             "for it",
             o->unique_key, c.id);
    cli_globals wg = {.json = o->json};
    const char *ids[1] = {c.id};
    return cli_wait_ids(st->db, &wg, "push", ids, 1, o->wait_timeout_ms);
  }
  if (o->json) {
    cm_json_obj(&st->j, NULL);
    cm_json_str(&st->j, "id", c.id);
    cm_json_bool(&st->j, "existed", existed);
    cm_json_end(&st->j);
  } else {
    printf("%s\n", c.id);
  }
  fflush(stdout); /* the id first, then the note, on a terminal too */
  if (existed)    /* cm_say: the key is outside text, escaped */
    cm_say("onceq", "push", NULL,
           "exists: unique key \"%s\" is held by live item %s; nothing "
           "inserted",
           o->unique_key, c.id);
  return CLI_EXIT_OK;
}
