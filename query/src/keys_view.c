/*
 * keys_view.c: the ordering keys view (keys_view.h).
 *
 * A key's head is its item with the lowest enqueue_seq: the claim takes
 * no other item of the key while the head is in onceq_items (lib/src/
 * dialect.c, KEY_HEAD). Head states: running = claimed; ready = unclaimed
 * and due; retrying = it failed and waits for run_at; exhausted = no
 * attempt left, dead-lettered by the next reap. A key is blocked when its
 * head has failed (last_error set) and no item of the key is running (a
 * lower enqueue_seq can commit after a higher one was claimed: then the
 * key runs, whatever its head): everything behind the head waits until it
 * succeeds or is dead-lettered (strict order).
 *
 * One pass over the keyed rows (the unclaimed ones from
 * onceq_items_key_order, which holds only those on PostgreSQL since schema
 * v12, and the claimed ones from onceq_items_claim): DISTINCT ON keeps
 * each key's head, and the waiting count is a window over the same rows,
 * so no statement probes a key by (queue, ordering_key), which is not a
 * prefix of that index on PostgreSQL (schema v11: queue, part,
 * ordering_key, enqueue_seq) and is on CockroachDB.
 *
 * --blocked reads only the failed items instead (onceq_items_key_failed,
 * as the blocked-key count does: key_head.h): the failed heads, each
 * with one count of its key's items by the key index, so the keys an
 * operator looks for when work is stuck come back in time proportional
 * to the failed items, not to the keyed backlog.
 */
#include <math.h>
#include <string.h>

#include "fmt.h"
#include "key_head.h"
#include "keys_view.h"
#include "rows.h"

static const char keys_sql[] =
    "SELECT h.queue, h.ordering_key, h.id::text, h.attempts, h.max_attempts,"
    " CASE WHEN h.claim IS NOT NULL THEN 'running'"
    " WHEN h.attempts >= h.max_attempts THEN 'exhausted'"
    " WHEN h.run_at > now() THEN 'retrying' ELSE 'ready' END,"
    " extract(epoch from h.run_at - now())::float8,"
    " h.n - 1, h.last_error, h.enqueue_seq, h.running"
    " FROM (SELECT DISTINCT ON (queue, ordering_key) id, queue, ordering_key,"
    " attempts, max_attempts, claim, run_at, last_error, enqueue_seq,"
    " count(*) OVER (PARTITION BY queue, ordering_key) AS n,"
    " count(claim) OVER (PARTITION BY queue, ordering_key) AS running"
    " FROM (SELECT * FROM onceq_items WHERE ordering_key IS NOT NULL"
    " AND claim IS NULL AND ($1::text IS NULL OR queue = $1::text)"
    " UNION ALL SELECT * FROM onceq_items WHERE ordering_key IS NOT NULL"
    " AND claim IS NOT NULL AND ($1::text IS NULL OR queue = $1::text)) k"
    " ORDER BY queue, ordering_key, enqueue_seq) h"
    " WHERE NOT $2::bool OR (h.running = 0 AND h.last_error IS NOT NULL)"
    " ORDER BY h.queue, h.ordering_key LIMIT $3::int";

/* The same columns for the blocked keys only: a blocked head is never
 * running (claim IS NULL). */
#define KEYS_BLOCKED(head, same_key)                                           \
  "SELECT f.queue, f.ordering_key, f.id::text, f.attempts, f.max_attempts,"    \
  " CASE WHEN f.attempts >= f.max_attempts THEN 'exhausted'"                   \
  " WHEN f.run_at > now() THEN 'retrying' ELSE 'ready' END,"                   \
  " extract(epoch from f.run_at - now())::float8,"                             \
  " (SELECT count(*) FROM onceq_items e WHERE " same_key ") - 1,"              \
  " f.last_error, f.enqueue_seq, 0 FROM onceq_items f"                         \
  " WHERE " QV_FAILED_KEYED " AND ($1::text IS NULL OR f.queue = $1::text)"    \
  " AND $2::bool AND " head " ORDER BY f.queue, f.ordering_key LIMIT $3::int"
static const char keys_blocked_pg[] =
    KEYS_BLOCKED(QV_FAILED_HEAD_PG, "e.queue = f.queue AND e.part = f.part"
                                    " AND e.ordering_key = f.ordering_key"
                                    " AND e.ordering_key IS NOT NULL"
                                    " AND e.claim IS NULL");
static const char keys_blocked_crdb[] =
    KEYS_BLOCKED(QV_FAILED_HEAD_CRDB, "e.queue = f.queue"
                                      " AND e.ordering_key = f.ordering_key");

const char *qv_keys_blocked_sql(oq_engine engine)
{
  return engine == OQ_ENGINE_COCKROACH ? keys_blocked_crdb : keys_blocked_pg;
}

enum {
  K_QUEUE,
  K_KEY,
  K_HEAD,
  K_ATTEMPTS,
  K_MAXA,
  K_STATE,
  K_RUN_IN,
  K_WAITING,
  K_ERROR,
  K_SEQ,
  K_RUNNING, /* the key's claimed items */
  K_NCOLS
};

static const cm_listing_col key_cols[] = {
    {"QUEUE", 0},
    {"KEY", 0},
    {"HEAD", 0},
    {"STATE", 0},
    {"TRY", CM_COL_RIGHT},
    {"WAITING", CM_COL_RIGHT},
    {"LAST ERROR", CM_COL_FLEX},
    {NULL, 0},
};

typedef struct keys_ctx {
  cm_listing *out;
  qv_keys_sum *sum;
  long limit; /* the row after it only says there are more */
} keys_ctx;

static oq_err key_row(void *ud, int ncols, const char *const *v)
{
  keys_ctx *c = ud;
  if (ncols < K_NCOLS)
    return OQ_ERR_SQL;
  if (++c->sum->n > c->limit)
    return OQ_OK;
  bool failed = v[K_ERROR] && v[K_RUNNING] && strcmp(v[K_RUNNING], "0") == 0;
  if (failed)
    c->sum->blocked++;
  if (c->out->json) {
    cm_json *j = &c->out->j;
    cm_json_obj(j, NULL);
    cm_json_str(j, "queue", v[K_QUEUE]);
    cm_json_str(j, "ordering_key", v[K_KEY]);
    cm_json_str(j, "head", v[K_HEAD]);
    cm_json_raw(j, "head_enqueue_seq", v[K_SEQ]);
    cm_json_str(j, "state", v[K_STATE]);
    cm_json_bool(j, "blocked", failed);
    cm_json_raw(j, "attempts", v[K_ATTEMPTS]);
    cm_json_raw(j, "max_attempts", v[K_MAXA]);
    cm_json_num(j, "run_in_s", cm_atof(v[K_RUN_IN], NAN));
    cm_json_raw(j, "waiting", v[K_WAITING]);
    cm_json_str(j, "last_error", v[K_ERROR]);
    cm_json_end(j);
    return OQ_OK;
  }
  char id8[9];
  snprintf(id8, sizeof id8, "%.8s", v[K_HEAD] ? v[K_HEAD] : "");
  cm_table_cell(c->out->t, v[K_QUEUE]);
  cm_table_cell(c->out->t, v[K_KEY]);
  cm_table_cell(c->out->t, id8);
  cm_table_cell(c->out->t, v[K_STATE]);
  cm_table_cellf(c->out->t, "%s/%s", v[K_ATTEMPTS], v[K_MAXA]);
  cm_table_cell(c->out->t, v[K_WAITING]);
  cm_table_cell(c->out->t, v[K_ERROR] ? v[K_ERROR] : "-");
  return OQ_OK;
}

int qv_keys_open(cm_listing *l, bool json)
{
  return cm_listing_open(l, json, "keys", key_cols, "keys");
}

oq_err qv_keys_read(oq_db *db, const char *queue, bool blocked_only, long limit,
                    cm_listing *l, qv_keys_sum *sum)
{
  char lim[24];
  snprintf(lim, sizeof lim, "%ld", limit + 1);
  const char *p[3] = {queue, blocked_only ? "true" : "false", lim};
  keys_ctx c = {l, sum, limit};
  memset(sum, 0, sizeof *sum);
  return oq_db_query(
      db, blocked_only ? qv_keys_blocked_sql(oq_db_engine(db)) : keys_sql, 3, p,
      key_row, &c);
}
