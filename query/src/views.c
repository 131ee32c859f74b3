/*
 * views.c: the read views of views.h: sessions, items by state and the
 * partition report, each one statement and one row printer; then the
 * statements of one item, the schedules, the latest dead letters and the
 * expired sessions, which their one caller prints.
 *
 * Sessions. Terms: age = now() - created_at; heartbeat = now() -
 * heartbeated_at; expired = heartbeat older than the session's own expiry
 * (the next reap, by any reaper or `onceq reap`, deletes it and releases
 * its claims). All times come from the database's clock.
 *
 * Items. States (computed, not stored): running = claim IS NOT NULL;
 * ready = unclaimed and run_at <= now(); scheduled = unclaimed and run_at
 * > now(); dead = a row of onceq_dead. One statement (UNION ALL of one
 * LIMIT-ed branch per state), so a list is one snapshot and each branch
 * reads at most limit + 1 rows.
 *
 * The rows stream from oq_db_query into the listing, with no restart
 * retry: a re-run would add its rows a second time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "fmt.h"
#include "views.h"

/* ---- sessions ---------------------------------------------------------- */

static const char sessions_sql[] =
    "SELECT s.id::text, s.hostname, s.pid,"
    " extract(epoch from now() - s.created_at)::float8,"
    " extract(epoch from now() - s.heartbeated_at)::float8,"
    " extract(epoch from s.expiry)::float8,"
    " s.heartbeated_at + s.expiry < now(),"
    " (SELECT count(*) FROM onceq_items i WHERE i.claim = s.id),"
    " s.queues, s.version,"
    " extract(epoch from s.created_at)::float8,"
    " extract(epoch from s.heartbeated_at)::float8"
    " FROM onceq_sessions s ORDER BY s.created_at, s.id";

enum {
  S_ID,
  S_HOST,
  S_PID,
  S_AGE,
  S_BEAT_AGO,
  S_EXPIRY,
  S_EXPIRED,
  S_CLAIMS,
  S_QUEUES,
  S_VERSION,
  S_CREATED,
  S_BEAT,
  S_NCOLS
};

static const cm_listing_col session_cols[] = {
    {"SESSION", 0},
    {"HOST", CM_COL_FLEX},
    {"PID", CM_COL_RIGHT},
    {"AGE", CM_COL_RIGHT},
    {"HEARTBEAT", CM_COL_RIGHT},
    {"EXPIRY", CM_COL_RIGHT},
    {"STATE", 0},
    {"CLAIMS", CM_COL_RIGHT},
    {NULL, 0},
};

typedef struct sessions_ctx {
  cm_listing *out; /* --json: inside the "sessions" array */
  qv_sessions_sum *sum;
} sessions_ctx;

static oq_err session_row(void *ud, int ncols, const char *const *v)
{
  sessions_ctx *c = ud;
  if (ncols < S_NCOLS)
    return OQ_ERR_SQL;
  c->sum->n++;
  c->sum->claims += cm_atol(v[S_CLAIMS], 0);
  bool expired = v[S_EXPIRED] && v[S_EXPIRED][0] == 't';
  if (c->out->json) {
    cm_json *j = &c->out->j;
    cm_json_obj(j, NULL);
    cm_json_str(j, "id", v[S_ID]);
    cm_json_str(j, "host", v[S_HOST]);
    cm_json_raw(j, "pid", v[S_PID]);
    cm_json_time(j, "created_at", cm_atof(v[S_CREATED], NAN));
    cm_json_time(j, "heartbeated_at", cm_atof(v[S_BEAT], NAN));
    cm_json_num(j, "age_s", cm_atof(v[S_AGE], NAN));
    cm_json_num(j, "heartbeat_age_s", cm_atof(v[S_BEAT_AGO], NAN));
    cm_json_num(j, "expiry_s", cm_atof(v[S_EXPIRY], NAN));
    cm_json_bool(j, "expired", expired);
    cm_json_raw(j, "claims", v[S_CLAIMS]);
    cm_json_str(j, "queues", v[S_QUEUES]);
    cm_json_str(j, "version", v[S_VERSION]);
    cm_json_end(j);
    return OQ_OK;
  }
  char age[16], beat[24], exp[16], id8[9];
  snprintf(id8, sizeof id8, "%.8s", v[S_ID] ? v[S_ID] : "");
  cm_table_cell(c->out->t, id8);
  cm_table_cell(c->out->t, v[S_HOST] && *v[S_HOST] ? v[S_HOST] : "-");
  cm_table_cell(c->out->t, v[S_PID]);
  cm_table_cell(c->out->t, cm_fmt_dur(age, sizeof age, cm_atof(v[S_AGE], NAN)));
  cm_table_cell(c->out->t,
                cm_fmt_ago(beat, sizeof beat, cm_atof(v[S_BEAT_AGO], NAN)));
  cm_table_cell(c->out->t,
                cm_fmt_dur(exp, sizeof exp, cm_atof(v[S_EXPIRY], NAN)));
  cm_table_cell(c->out->t, expired ? "expired" : "live");
  cm_table_cell(c->out->t, v[S_CLAIMS]);
  return OQ_OK;
}

int qv_sessions_open(cm_listing *l, bool json)
{
  return cm_listing_open(l, json, "sessions", session_cols, "sessions");
}

oq_err qv_sessions_read(oq_db *db, cm_listing *l, qv_sessions_sum *sum)
{
  sessions_ctx c = {l, sum};
  memset(sum, 0, sizeof *sum);
  return oq_db_query(db, sessions_sql, 0, NULL, session_row, &c);
}

/* Print the JSON listing l to f unless e failed, and free it: the status
 * page's documents. */
static oq_err print_doc(FILE *f, cm_listing *l, oq_err e, const char *cmd)
{
  if (e == OQ_OK && cm_listing_print(l, f, cmd) != CM_EXIT_OK)
    e = OQ_ERR_NOMEM;
  cm_listing_free(l);
  return e;
}

oq_err qv_view_sessions(FILE *f, oq_db *db)
{
  cm_listing l;
  qv_sessions_sum sum;
  oq_err e = OQ_ERR_NOMEM;
  if (qv_sessions_open(&l, true) == CM_EXIT_OK) {
    e = qv_sessions_read(db, &l, &sum);
    cm_listing_end_rows(&l);
  }
  return print_doc(f, &l, e, "sessions");
}

/* ---- items ------------------------------------------------------------- */

/* Columns of every branch, in order. The sort keys (k, a, b) put each
 * state's rows in its own order; now_s is the database's clock. */
#define LIVE_COLS                                                              \
  "id::text, queue, priority, attempts, max_attempts,"                         \
  " extract(epoch from run_at)::float8,"                                       \
  " extract(epoch from claimed_at)::float8,"                                   \
  " NULL::float8, extract(epoch from created_at)::float8,"                     \
  " extract(epoch from now())::float8, claim::text, unique_key, "              \
  "last_error, " QV_PAYLOAD_READ
#define DEAD_COLS                                                              \
  "id::text, queue, priority, attempts, max_attempts, NULL::float8,"           \
  " NULL::float8, extract(epoch from died_at)::float8,"                        \
  " extract(epoch from created_at)::float8,"                                   \
  " extract(epoch from now())::float8, NULL::text, unique_key, "               \
  "last_error, " QV_PAYLOAD_READ
#define QFILTER " AND ($1::text IS NULL OR queue = $1::text)"

static const char *const branch_sql[] = {
    /* running */
    "(SELECT 1 AS k, extract(epoch from claimed_at)::float8 AS a,"
    " 0::float8 AS b, 'running' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NOT NULL" QFILTER
    " ORDER BY claimed_at LIMIT $2::int)",
    /* ready */
    "(SELECT 2 AS k, -priority::float8 AS a,"
    " extract(epoch from run_at)::float8 AS b, 'ready' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NULL AND run_at <= now()" QFILTER
    " ORDER BY priority DESC, run_at LIMIT $2::int)",
    /* scheduled */
    "(SELECT 3 AS k, extract(epoch from run_at)::float8 AS a,"
    " 0::float8 AS b, 'scheduled' AS state, " LIVE_COLS
    " FROM onceq_items WHERE claim IS NULL AND run_at > now()" QFILTER
    " ORDER BY run_at LIMIT $2::int)",
    /* dead */
    "(SELECT 4 AS k, -extract(epoch from died_at)::float8 AS a,"
    " 0::float8 AS b, 'dead' AS state, " DEAD_COLS
    " FROM onceq_dead WHERE true" QFILTER
    " ORDER BY died_at DESC LIMIT $2::int)",
};

/* Column indexes in a result row. */
enum {
  C_K,
  C_A,
  C_B,
  C_STATE,
  C_ID,
  C_QUEUE,
  C_PRIO,
  C_ATT,
  C_MAXATT,
  C_RUN_AT,
  C_CLAIMED_AT,
  C_DIED_AT,
  C_CREATED_AT,
  C_NOW,
  C_CLAIM,
  C_UKEY,
  C_ERR,
  C_PAYLOAD,
  C_NCOLS
};

/* The table's columns; with --state dead the last one is the error. */
static const cm_listing_col item_cols[] = {
    {"ID", 0},
    {"QUEUE", CM_COL_FLEX},
    {"STATE", 0},
    {"ATT", CM_COL_RIGHT},
    {"PAYLOAD", CM_COL_FLEX},
    {NULL, 0},
};
static const cm_listing_col dead_cols[] = {
    {"ID", 0},   {"QUEUE", CM_COL_FLEX},      {"ATT", CM_COL_RIGHT},
    {"DIED", 0}, {"LAST ERROR", CM_COL_FLEX}, {NULL, 0},
};

const char *const qv_item_states[QV_ITEMS_NSTATES] = {"running", "ready",
                                                      "scheduled", "dead"};

typedef struct items_ctx {
  long limit;
  long n;          /* rows seen (up to limit + 1) */
  bool dead_only;  /* QV_ITEMS_DEAD: the last column is the error */
  cm_listing *out; /* json: inside the "items" array */
} items_ctx;

/* "payload": the JSON as it is, or past QV_PAYLOAD_SHOWN characters its
 * first ones as a string; "payload_truncated" says which (issue 20: a
 * listing of 50 payloads of 1 MiB each would be 50 MiB). */
static oq_err payload_json(cm_json *j, const char *text)
{
  bool cut = false;
  size_t n = qv_payload_shown(text, &cut);
  if (!cut) {
    cm_json_raw(j, "payload", text);
  } else {
    char *head = strndup(text, n);
    if (!head)
      return OQ_ERR_NOMEM;
    cm_json_str(j, "payload", head);
    free(head);
  }
  cm_json_bool(j, "payload_truncated", cut);
  return OQ_OK;
}

static oq_err item_row(void *ud, int ncols, const char *const *v)
{
  items_ctx *c = ud;
  if (ncols < C_NCOLS)
    return OQ_ERR_SQL;
  if (++c->n > c->limit)
    return OQ_OK; /* the extra row only says "more" */
  if (c->out->json) {
    cm_json *j = &c->out->j;
    cm_json_obj(j, NULL);
    cm_json_str(j, "id", v[C_ID]);
    cm_json_str(j, "queue", v[C_QUEUE]);
    cm_json_str(j, "state", v[C_STATE]);
    cm_json_raw(j, "priority", v[C_PRIO]);
    cm_json_raw(j, "attempts", v[C_ATT]);
    cm_json_raw(j, "max_attempts", v[C_MAXATT]);
    cm_json_time(j, "run_at", cm_atof(v[C_RUN_AT], NAN));
    cm_json_time(j, "claimed_at", cm_atof(v[C_CLAIMED_AT], NAN));
    cm_json_str(j, "session", v[C_CLAIM]);
    cm_json_time(j, "died_at", cm_atof(v[C_DIED_AT], NAN));
    cm_json_time(j, "created_at", cm_atof(v[C_CREATED_AT], NAN));
    cm_json_str(j, "unique_key", v[C_UKEY]);
    cm_json_str(j, "last_error", v[C_ERR]);
    oq_err e = payload_json(j, v[C_PAYLOAD]);
    cm_json_end(j);
    return e;
  }
  cm_table_cell(c->out->t, v[C_ID]);
  cm_table_cell(c->out->t, v[C_QUEUE]);
  if (c->dead_only) {
    char ago[24];
    cm_table_cellf(c->out->t, "%s/%s", v[C_ATT], v[C_MAXATT]);
    cm_table_cell(c->out->t, cm_fmt_ago(ago, sizeof ago,
                                        cm_atof(v[C_NOW], NAN) -
                                            cm_atof(v[C_DIED_AT], NAN)));
    cm_table_cell(c->out->t, v[C_ERR]);
  } else {
    cm_table_cell(c->out->t, v[C_STATE]);
    cm_table_cellf(c->out->t, "%s/%s", v[C_ATT], v[C_MAXATT]);
    cm_table_cell(c->out->t, v[C_PAYLOAD]);
  }
  return OQ_OK;
}

int qv_items_open(cm_listing *l, bool json, int state)
{
  return cm_listing_open(
      l, json, "items", state == QV_ITEMS_DEAD ? dead_cols : item_cols, "list");
}

oq_err qv_items_read(oq_db *db, const char *queue, int state, long limit,
                     cm_listing *l, long *n)
{
  /* The statement: the chosen branches (static text only). */
  char sql[4096];
  size_t off = 0;
  off += (size_t)snprintf(sql + off, sizeof sql - off, "SELECT * FROM (");
  bool first = true;
  for (int s = 0; s < QV_ITEMS_NSTATES; s++) {
    if (state >= 0 && s != state)
      continue;
    off += (size_t)snprintf(sql + off, sizeof sql - off, "%s%s",
                            first ? "" : " UNION ALL ", branch_sql[s]);
    first = false;
  }
  snprintf(sql + off, sizeof sql - off, ") u ORDER BY k, a, b LIMIT $2::int");
  items_ctx c = {.limit = limit, .dead_only = state == QV_ITEMS_DEAD, .out = l};
  char lim[24];
  snprintf(lim, sizeof lim, "%ld", limit + 1);
  const char *params[2] = {queue, lim};
  oq_err e = oq_db_query(db, sql, 2, params, item_row, &c);
  *n = c.n;
  return e;
}

oq_err qv_view_dead(FILE *f, oq_db *db, long limit)
{
  cm_listing l;
  long n = 0;
  oq_err e = OQ_ERR_NOMEM;
  if (qv_items_open(&l, true, QV_ITEMS_DEAD) == CM_EXIT_OK) {
    e = qv_items_read(db, NULL, QV_ITEMS_DEAD, limit, &l, &n);
    cm_listing_end_rows(&l);
    cm_json_bool(&l.j, "more", n > limit);
  }
  return print_doc(f, &l, e, "list");
}

/* ---- partitions -------------------------------------------------------- */

long qv_parts_ready(const oq_parts_report *r)
{
  long n = 0;
  for (int x = 0; x < r->partitions; x++)
    n += r->parts[x].ready;
  return n;
}

void qv_view_parts(FILE *f, const oq_parts_report *r)
{
  cm_json j;
  cm_json_init(&j, f);
  cm_json_obj(&j, NULL);
  cm_json_int(&j, "partitions", r->partitions);
  cm_json_bool(&j, "set", r->is_set);
  cm_json_int(&j, "members", r->members);
  cm_json_int(&j, "owners", r->owners);
  cm_json_int(&j, "unowned", r->unowned);
  cm_json_int(&j, "stale_rows", r->stale_rows);
  cm_json_int(&j, "ready", qv_parts_ready(r));
  cm_json_num(&j, "imbalance", r->imbalance);
  cm_json_arr(&j, "parts");
  for (int x = 0; x < r->partitions; x++) {
    const oq_part_info *pi = &r->parts[x];
    cm_json_obj(&j, NULL);
    cm_json_int(&j, "part", pi->part);
    cm_json_int(&j, "slot_lo", pi->slot_lo);
    cm_json_int(&j, "slot_hi", pi->slot_hi);
    if (pi->owner[0]) {
      cm_json_str(&j, "owner", pi->owner);
      cm_json_str(&j, "host", pi->owner_host);
      cm_json_int(&j, "pid", pi->owner_pid);
      cm_json_bool(&j, "live", pi->owner_live);
    } else {
      cm_json_raw(&j, "owner", NULL);
      cm_json_raw(&j, "host", NULL);
      cm_json_raw(&j, "pid", NULL);
      cm_json_bool(&j, "live", false);
    }
    cm_json_int(&j, "ready", pi->ready);
    cm_json_int(&j, "claimed", pi->claimed);
    cm_json_end(&j);
  }
  cm_json_end(&j);
  cm_json_end(&j);
}

/* ---- one item --------------------------------------------------------- */

static const char item_sql[] =
    "SELECT 'live', CASE WHEN i.claim IS NOT NULL THEN 'running'"
    " WHEN i.run_at > now() THEN 'scheduled' ELSE 'ready' END,"
    " i.id::text, i.queue, i.priority, i.attempts, i.max_attempts,"
    " extract(epoch from i.run_at)::float8,"
    " extract(epoch from i.claimed_at)::float8, NULL::float8, NULL::float8,"
    " extract(epoch from i.created_at)::float8,"
    " extract(epoch from now())::float8, i.claim::text, s.hostname,"
    " s.pid::text, extract(epoch from s.heartbeated_at)::float8,"
    " i.unique_key, i.last_error, NULL::text, i.payload::text"
    " FROM onceq_items i LEFT JOIN onceq_sessions s ON s.id = i.claim"
    " WHERE i.id = $1::uuid"
    " UNION ALL "
    "SELECT 'dead', 'dead', id::text, queue, priority, attempts, max_attempts,"
    " NULL, NULL, extract(epoch from died_at)::float8, NULL,"
    " extract(epoch from created_at)::float8, extract(epoch from "
    "now())::float8,"
    " NULL, NULL, NULL, NULL, unique_key, last_error, NULL, payload::text"
    " FROM onceq_dead WHERE id = $1::uuid"
    " UNION ALL "
    "SELECT 'done', 'done', item_id::text, queue, NULL, attempts, NULL, NULL,"
    " NULL, NULL, extract(epoch from done_at)::float8,"
    " extract(epoch from created_at)::float8, extract(epoch from "
    "now())::float8,"
    " session_id::text, NULL, NULL, NULL, NULL, NULL, result, NULL"
    " FROM onceq_done WHERE item_id = $1::uuid";

static int kind_rank(const char *kind)
{
  if (!kind)
    return 0;
  return strcmp(kind, "live") == 0 ? 3 : strcmp(kind, "dead") == 0 ? 2 : 1;
}

oq_err qv_item_find(oq_db *db, const char *id, qv_rows *out, int *row)
{
  const char *params[1] = {id};
  *row = -1;
  oq_err e = qv_query(db, item_sql, 1, params, out);
  if (e != OQ_OK)
    return e;
  int best_rank = 0;
  for (int i = 0; i < out->nrows; i++) {
    int rank = kind_rank(qv_rows_get(out, i, QV_ITEM_KIND));
    if (rank > best_rank) {
      *row = i;
      best_rank = rank;
    }
  }
  return *row >= 0 && out->ncols < QV_ITEM_NCOLS ? OQ_ERR_SQL : OQ_OK;
}

/* ---- schedules -------------------------------------------------------- */

oq_err qv_schedules_read(oq_db *db, qv_rows *out)
{
  return qv_query(db,
                  "SELECT name, cron, queue, payload::text,"
                  " extract(epoch FROM next_run_at)::float8,"
                  " extract(epoch FROM last_run_at)::float8,"
                  " last_item_id::text, extract(epoch FROM now())::float8"
                  " FROM onceq_schedules ORDER BY name",
                  0, NULL, out);
}

/* ---- the status page's latest dead letters ---------------------------- */

static const char dead_latest_sql[] =
    "SELECT id::text, queue, attempts, max_attempts,"
    " extract(epoch FROM now() - died_at)::float8,"
    " left(coalesce(last_error, ''), 1000), left(payload::text, 1000)"
    " FROM onceq_dead ORDER BY died_at DESC LIMIT $1::int";

oq_err qv_dead_latest(oq_db *db, int limit, oq_row_fn row, void *ud)
{
  char lim[16];
  snprintf(lim, sizeof lim, "%d", limit);
  const char *params[1] = {lim};
  return oq_db_query(db, dead_latest_sql, 1, params, row, ud);
}

/* ---- expired sessions ------------------------------------------------- */

static const char expired_sql[] =
    "SELECT s.id::text, s.hostname, s.pid,"
    " extract(epoch from now() - s.heartbeated_at)::float8,"
    " extract(epoch from s.expiry)::float8,"
    " (SELECT count(*) FROM onceq_items i WHERE i.claim = s.id)"
    " FROM onceq_sessions s WHERE s.heartbeated_at + s.expiry < now()"
    " ORDER BY s.heartbeated_at, s.id FOR UPDATE OF s";

oq_err qv_expired_sessions_lock(oq_db *db, oq_row_fn row, void *ud)
{
  return oq_db_query(db, expired_sql, 0, NULL, row, ud);
}
