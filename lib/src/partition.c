/*
 * partition.c: static partition assignment (partition.h): the slot/part
 * mapping, the cluster-wide P, one session's rounds, and the operator's
 * report. Terms (slot, part, member, block, claimable, draining, orphan)
 * are defined in partition.h.
 *
 * A round only decides where the session's claims look (claim.c,
 * oq_parts_claim); the ack's claim = session check alone decides who may
 * acknowledge, so nothing here can cause or prevent a duplicate ack.
 *
 * "Drained" is read from the database, not from the caller's memory: an
 * item is in flight exactly while its row says claim = us (acknowledging
 * deletes it, a failure or a release clears claim), so a part is drained
 * once none of our claimed items has a slot in it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SLOTS OQ_PARTS_SLOTS

/* A live member as one round saw it. id first: sorted and searched by it. */
typedef struct pmember {
  char id[OQ_UUID_LEN + 1];
  uint64_t queues_hash; /* of onceq_sessions.queues */
} pmember;

struct oq_parts {
  int orphan_after_ms;           /* < 0: orphans are never claimed */
  char session[OQ_UUID_LEN + 1]; /* the session the state belongs to */
  bool joined;                   /* its onceq_sessions.partitioned is set */
  unsigned long rounds;          /* rounds done for this session */
  bool warned_bad_p;             /* logged an invalid stored P once */
  /* the decision of the last round */
  int partitions; /* P */
  int members;    /* k */
  int index;      /* ours among the members, -1 if not seen */
  int block_lo, block_hi;
  bool held[SLOTS];             /* we own this part's row */
  oq__slot_range own[SLOTS];    /* claimable runs, as slot ranges */
  size_t nown;                  /* entries in own */
  size_t first;                 /* rotation through own */
  oq__slot_range orphan[SLOTS]; /* orphan runs, as slot ranges */
  size_t norphan;
  int owned, claimable, draining, orphans;
  bool stable;
  char logged[160]; /* the last summary logged: log changes only */
  /* a round's snapshot (scratch) */
  char owner[SLOTS][OQ_UUID_LEN + 1]; /* row owner by part; "" none */
  pmember *member;                    /* live members, sorted by id */
  size_t nmember, member_cap;
  bool mixed_queues; /* members serve different queue sets (warned) */
  char pvalue[32];   /* onceq_settings 'partitions' as stored */
  bool pset;
  bool nomem;
};

/* ---- the mapping ------------------------------------------------------ */

int oq_parts_of_slot(int slot, int partitions)
{
  if (partitions < 1)
    partitions = 1;
  if (slot < 0)
    slot = 0;
  if (slot >= SLOTS)
    slot = SLOTS - 1;
  return (int)((long)slot * partitions / SLOTS);
}

/* The first slot of part p: ceil(p * 1024 / P). */
static int first_slot(int part, int partitions)
{
  return (int)(((long)part * SLOTS + partitions - 1) / partitions);
}

void oq_parts_slots(int part_lo, int part_hi, int partitions, int *slot_lo,
                    int *slot_hi)
{
  if (partitions < 1)
    partitions = 1;
  *slot_lo = first_slot(part_lo, partitions);
  *slot_hi = first_slot(part_hi, partitions);
  if (*slot_lo > SLOTS) /* parts >= P have no slots */
    *slot_lo = SLOTS;
  if (*slot_hi > SLOTS)
    *slot_hi = SLOTS;
}

void oq_parts_block(int index, int members, int partitions, int *lo, int *hi)
{
  if (members < 1 || index < 0 || index >= members) {
    *lo = *hi = 0;
    return;
  }
  *lo = (int)((long)index * partitions / members);
  *hi = (int)((long)(index + 1) * partitions / members);
}

/* ---- the setting -------------------------------------------------------- */

/* P from the stored text; 0 when it is not a whole number in 1..1024. */
static int parse_partitions(const char *text)
{
  char *end = NULL;
  long v = text ? strtol(text, &end, 10) : 0;
  if (!text || !*text || !end || *end || v < 1 || v > OQ_PARTS_MAX)
    return 0;
  return (int)v;
}

typedef struct text_out {
  char *buf;
  size_t len;
  bool found;
} text_out;

static oq_err read_text(void *ud, int ncols, const char *const *vals)
{
  text_out *t = ud;
  if (ncols > 0 && vals[0]) {
    snprintf(t->buf, t->len, "%s", vals[0]);
    t->found = true;
  }
  return OQ_OK;
}

oq_err oq_parts_get(oq_db *db, int *partitions, bool *is_set)
{
  char value[32] = "";
  text_out t = {value, sizeof value, false};
  *partitions = OQ_PARTS_DEFAULT;
  if (is_set)
    *is_set = false;
  oq__db_clear(db);
  oq_err e =
      oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_GET), 0,
                         NULL, read_text, &t, NULL);
  if (e != OQ_OK)
    return e;
  if (!t.found)
    return OQ_OK;
  int v = parse_partitions(value);
  if (v == 0)
    return oq__db_fail(db, OQ_ERR_CONFIG, NULL,
                       "onceq_settings 'partitions' holds \"%s\", not a "
                       "whole number from 1 to %d; fix it with `onceq parts "
                       "set P`",
                       value, OQ_PARTS_MAX);
  *partitions = v;
  if (is_set)
    *is_set = true;
  return OQ_OK;
}

oq_err oq_parts_set(oq_db *db, int partitions)
{
  oq__db_clear(db);
  if (partitions < 1 || partitions > OQ_PARTS_MAX)
    return oq__db_fail(db, OQ_ERR_INVALID, NULL,
                       "partitions must be a whole number from 1 to %d, "
                       "not %d",
                       OQ_PARTS_MAX, partitions);
  char v[16];
  snprintf(v, sizeof v, "%d", partitions);
  const char *params[1] = {v};
  return oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_SET), 1,
                            params, NULL, NULL, NULL);
}

/* ---- a session's state ------------------------------------------------ */

oq_err oq_parts_new(const oq_parts_opts *opts, oq_parts **out)
{
  *out = NULL;
  oq_parts *p = calloc(1, sizeof *p);
  if (!p)
    return OQ_ERR_NOMEM;
  p->orphan_after_ms = opts && opts->orphan_after_ms ? opts->orphan_after_ms
                                                     : OQ_PARTS_ORPHAN_AFTER_MS;
  p->partitions = OQ_PARTS_DEFAULT;
  p->index = -1;
  *out = p;
  return OQ_OK;
}

void oq_parts_free(oq_parts *p)
{
  if (!p)
    return;
  free(p->member);
  free(p);
}

/* Forget everything: p is now used with session sid. */
static void reset_for(oq_parts *p, const char *sid)
{
  snprintf(p->session, sizeof p->session, "%s", sid);
  p->joined = false;
  p->rounds = 0;
  memset(p->held, 0, sizeof p->held);
  p->nown = p->norphan = p->first = 0;
  p->members = p->owned = p->claimable = p->draining = p->orphans = 0;
  p->index = -1;
  p->block_lo = p->block_hi = 0;
  p->stable = false;
  p->logged[0] = '\0';
}

const char *oq__parts_session(const oq_parts *p)
{
  return p->session;
}

const oq__slot_range *oq__parts_runs(oq_parts *p, size_t *nown, size_t *first,
                                     const oq__slot_range **orphans,
                                     size_t *norphan, int *orphan_after_ms)
{
  *nown = p->nown;
  *first = p->nown ? p->first % p->nown : 0;
  if (p->nown)
    p->first = (p->first + 1) % p->nown;
  *orphans = p->orphan;
  *norphan = p->orphan_after_ms < 0 ? 0 : p->norphan;
  *orphan_after_ms = p->orphan_after_ms < 0 ? 0 : p->orphan_after_ms;
  return p->own;
}

void oq_parts_status_get(const oq_parts *p, oq_parts_status *st)
{
  st->partitions = p->partitions;
  st->members = p->members;
  st->index = p->index;
  st->block_lo = p->block_lo;
  st->block_hi = p->block_hi;
  st->owned = p->owned;
  st->claimable = p->claimable;
  st->draining = p->draining;
  st->orphans = p->orphans;
  st->stable = p->stable;
  st->rounds = p->rounds;
}

bool oq_parts_claimable(const oq_parts *p, int part)
{
  return part >= p->block_lo && part < p->block_hi && part < SLOTS &&
         p->held[part];
}

/* ---- a round ------------------------------------------------------------ */

static oq_err snapshot_row(void *ud, int ncols, const char *const *v)
{
  oq_parts *p = ud;
  if (ncols < 3 || !v[0] || !v[1])
    return OQ_OK;
  switch (v[0][0]) {
  case 'P':
    snprintf(p->pvalue, sizeof p->pvalue, "%s", v[1]);
    p->pset = true;
    break;
  case 'M':
    if (p->nmember == p->member_cap) {
      size_t cap = p->member_cap ? 2 * p->member_cap : 16;
      void *m = realloc(p->member, cap * sizeof *p->member);
      if (!m) {
        p->nomem = true;
        return OQ_ERR_NOMEM;
      }
      p->member = m;
      p->member_cap = cap;
    }
    pmember *m = &p->member[p->nmember++];
    snprintf(m->id, sizeof m->id, "%s", v[1]);
    m->queues_hash = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = ncols > 3 && v[3] ? v[3] : ""; *c; c++)
      m->queues_hash = (m->queues_hash ^ (unsigned char)*c) * 1099511628211ull;
    break;
  case 'O': {
    long part = v[2] ? strtol(v[2], NULL, 10) : -1;
    if (part >= 0 && part < SLOTS)
      snprintf(p->owner[part], OQ_UUID_LEN + 1, "%s", v[1]);
    break;
  }
  default:
    break;
  }
  return OQ_OK;
}

static int cmp_id(const void *a, const void *b)
{
  return strcmp((const char *)a, (const char *)b);
}

static bool is_member(const oq_parts *p, const char *id)
{
  return id[0] && p->nmember &&
         bsearch(id, p->member, p->nmember, sizeof *p->member, cmp_id);
}

/* Read P, the live members and every ownership row in one statement. */
static oq_err read_snapshot(oq_db *db, oq_parts *p)
{
  memset(p->owner, 0, sizeof p->owner);
  p->nmember = 0;
  p->pset = false;
  p->pvalue[0] = '\0';
  p->nomem = false;
  oq_err e = oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_SNAPSHOT),
                         0, NULL, snapshot_row, p);
  if (p->nomem)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  if (e != OQ_OK)
    return e;
  qsort(p->member, p->nmember, sizeof *p->member, cmp_id);
  return OQ_OK;
}

/* Format parts[0..n) as an int4[] literal into a malloc'd string. */
static char *int_array(const int *parts, size_t n)
{
  char *out = malloc(n * 6 + 3);
  if (!out)
    return NULL;
  size_t pos = 0;
  out[pos++] = '{';
  for (size_t i = 0; i < n; i++)
    pos += (size_t)snprintf(out + pos, 7, "%s%d", i ? "," : "", parts[i]);
  out[pos++] = '}';
  out[pos] = '\0';
  return out;
}

static oq_err mark_slot(void *ud, int ncols, const char *const *v)
{
  bool *busy = ud;
  long slot = ncols > 0 && v[0] ? strtol(v[0], NULL, 10) : -1;
  if (slot >= 0 && slot < SLOTS)
    busy[slot] = true;
  return OQ_OK;
}

static oq_err took_row(void *ud, int ncols, const char *const *v)
{
  oq_parts *p = ud;
  long part = ncols > 0 && v[0] ? strtol(v[0], NULL, 10) : -1;
  if (part >= 0 && part < SLOTS) {
    p->held[part] = true;
    snprintf(p->owner[part], OQ_UUID_LEN + 1, "%s", p->session);
  }
  return OQ_OK;
}

/*
 * Give up the held parts outside the block whose slots, under the current
 * P, hold none of our claimed items (their next owner will claim in those
 * slots). Those still in flight stay owned (draining) and are looked at
 * again next round; we claim nothing new there, so they do drain. After a
 * change of P, a row means the new P's slots: items claimed under the old
 * P keep the part they now fall in.
 */
static oq_err give_up_drained(oq_db *db, oq_parts *p, int partitions,
                              const int *cand, size_t ncand)
{
  bool *busy = calloc(SLOTS, sizeof *busy);
  int *drop = malloc(ncand * sizeof *drop);
  oq_err e = OQ_OK;
  size_t ndrop = 0;
  char *arr = NULL;
  if (!busy || !drop) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  const char *params[2] = {p->session, NULL};
  e = oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_INFLIGHT), 1,
                  params, mark_slot, busy);
  if (e != OQ_OK)
    goto out;
  for (size_t i = 0; i < ncand; i++) {
    int x = cand[i], lo, hi;
    oq_parts_slots(x, x + 1, partitions, &lo, &hi); /* x >= P: no slots */
    bool in_flight = false;
    for (int slot = lo; slot < hi && !in_flight; slot++)
      in_flight = busy[slot];
    if (!in_flight)
      drop[ndrop++] = x;
  }
  if (ndrop == 0)
    goto out;
  arr = int_array(drop, ndrop);
  if (!arr) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto out;
  }
  params[1] = arr;
  e = oq_db_exec(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_GIVE_UP), 2,
                 params, NULL);
  if (e != OQ_OK)
    goto out;
  for (size_t i = 0; i < ndrop; i++) {
    p->held[drop[i]] = false;
    p->owner[drop[i]][0] = '\0';
  }
  OQ_LOG(OQ_LOG_DEBUG, p->session, NULL, "parts: gave up %zu drained part(s)",
         ndrop);
out:
  free(arr);
  free(drop);
  free(busy);
  return e;
}

/* Take the free parts of the block: INSERT ... ON CONFLICT DO NOTHING, so
 * a part someone else took meanwhile simply stays theirs. */
static oq_err take_free(oq_db *db, oq_parts *p)
{
  int want[SLOTS];
  size_t n = 0;
  for (int x = p->block_lo; x < p->block_hi; x++)
    if (!p->owner[x][0])
      want[n++] = x;
  if (n == 0)
    return OQ_OK;
  char *arr = int_array(want, n);
  if (!arr)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  const char *params[2] = {p->session, arr};
  oq_err e = oq_db_query(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_TAKE), 2,
                         params, took_row, p);
  free(arr);
  if (e == OQ_ERR_SQL &&
      oq_db_sqlstate_is(db, OQ_SQLSTATE_FOREIGN_KEY_VIOLATION))
    e = oq__db_fail(db, OQ_ERR_SESSION_LOST,
                    oq_sqlstate_code(OQ_SQLSTATE_FOREIGN_KEY_VIOLATION),
                    "session %s no longer exists (reaped); open a new session",
                    p->session);
  return e;
}

/* Merge the parts flagged in set[0..partitions) into slot-range runs. */
static size_t build_runs(const bool *set, int partitions, oq__slot_range *runs)
{
  size_t n = 0;
  for (int x = 0; x < partitions;) {
    if (!set[x]) {
      x++;
      continue;
    }
    int y = x;
    while (y < partitions && set[y])
      y++;
    oq_parts_slots(x, y, partitions, &runs[n].lo, &runs[n].hi);
    if (runs[n].hi > runs[n].lo)
      n++;
    x = y;
  }
  return n;
}

/*
 * The database half of a round, in one transaction (oq_db_transact runs it
 * again on a restart; it recomputes everything from what it reads). On
 * PostgreSQL it runs at READ COMMITTED whatever the connection's default:
 * ownership only decides where to look, and under SERIALIZABLE these reads
 * of the hot onceq_sessions rows would take part in the predicate-lock
 * conflicts of every heartbeat (and be restarted over and over).
 */
static oq_err round_tx(oq_db *db, void *ud)
{
  oq_parts *p = ud;
  const char *sid = p->session;
  oq_err e = OQ_OK;
  if (oq_db_traits(db)->session_settings) {
    e = oq__db_simple(db, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    if (e != OQ_OK)
      return e;
  }
  e = read_snapshot(db, p);
  if (e != OQ_OK)
    return e;

  /* P: the stored value, else the default; a bad stored value keeps the
   * last good one (logged once: `onceq parts` names the fix) */
  int P = p->pset ? parse_partitions(p->pvalue) : OQ_PARTS_DEFAULT;
  if (P == 0) {
    if (!p->warned_bad_p)
      OQ_LOG(OQ_LOG_WARN, sid, NULL,
             "onceq_settings 'partitions' holds \"%s\", not 1..%d; keeping "
             "%d parts (fix with `onceq parts set P`)",
             p->pvalue, OQ_PARTS_MAX, p->partitions);
    p->warned_bad_p = true;
    P = p->partitions;
  } else {
    p->warned_bad_p = false;
  }
  p->partitions = P;
  p->members = (int)p->nmember;
  p->index = -1;
  if (p->nmember) {
    void *me = bsearch(sid, p->member, p->nmember, sizeof *p->member, cmp_id);
    if (me)
      p->index = (int)((pmember *)me - p->member);
  }
  oq_parts_block(p->index, p->members, P, &p->block_lo, &p->block_hi);
  bool mixed = false;
  for (size_t i = 0; p->index >= 0 && i < p->nmember; i++)
    mixed =
        mixed || p->member[i].queues_hash != p->member[p->index].queues_hash;
  if (mixed && !p->mixed_queues)
    OQ_LOG(OQ_LOG_WARN, sid, NULL,
           "partitioned sessions serve different queue sets: parts are "
           "assigned across all of them, so an item can wait in a part owned "
           "by a session that does not serve its queue; give every "
           "--partitioned worker the same --queue list");
  p->mixed_queues = mixed;

  /* what we hold, per the database: keep the block, drain the rest */
  int cand[SLOTS];
  size_t ncand = 0;
  for (int x = 0; x < SLOTS; x++) {
    p->held[x] = strcmp(p->owner[x], sid) == 0;
    if (p->held[x] && !(x >= p->block_lo && x < p->block_hi))
      cand[ncand++] = x;
  }
  if (ncand > 0) {
    e = give_up_drained(db, p, P, cand, ncand);
    if (e != OQ_OK)
      return e;
  }
  return take_free(db, p);
}

oq_err oq_parts_rebalance(oq_db *db, const oq_session *s, oq_parts *p)
{
  oq__db_clear(db);
  oq_err e = oq__session_usable(db, s);
  if (e != OQ_OK)
    return e;
  const char *sid = oq_session_id(s);
  if (strcmp(p->session, sid) != 0)
    reset_for(p, sid);
  if (!p->joined) {
    const char *params[1] = {sid};
    long n = 0;
    e = oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_JOIN), 1,
                           params, NULL, NULL, &n);
    if (e != OQ_OK)
      return e;
    if (n != 1) { /* the row is gone: reported like the claim's FK error */
      oq__session_mark_lost(s);
      return oq__db_fail(db, OQ_ERR_SESSION_LOST,
                         oq_sqlstate_code(OQ_SQLSTATE_FOREIGN_KEY_VIOLATION),
                         "session %s no longer exists (reaped); open a new "
                         "session",
                         sid);
    }
    p->joined = true;
  }
  e = oq_db_transact(db, round_tx, p);
  if (e == OQ_ERR_SESSION_LOST)
    oq__session_mark_lost(s); /* the round's take found the row gone */
  if (e != OQ_OK) {
    /* what we hold is unknown: claim nothing until a round succeeds */
    p->nown = p->norphan = 0;
    return e;
  }

  /* claimable and orphan runs */
  int P = p->partitions;
  bool own[SLOTS] = {false}, orphan[SLOTS] = {false};
  p->owned = p->claimable = p->draining = p->orphans = 0;
  for (int x = 0; x < SLOTS; x++) {
    if (p->held[x]) {
      p->owned++;
      if (x >= p->block_lo && x < p->block_hi) {
        own[x] = true;
        p->claimable++;
      } else {
        p->draining++;
      }
    } else if (x < P && !is_member(p, p->owner[x])) {
      orphan[x] = true;
      p->orphans++;
    }
  }
  p->nown = build_runs(own, P, p->own);
  p->norphan = build_runs(orphan, P, p->orphan);
  if (p->first >= p->nown)
    p->first = 0;
  p->stable = p->draining == 0 && p->claimable == p->block_hi - p->block_lo;
  p->rounds++;

  char summary[sizeof p->logged];
  if (p->index >= 0)
    snprintf(summary, sizeof summary,
             "P=%d, member %d of %d, block [%d,%d), own %d, draining %d", P,
             p->index + 1, p->members, p->block_lo, p->block_hi, p->claimable,
             p->draining);
  else
    snprintf(summary, sizeof summary,
             "P=%d, not a live member yet (%d members), draining %d", P,
             p->members, p->draining);
  if (strcmp(summary, p->logged) != 0) {
    OQ_LOG(OQ_LOG_INFO, sid, NULL, "parts: %s, %d orphan(s)", summary,
           p->orphans);
    memcpy(p->logged, summary, sizeof summary);
  }
  return OQ_OK;
}

oq_err oq_parts_leave(oq_db *db, const oq_session *s, oq_parts *p)
{
  oq__db_clear(db);
  const char *params[1] = {oq_session_id(s)};
  oq_err e =
      oq__db_query_retry(db, oq__sql(oq_db_engine(db), OQ__SQL_PARTS_LEAVE), 1,
                         params, NULL, NULL, NULL);
  if (e == OQ_OK)
    e = oq__db_query_retry(db,
                           oq__sql(oq_db_engine(db), OQ__SQL_PARTS_GIVE_UP_ALL),
                           1, params, NULL, NULL, NULL);
  if (e == OQ_OK && p)
    reset_for(p, "");
  return e;
}

/* ---- the report ----------------------------------------------------- */

static oq_err read_long(void *ud, int ncols, const char *const *v)
{
  long *out = ud;
  *out = ncols > 0 && v[0] ? strtol(v[0], NULL, 10) : 0;
  return OQ_OK;
}

static oq_err owner_row(void *ud, int ncols, const char *const *v)
{
  oq_parts_report *r = ud;
  long part = ncols >= 5 && v[0] ? strtol(v[0], NULL, 10) : -1;
  if (part < 0)
    return OQ_OK;
  if (part >= r->partitions) {
    r->stale_rows++;
    return OQ_OK;
  }
  oq_part_info *pi = &r->parts[part];
  snprintf(pi->owner, sizeof pi->owner, "%s", v[1] ? v[1] : "");
  snprintf(pi->owner_host, sizeof pi->owner_host, "%s", v[2] ? v[2] : "");
  pi->owner_pid = v[3] ? (int)strtol(v[3], NULL, 10) : 0;
  pi->owner_live = v[4] && (v[4][0] == 't' || v[4][0] == 'T');
  return OQ_OK;
}

static oq_err count_row(void *ud, int ncols, const char *const *v)
{
  oq_parts_report *r = ud;
  long slot = ncols >= 3 && v[0] ? strtol(v[0], NULL, 10) : -1;
  if (slot < 0 || slot >= SLOTS)
    return OQ_OK;
  oq_part_info *pi = &r->parts[oq_parts_of_slot((int)slot, r->partitions)];
  pi->ready += v[1] ? strtol(v[1], NULL, 10) : 0;
  pi->claimed += v[2] ? strtol(v[2], NULL, 10) : 0;
  return OQ_OK;
}

/* Distinct live owners, and max / mean of the ready items they own. */
static void summarize(oq_parts_report *r)
{
  int n = r->partitions;
  long total = 0, max = 0;
  bool *seen = calloc((size_t)n, sizeof *seen);
  r->owners = 0;
  r->unowned = 0;
  for (int x = 0; x < n; x++) {
    if (!r->parts[x].owner[0] || !r->parts[x].owner_live)
      r->unowned++;
  }
  for (int x = 0; seen && x < n; x++) {
    const oq_part_info *pi = &r->parts[x];
    if (seen[x] || !pi->owner[0] || !pi->owner_live)
      continue;
    long ready = 0;
    for (int y = x; y < n; y++)
      if (!seen[y] && strcmp(r->parts[y].owner, pi->owner) == 0) {
        seen[y] = true;
        ready += r->parts[y].ready;
      }
    r->owners++;
    total += ready;
    if (ready > max)
      max = ready;
  }
  free(seen);
  r->imbalance =
      r->owners && total > 0 ? (double)max * r->owners / (double)total : 0.0;
}

oq_err oq_parts_report_read(oq_db *db, oq_parts_report **out)
{
  *out = NULL;
  oq_parts_report *r = calloc(1, sizeof *r);
  if (!r)
    return oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
  oq_err e = oq_parts_get(db, &r->partitions, &r->is_set);
  if (e != OQ_OK)
    goto fail;
  r->parts = calloc((size_t)r->partitions, sizeof *r->parts);
  if (!r->parts) {
    e = oq__db_fail(db, OQ_ERR_NOMEM, NULL, "out of memory");
    goto fail;
  }
  for (int x = 0; x < r->partitions; x++) {
    r->parts[x].part = x;
    oq_parts_slots(x, x + 1, r->partitions, &r->parts[x].slot_lo,
                   &r->parts[x].slot_hi);
  }
  oq_engine eng = oq_db_engine(db);
  long members = 0;
  e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_PARTS_MEMBERS), 0, NULL,
                         read_long, &members, NULL);
  if (e != OQ_OK)
    goto fail;
  r->members = (int)members;
  e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_PARTS_OWNERS), 0, NULL,
                         owner_row, r, NULL);
  if (e != OQ_OK)
    goto fail;
  e = oq__db_query_retry(db, oq__sql(eng, OQ__SQL_PARTS_SLOT_COUNTS), 0, NULL,
                         count_row, r, NULL);
  if (e != OQ_OK)
    goto fail;
  summarize(r);
  *out = r;
  return OQ_OK;
fail:
  oq_parts_report_free(r);
  return e;
}

void oq_parts_report_free(oq_parts_report *r)
{
  if (!r)
    return;
  free(r->parts);
  free(r);
}
