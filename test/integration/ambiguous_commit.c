/*
 * ambiguous_commit.c: the connection drops around the ack's COMMIT (through
 * the cutproxy fault proxy); oq_ack must reconcile from the database, never
 * re-run blindly, and the handler's database effect must exist exactly once.
 *
 * The handler inserts into a ledger table that has NO unique constraint, so
 * a blind re-run would show up as a second row. Cases (docs/design.md §3,
 * "Ambiguous commit"):
 *  - landed:      COMMIT reaches the server and commits; the answer is lost.
 *                 Reconciliation finds the item gone: acknowledged.
 *  - not-landed:  COMMIT never reaches the server (it rolls back).
 *                 Reconciliation finds the item still ours: ack again.
 *  - landing:     the client is cut while a slow COMMIT (a deferred trigger
 *                 sleeps 1.5 s) is still running, so the reconciliation
 *                 runs while the first transaction still holds its locks.
 *  - reaped:      not landed, and our session is reaped before the client
 *                 notices: the claim is lost; nothing may be written.
 *  - acked-elsewhere: not landed, reaped, and another session claims and
 *                 acks the item before we notice: item gone, so OQ_OK, and
 *                 only the other session's ledger row exists.
 *  - cancelled:   not landed, and the item is moved to onceq_dead (as a
 *                 dead-letter does; `onceq cancel` does not, see
 *                 cancelled-cli) before we notice: gone, but dead, so the
 *                 claim was lost, not acknowledged.
 *  - cancelled-cli: not landed, and `onceq cancel ID` (the real command,
 *                 which writes no dead letter) deletes the item before we
 *                 notice: gone, yet the claim was lost, not acknowledged.
 *  - error-commit: landed, and the client gets an error 40003 (statement
 *                 completion unknown) for its COMMIT before the connection
 *                 drops: reconciled like landed, not a plain lost connection.
 *  - batch-landed / batch-not-landed / batch-error-commit: the same faults
 *                 around the COMMIT of a pipelined batch ack
 *                 (oq_ack_many_sql, 5 items): every item acked, one ledger
 *                 row each.
 *  - batch-gave-up: the same for a pipelined batch of 3: the second call
 *                 remembers the first's unknown outcome, so every item is
 *                 OQ_ACK_DONE (not LOST) and the ledger has one row each.
 *  - batch-subset: an oq_ack_batch of 3 with per-item results whose DELETE
 *                 fails on the server while its reply is cut; meanwhile the
 *                 middle item is claimed elsewhere: the other two are acked
 *                 again, each with its own result and truncated flag.
 *  - gave-up:     landed, and the database refuses new connections while
 *                 the client reconnects: oq_ack gives up with
 *                 OQ_ERR_AMBIGUOUS. Once connections are allowed again, a
 *                 second oq_ack of the same item reconciles first (item
 *                 gone: OQ_OK, reconciled) and never re-runs the handler.
 * Every case checks the outcome on a direct (not proxied) connection.
 * The proxied connection (the worker's side) connects through
 * oqt_worker_dsn: as the least-privilege worker role under
 * ONCEQ_TEST_ROLE=worker (it_lib_ambiguous_commit_least_priv), where the
 * reconciliation's read of onceq_dead once failed with 42501 (issue 20).
 *
 * Usage: it_lib_ambiguous_commit [CASE]   (default: every case)
 */
#include "oq_test.h"

#include <libpq-fe.h>
#include <stdbool.h>

#include "cutproxy.h"

#define QUEUE "ambig"

/* The upstream PostgreSQL (from the harness DSN) the proxy relays to. */
static char up_host[256];
static int up_port;

typedef enum case_kind {
  CASE_LANDED,
  CASE_NOT_LANDED,
  CASE_LANDING,
  CASE_REAPED,
  CASE_ACKED_ELSEWHERE,
  CASE_CANCELLED,
  CASE_CANCELLED_CLI
} case_kind;

typedef struct case_def {
  const char *name;
  case_kind kind;
  cutproxy_mode mode;
} case_def;

static const case_def cases[] = {
    {"landed", CASE_LANDED, CUTPROXY_CUT_AFTER_COMMIT},
    {"not-landed", CASE_NOT_LANDED, CUTPROXY_CUT_BEFORE_COMMIT},
    {"landing", CASE_LANDING, CUTPROXY_CUT_DURING_COMMIT},
    {"reaped", CASE_REAPED, CUTPROXY_CUT_BEFORE_COMMIT},
    {"acked-elsewhere", CASE_ACKED_ELSEWHERE, CUTPROXY_CUT_BEFORE_COMMIT},
    {"cancelled", CASE_CANCELLED, CUTPROXY_CUT_BEFORE_COMMIT},
    {"error-commit", CASE_LANDED, CUTPROXY_ERROR_AFTER_COMMIT},
    {"cancelled-cli", CASE_CANCELLED_CLI, CUTPROXY_CUT_BEFORE_COMMIT},
};

/* What the ack handler saw; used on the oq_ack thread only. */
typedef struct ledger_ctx {
  int calls;       /* handler runs */
  const char *who; /* note prefix: "run" for us, "other" for session B */
} ledger_ctx;

/* What the cut hook did; written on the proxy's relay thread before the
 * client learns of the cut, read after cutproxy_wait_settled. */
typedef struct gap_ctx {
  case_kind kind;
  const char *dsn;     /* direct conninfo */
  char session_id[64]; /* our session, to reap */
  char item[64];       /* the item, to cancel */
  int ran;             /* the hook ran */
  long reaped;         /* session rows deleted */
  oq_err other_ack;    /* session B's oq_ack result */
  int other_claimed;   /* items session B claimed */
  char refuse_db[128]; /* gave-up: refuse new connections to this db */
} gap_ctx;

/* ---- conninfo plumbing ------------------------------------------------ */

/* Append " key='value'" with libpq quoting. */
static void append_kv(char *out, size_t outlen, const char *key,
                      const char *val)
{
  size_t n = strlen(out);
  int w = snprintf(out + n, outlen - n, "%s%s='", n ? " " : "", key);
  if (w < 0 || (size_t)w >= outlen - n)
    OQT_FAIL("conninfo too long");
  n += (size_t)w;
  for (const char *v = val; *v; v++) {
    if (n + 3 >= outlen)
      OQT_FAIL("conninfo too long");
    if (*v == '\'' || *v == '\\')
      out[n++] = '\\';
    out[n++] = *v;
  }
  if (n + 2 >= outlen)
    OQT_FAIL("conninfo too long");
  out[n++] = '\'';
  out[n] = '\0';
}

/* Find where the harness's PostgreSQL listens (TCP only). */
static void find_upstream(const char *dsn)
{
  char *err = NULL;
  PQconninfoOption *opts = PQconninfoParse(dsn, &err);
  if (!opts)
    OQT_FAIL("cannot parse ONCEQ_TEST_DSN: %s", err ? err : "?");
  const char *host = NULL, *hostaddr = NULL, *port = NULL;
  for (PQconninfoOption *o = opts; o->keyword; o++) {
    if (!o->val || !*o->val)
      continue;
    if (strcmp(o->keyword, "host") == 0)
      host = o->val;
    else if (strcmp(o->keyword, "hostaddr") == 0)
      hostaddr = o->val;
    else if (strcmp(o->keyword, "port") == 0)
      port = o->val;
  }
  const char *h = hostaddr ? hostaddr : host;
  if (!h || h[0] == '/' || strchr(h, ',')) {
    PQconninfoFree(opts);
    fprintf(stderr,
            "SKIP: the proxy needs a single TCP host in "
            "ONCEQ_TEST_DSN (got host=%s)\n",
            h ? h : "(none)");
    exit(77);
  }
  snprintf(up_host, sizeof up_host, "%s", h);
  up_port = port ? (int)strtol(port, NULL, 10) : 5432;
  PQconninfoFree(opts);
}

/* dsn with host/port replaced by the proxy's (and TLS off: the proxy
 * answers SSLRequest with 'N'). */
static void proxied_dsn(const char *dsn, int port, char *out, size_t outlen)
{
  char *err = NULL;
  PQconninfoOption *opts = PQconninfoParse(dsn, &err);
  if (!opts)
    OQT_FAIL("cannot parse %s: %s", dsn, err ? err : "?");
  out[0] = '\0';
  for (PQconninfoOption *o = opts; o->keyword; o++) {
    if (!o->val || !*o->val)
      continue;
    if (strcmp(o->keyword, "host") == 0 ||
        strcmp(o->keyword, "hostaddr") == 0 ||
        strcmp(o->keyword, "port") == 0 || strcmp(o->keyword, "sslmode") == 0 ||
        strcmp(o->keyword, "gssencmode") == 0)
      continue;
    append_kv(out, outlen, o->keyword, o->val);
  }
  PQconninfoFree(opts);
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  append_kv(out, outlen, "host", "127.0.0.1");
  append_kv(out, outlen, "port", portstr);
  append_kv(out, outlen, "sslmode", "disable");
  append_kv(out, outlen, "gssencmode", "disable");
}

/* ---- small queries on the direct connection --------------------------- */

typedef struct first_text {
  int rows;
  char val[128];
} first_text;

static oq_err grab_first(void *ud, int ncols, const char *const *vals)
{
  first_text *ft = ud;
  if (ft->rows++ == 0 && ncols > 0)
    snprintf(ft->val, sizeof ft->val, "%s", vals[0] ? vals[0] : "(null)");
  return OQ_OK;
}

/* First column of the first row as text; *rows gets the row count. */
static first_text query1(oq_db *db, const char *sql, const char *param)
{
  first_text ft = {0, ""};
  const char *params[1] = {param};
  oq_err e = oq_db_query(db, sql, param ? 1 : 0, param ? params : NULL,
                         grab_first, &ft);
  if (e != OQ_OK)
    OQT_FAIL("%s: %s (%s)", sql, oq_strerror(e), oq_db_errmsg(db));
  return ft;
}

static long count1(oq_db *db, const char *sql, const char *param)
{
  first_text ft = query1(db, sql, param);
  if (ft.rows != 1)
    OQT_FAIL("%s: %d rows, want 1", sql, ft.rows);
  return strtol(ft.val, NULL, 10);
}

/* ---- the handler and the cut hook ------------------------------------- */

/* The ack handler: one ledger row per run, noted "<who> <run number>". */
static oq_err ledger_insert(oq_db *db, const oq_item *item, void *ud)
{
  ledger_ctx *lc = ud;
  char note[32];
  lc->calls++;
  snprintf(note, sizeof note, "%s %d", lc->who, lc->calls);
  const char *params[2] = {item->id, note};
  return oq_db_exec(db, "INSERT INTO ledger (item_id, note) VALUES ($1, $2)", 2,
                    params, NULL);
}

static oq_session_opts session_opts(void)
{
  /* Long expiry: nothing here must fence or reap by time. No heartbeat
   * thread runs; reaping is done explicitly by the cut hook. */
  oq_session_opts so = {
      .heartbeat_interval_ms = 5000, .expiry_ms = 60000, .queues = QUEUE};
  return so;
}

/* Runs in the gap: the server side of the cut connection is closed, the
 * client (oq_ack) does not know yet. */
static void in_the_gap(void *ud, cutproxy_mode mode)
{
  gap_ctx *g = ud;
  g->ran = 1;
  if (g->refuse_db[0]) {
    /* from another database: the client's reconnects are refused */
    oq_db *adm = oqt_connect(oqt_admin_dsn());
    char sql[256];
    snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS false",
             g->refuse_db);
    oqt_exec(adm, sql);
    oq_db_close(adm);
    return;
  }
  if (g->kind == CASE_CANCELLED) {
    /* waits for the abandoned transaction's row lock, like the reap */
    oq_db *db = oqt_connect(g->dsn);
    long moved = 0;
    oq_err e = oq_db_exec(
        db,
        "WITH d AS (DELETE FROM onceq_items WHERE queue = '" QUEUE "'"
        " RETURNING id, queue, payload, priority, attempts, max_attempts,"
        " unique_key, created_at)"
        " INSERT INTO onceq_dead (id, queue, payload, priority, attempts,"
        " max_attempts, unique_key, last_error, created_at)"
        " SELECT id, queue, payload, priority, attempts, max_attempts,"
        " unique_key, 'cancelled', created_at FROM d",
        0, NULL, &moved);
    if (e != OQ_OK || moved != 1)
      OQT_FAIL("cancel: %s (%s), %ld moved", oq_strerror(e), oq_db_errmsg(db),
               moved);
    oq_db_close(db);
    return;
  }
  if (g->kind == CASE_CANCELLED_CLI) {
    /* waits for the abandoned transaction's row lock (FOR UPDATE) */
    char cmd[2048];
    if (strchr(g->dsn, '\''))
      OQT_FAIL("cancelled-cli: the DSN must not contain a quote: %s", g->dsn);
    snprintf(cmd, sizeof cmd, "'%s' --db '%s' cancel %s >/dev/null", OQ_CLI_BIN,
             g->dsn, g->item);
    int rc = system(cmd);
    if (rc != 0)
      OQT_FAIL("onceq cancel %s: exit status %d", g->item, rc);
    return;
  }
  if (g->kind != CASE_REAPED && g->kind != CASE_ACKED_ELSEWHERE)
    return;
  oq_db *db = oqt_connect(g->dsn);
  /* The session expires and is reaped: oq_reap deletes the row and
   * releases its claims in the same transaction (schema v8). The release
   * waits for the abandoned transaction (which holds the item's row lock)
   * to roll back. */
  const char *params[1] = {g->session_id};
  oq_err e = oq_db_exec(db,
                        "UPDATE onceq_sessions SET heartbeated_at = now()"
                        " - interval '1 hour' WHERE id = $1",
                        1, params, NULL);
  int nreaped = 0;
  if (e == OQ_OK)
    e = oq_reap(db, &nreaped, NULL);
  g->reaped = nreaped;
  if (e != OQ_OK)
    OQT_FAIL("reap: %s (%s)", oq_strerror(e), oq_db_errmsg(db));
  if (g->kind == CASE_ACKED_ELSEWHERE) {
    oq_session_opts so = session_opts();
    oq_session *b = NULL;
    ASSERT_OK(db, oq_session_open(db, &so, &b));
    const char *q[1] = {QUEUE};
    oq_item *items = NULL;
    size_t n = 0;
    ASSERT_OK(db, oq_claim(db, b, q, 1, 1, &items, &n));
    g->other_claimed = (int)n;
    g->other_ack = OQ_ERR_INVALID;
    if (n == 1) {
      ledger_ctx lc = {0, "other"};
      g->other_ack = oq_ack(db, b, &items[0], ledger_insert, &lc, NULL, NULL);
    }
    oq_items_free(items, n);
    ASSERT_OK(db, oq_session_end(db, b));
    oq_session_free(b);
  }
  oq_db_close(db);
}

/* ---- one case ---------------------------------------------------------- */

static void run_case(const case_def *cd)
{
  char dbname[64];
  snprintf(dbname, sizeof dbname, "ambig_%s", cd->name);
  char dsn[1024];
  snprintf(dsn, sizeof dsn, "%s", oqt_fresh_db(dbname, 1));

  oq_db *direct = oqt_connect(dsn);
  oqt_exec(direct, "CREATE TABLE ledger (item_id uuid, note text)");
  if (cd->kind == CASE_LANDING) {
    /* Make COMMIT take 1.5 s on the server, so the client is cut (and
     * reconciles) while the first transaction is still committing. */
    oqt_exec(direct, "CREATE FUNCTION ledger_slow() RETURNS trigger "
                     "LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1.5); "
                     "RETURN NULL; END $$");
    oqt_exec(direct, "CREATE CONSTRAINT TRIGGER ledger_slow AFTER INSERT "
                     "ON ledger DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                     "EXECUTE FUNCTION ledger_slow()");
  }
  oqt_enqueue_n(direct, QUEUE, 1);

  cutproxy *px = cutproxy_start(up_host, up_port);
  if (!px)
    OQT_FAIL("cutproxy_start failed");
  char pdsn[2048];
  proxied_dsn(oqt_worker_dsn(dsn), cutproxy_port(px), pdsn, sizeof pdsn);
  oq_db *db = oqt_connect(pdsn);
  ASSERT_EQ(cutproxy_accepted(px), 1);

  oq_session_opts so = session_opts();
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, 1, 1, &items, &n));
  ASSERT_EQ(n, 1);
  /* The claim went through the proxy and nothing fired yet. */
  ASSERT_EQ(count1(direct,
                   "SELECT count(*) FROM onceq_items WHERE id = $1 "
                   "AND claim IS NOT NULL",
                   items[0].id),
            1);
  ASSERT_EQ(cutproxy_fired(px), 0);

  gap_ctx gap = {.kind = cd->kind, .dsn = dsn, .other_ack = OQ_OK};
  snprintf(gap.session_id, sizeof gap.session_id, "%s", oq_session_id(s));
  snprintf(gap.item, sizeof gap.item, "%s", items[0].id);
  cutproxy_on_cut(px, in_the_gap, &gap);
  cutproxy_arm(px, cd->mode);

  ledger_ctx lc = {0, "run"};
  bool reconciled = false;
  uint64_t restarts0 = oq_db_restarts(db);
  uint64_t t0 = oq_monotonic_ms();
  oq_err e = oq_ack(db, s, &items[0], ledger_insert, &lc, NULL, &reconciled);
  uint64_t took_ms = oq_monotonic_ms() - t0;
  long restarts = (long)(oq_db_restarts(db) - restarts0);
  char ackmsg[OQ_ERRBUF_SIZE];
  snprintf(ackmsg, sizeof ackmsg, "%s", e == OQ_OK ? "" : oq_db_errmsg(db));

  if (!cutproxy_wait_settled(px, 40000))
    OQT_FAIL("the cut connection did not settle within 40 s");
  char commit_result[64];
  cutproxy_commit_result(px, commit_result, sizeof commit_result);

  /* The handle works again, through the proxy (it reconnected). */
  long one = count1(db, "SELECT 1", NULL);
  uint64_t accepted = cutproxy_accepted(px);

  long ledger_item = count1(
      direct, "SELECT count(*) FROM ledger WHERE item_id = $1", items[0].id);
  long ledger_all = count1(direct, "SELECT count(*) FROM ledger", NULL);
  first_text note = query1(direct, "SELECT note FROM ledger LIMIT 1", NULL);
  long items_left = count1(direct, "SELECT count(*) FROM onceq_items", NULL);
  long items_free = count1(direct,
                           "SELECT count(*) FROM onceq_items WHERE id = $1 "
                           "AND claim IS NULL",
                           items[0].id);
  long dead = count1(direct, "SELECT count(*) FROM onceq_dead", NULL);

  printf("CASE %-15s (isolation %s, proxy %s): oq_ack -> %s%s%s, "
         "reconciled=%d, handler runs=%d, restarts=%ld, took %llu ms; "
         "proxy fired=%llu accepted=%llu commit-result=%s; ledger rows=%ld "
         "(item %ld, note '%s'), items left=%ld (unclaimed %ld), dead=%ld",
         cd->name, oqt_isolation(), cutproxy_mode_name(cd->mode),
         oq_strerror(e), e == OQ_OK ? "" : ": ", ackmsg, (int)reconciled,
         lc.calls, restarts, (unsigned long long)took_ms,
         (unsigned long long)cutproxy_fired(px), (unsigned long long)accepted,
         commit_result[0] ? commit_result : "-", ledger_all, ledger_item,
         note.rows ? note.val : "", items_left, items_free, dead);
  if (cd->kind == CASE_REAPED || cd->kind == CASE_ACKED_ELSEWHERE)
    printf("; in the gap: reaped %ld session(s), other session claimed %d, "
           "its ack -> %s",
           gap.reaped, gap.other_claimed, oq_strerror(gap.other_ack));
  printf("\n");
  fflush(stdout);

  /* The fault happened exactly once, and the library reconnected through
   * the proxy. */
  ASSERT_EQ(cutproxy_fired(px), 1);
  ASSERT_EQ(cutproxy_armed(px), CUTPROXY_NONE);
  ASSERT_EQ(gap.ran, 1);
  ASSERT_LE(2, accepted);
  ASSERT_EQ(one, 1);
  ASSERT_EQ(dead, cd->kind == CASE_CANCELLED ? 1 : 0);

  /* First the guarantee (what is in the database), then the verdict. */
  switch (cd->kind) {
  case CASE_LANDED:
    /* The server committed the first run; no second run. */
    ASSERT_STREQ(commit_result, "COMMIT");
    ASSERT_EQ(ledger_item, 1);
    ASSERT_EQ(ledger_all, 1);
    ASSERT_STREQ(note.val, "run 1");
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_EQ(lc.calls, 1 + restarts);
    break;
  case CASE_NOT_LANDED: {
    /* The first run rolled back; reconciliation ran the ack again, and
     * only that last run's row exists. */
    char want[32];
    snprintf(want, sizeof want, "run %d", lc.calls);
    ASSERT_STREQ(commit_result, "");
    ASSERT_EQ(ledger_item, 1);
    ASSERT_EQ(ledger_all, 1);
    ASSERT_STREQ(note.val, want);
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_EQ(lc.calls, 2 + restarts);
    break;
  }
  case CASE_LANDING:
    /* The first run committed (late); whatever reconciliation did while it
     * was committing, its row is the only one. */
    ASSERT_STREQ(commit_result, "COMMIT");
    ASSERT_EQ(ledger_item, 1);
    ASSERT_EQ(ledger_all, 1);
    ASSERT_STREQ(note.val, "run 1");
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_LE(1, lc.calls);
    break;
  case CASE_REAPED:
    /* Our session is gone and the item was released: claim lost, nothing
     * written, the item waits for another claimer. */
    ASSERT_EQ(gap.reaped, 1);
    ASSERT_EQ(ledger_all, 0);
    ASSERT_EQ(items_left, 1);
    ASSERT_EQ(items_free, 1);
    ASSERT_ERR(OQ_ERR_CLAIM_LOST, e);
    ASSERT_EQ(lc.calls, 1 + restarts);
    break;
  case CASE_ACKED_ELSEWHERE:
    /* Session B acknowledged the item in the gap: the item is gone, so
     * ours counts as acknowledged (by someone), with no re-run. */
    ASSERT_EQ(gap.reaped, 1);
    ASSERT_EQ(gap.other_claimed, 1);
    ASSERT_ERR(OQ_OK, gap.other_ack);
    ASSERT_EQ(ledger_item, 1);
    ASSERT_EQ(ledger_all, 1);
    ASSERT_STREQ(note.val, "other 1");
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_EQ(lc.calls, 1 + restarts);
    break;
  case CASE_CANCELLED:
    /* Gone, but dead-lettered: not acknowledged, nothing written. */
    ASSERT_EQ(ledger_all, 0);
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_ERR_CLAIM_LOST, e);
    ASSERT_EQ(lc.calls, 1 + restarts);
    break;
  case CASE_CANCELLED_CLI:
    /* Gone, with no dead letter: cancelled, not acknowledged by us. */
    ASSERT_EQ(ledger_all, 0);
    ASSERT_EQ(items_left, 0);
    ASSERT_ERR(OQ_ERR_CLAIM_LOST, e);
    ASSERT_EQ(lc.calls, 1 + restarts);
    break;
  }
  /* The verdict came from reconciling an ambiguous commit. */
  ASSERT_EQ(reconciled, true);

  oq_items_free(items, n);
  if (cd->kind == CASE_REAPED || cd->kind == CASE_ACKED_ELSEWHERE) {
    oq_err ee = oq_session_end(db, s); /* row already gone */
    (void)ee;
  } else {
    ASSERT_OK(db, oq_session_end(db, s));
  }
  oq_session_free(s);
  oq_db_close(db);
  cutproxy_stop(px);
  oq_db_close(direct);
}

/* gave-up: oq_ack returns OQ_ERR_AMBIGUOUS; calling it again reconciles
 * first (ack.h) instead of re-running the transaction blindly, which would
 * find 0 rows and report a landed ack as lost. */
/* batch: the same with a pipelined batch of 3 (oq_ack_many_sql), whose
 * second call must remember the first's unknown outcome: DONE, not LOST. */
static void run_gave_up(bool batch)
{
  const char *dbname = batch ? "ambig_batch_gave_up" : "ambig_gave_up";
  const char *name = batch ? "batch-gave-up" : "gave-up";
  size_t want = batch ? 3 : 1;
  char dsn[1024];
  snprintf(dsn, sizeof dsn, "%s", oqt_fresh_db(dbname, 1));
  char real_db[128] = "";
  {
    oq_db *d = oqt_connect(dsn);
    first_text t = query1(d, "SELECT current_database()", NULL);
    snprintf(real_db, sizeof real_db, "%s", t.val);
    oqt_exec(d, "CREATE TABLE ledger (item_id uuid, note text)");
    oqt_enqueue_n(d, QUEUE, (int)want);
    oq_db_close(d);
  }
  cutproxy *px = cutproxy_start(up_host, up_port);
  if (!px)
    OQT_FAIL("cutproxy_start failed");
  char pdsn[2048];
  proxied_dsn(oqt_worker_dsn(dsn), cutproxy_port(px), pdsn, sizeof pdsn);
  /* a short patience, so reconnecting gives up within the test */
  oq_retry_policy rp = oq_retry_policy_tx();
  rp.max_total_ms = 1500;
  oq_db_opts o = {
      .conninfo = pdsn, .application_name = "ambig-gave-up", .retry = &rp};
  char err[OQ_ERRBUF_SIZE];
  oq_db *db = NULL;
  if (oq_db_open(&o, &db, err, sizeof err) != OQ_OK)
    OQT_FAIL("connect through the proxy: %s", err);
  oq_session_opts so = session_opts();
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, 1, (int)want, &items, &n));
  ASSERT_EQ(n, want);
  static const char bsql[] =
      "INSERT INTO ledger (item_id, note) VALUES ($2, 'run 1')";
  oq_ack_result res[3];

  gap_ctx gap = {.kind = CASE_LANDED, .dsn = dsn};
  snprintf(gap.refuse_db, sizeof gap.refuse_db, "%s", real_db);
  cutproxy_on_cut(px, in_the_gap, &gap);
  cutproxy_arm(px, CUTPROXY_CUT_AFTER_COMMIT);
  ledger_ctx lc = {0, "run"};
  bool reconciled = false;
  oq_err e =
      batch ? oq_ack_many_sql(db, s, items, n, bsql, NULL, res)
            : oq_ack(db, s, &items[0], ledger_insert, &lc, NULL, &reconciled);
  printf("CASE %s: first ack -> %s (%s), handler runs=%d\n", name,
         oq_strerror(e), oq_db_errmsg(db), lc.calls);
  ASSERT_ERR(OQ_ERR_AMBIGUOUS, e);
  ASSERT_EQ(gap.ran, 1);

  oq_db *adm = oqt_connect(oqt_admin_dsn());
  char sql[256];
  snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true",
           real_db);
  oqt_exec(adm, sql);
  oq_db_close(adm);

  int calls_before = lc.calls;
  reconciled = false;
  if (batch) {
    e = oq_ack_many_sql(db, s, items, n, bsql, NULL, res);
    printf("CASE %s: second ack -> %s, verdicts %d %d %d\n", name,
           oq_strerror(e), (int)res[0].verdict, (int)res[1].verdict,
           (int)res[2].verdict);
    ASSERT_ERR(OQ_OK, e);
    for (size_t i = 0; i < n; i++)
      ASSERT_EQ(res[i].verdict, OQ_ACK_DONE); /* remembered: not LOST */
  } else {
    e = oq_ack(db, s, &items[0], ledger_insert, &lc, NULL, &reconciled);
    printf("CASE %s: second oq_ack -> %s, reconciled=%d, handler "
           "runs=%d\n",
           name, oq_strerror(e), (int)reconciled, lc.calls);
    ASSERT_ERR(OQ_OK, e);
    ASSERT_EQ(reconciled, true);
    ASSERT_EQ(lc.calls, calls_before); /* not re-run */
  }
  oq_db *direct = oqt_connect(dsn);
  ASSERT_EQ(count1(direct, "SELECT count(*) FROM ledger", NULL), (long)want);
  ASSERT_EQ(count1(direct, "SELECT count(*) FROM onceq_items", NULL), 0);
  oq_db_close(direct);
  oq_items_free(items, n);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  cutproxy_stop(px);
}

/* A pipelined batch of 5 cut around its COMMIT: reconciled per item. */
static void run_batch_case(const char *name, cutproxy_mode mode)
{
  char dbname[64];
  snprintf(dbname, sizeof dbname, "ambig_%s", name);
  char dsn[1024];
  snprintf(dsn, sizeof dsn, "%s", oqt_fresh_db(dbname, 1));
  oq_db *direct = oqt_connect(dsn);
  oqt_exec(direct, "CREATE TABLE ledger (item_id uuid, note text)");
  oqt_enqueue_n(direct, QUEUE, 5);
  cutproxy *px = cutproxy_start(up_host, up_port);
  if (!px)
    OQT_FAIL("cutproxy_start failed");
  char pdsn[2048];
  proxied_dsn(oqt_worker_dsn(dsn), cutproxy_port(px), pdsn, sizeof pdsn);
  oq_db *db = oqt_connect(pdsn);
  oq_session_opts so = session_opts();
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, 1, 10, &items, &n));
  ASSERT_EQ(n, 5);
  cutproxy_arm(px, mode);
  oq_ack_result res[5];
  oq_err e = oq_ack_many_sql(
      db, s, items, n,
      "INSERT INTO ledger (item_id, note) VALUES ($2, 'batch')", NULL, res);
  if (!cutproxy_wait_settled(px, 40000))
    OQT_FAIL("the cut connection did not settle within 40 s");
  char commit_result[64];
  cutproxy_commit_result(px, commit_result, sizeof commit_result);
  long ledger = count1(direct, "SELECT count(*) FROM ledger", NULL);
  long distinct =
      count1(direct, "SELECT count(DISTINCT item_id) FROM ledger", NULL);
  long left = count1(direct, "SELECT count(*) FROM onceq_items", NULL);
  printf("CASE %-15s (isolation %s, proxy %s): oq_ack_many_sql -> %s, "
         "commit-result=%s, ledger rows=%ld (distinct %ld), items left=%ld\n",
         name, oqt_isolation(), cutproxy_mode_name(mode), oq_strerror(e),
         commit_result[0] ? commit_result : "-", ledger, distinct, left);
  ASSERT_EQ(cutproxy_fired(px), 1);
  ASSERT_ERR(OQ_OK, e);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(res[i].verdict, OQ_ACK_DONE);
  ASSERT_EQ(ledger, 5);
  ASSERT_EQ(distinct, 5);
  ASSERT_EQ(left, 0);
  oq_items_free(items, n);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_db_close(db);
  cutproxy_stop(px);
  oq_db_close(direct);
}

/* batch-subset: what the hook does while oq_ack_batch's connection is down:
 * the middle item goes to another session, so the reconciliation acks
 * again only the first and the last. */
typedef struct subset_gap {
  const char *dsn;
  char item[OQ_UUID_LEN + 1];
  char other[OQ_UUID_LEN + 1];
  int ran;
} subset_gap;

static void take_middle(void *ud, cutproxy_mode mode)
{
  (void)mode;
  subset_gap *g = ud;
  oq_db *db = oqt_connect(g->dsn);
  const char *p[2] = {g->other, g->item};
  long n = 0;
  oq_err e = oq_db_exec(db,
                        "UPDATE onceq_items SET claim = $1::uuid,"
                        " claimed_at = now() WHERE id = $2::uuid",
                        2, p, &n);
  if (e != OQ_OK || n != 1)
    OQT_FAIL("take the middle item: %s (%s), %ld rows", oq_strerror(e),
             oq_db_errmsg(db), n);
  oq_db_close(db);
  g->ran = 1;
}

/*
 * An oq_ack_batch of 3 items with their own results, whose DELETE fails on
 * the server (a trigger raises once) while the proxy drops the reply: the
 * outcome is unknown. Meanwhile the middle item is claimed by another
 * session. The reconciliation deletes the other two again, each with its
 * own result (it once passed the results of the whole list to the shorter
 * one, so the last item got the middle one's).
 */
static void run_batch_subset(void)
{
  char dsn[1024];
  snprintf(dsn, sizeof dsn, "%s", oqt_fresh_db("ambig_batch_subset", 1));
  oq_db *direct = oqt_connect(dsn);
  oqt_enqueue_n(direct, QUEUE, 3);
  oqt_exec(direct, "UPDATE onceq_items SET keep_result = true");
  oqt_exec(direct, "CREATE SEQUENCE ambig_once");
  oqt_exec(direct, "CREATE FUNCTION ambig_fail_once() RETURNS trigger "
                   "LANGUAGE plpgsql AS $$ BEGIN "
                   "IF nextval('ambig_once') = 1 THEN "
                   "RAISE EXCEPTION 'the first DELETE fails'; END IF; "
                   "RETURN NULL; END $$");
  oqt_exec(direct, "CREATE TRIGGER ambig_fail_once BEFORE DELETE ON "
                   "onceq_items FOR EACH STATEMENT "
                   "EXECUTE FUNCTION ambig_fail_once()");
  oq_session_opts so = session_opts();
  oq_session *other = NULL;
  ASSERT_OK(direct, oq_session_open(direct, &so, &other));
  cutproxy *px = cutproxy_start(up_host, up_port);
  if (!px)
    OQT_FAIL("cutproxy_start failed");
  char pdsn[2048];
  proxied_dsn(oqt_worker_dsn(dsn), cutproxy_port(px), pdsn, sizeof pdsn);
  oq_db *db = oqt_connect(pdsn);
  oq_session *s = NULL;
  ASSERT_OK(db, oq_session_open(db, &so, &s));
  const char *q[1] = {QUEUE};
  oq_item *items = NULL;
  size_t n = 0;
  ASSERT_OK(db, oq_claim(db, s, q, 1, 10, &items, &n));
  ASSERT_EQ(n, 3);
  subset_gap g = {.dsn = dsn};
  snprintf(g.item, sizeof g.item, "%s", items[1].id);
  snprintf(g.other, sizeof g.other, "%s", oq_session_id(other));
  cutproxy_set_match(px, "DELETE FROM onceq_items WHERE id = ANY");
  cutproxy_on_cut(px, take_middle, &g);
  cutproxy_arm(px, CUTPROXY_CUT_AFTER_MATCH);
  const char *ids[3] = {items[0].id, items[1].id, items[2].id};
  const char *res[3] = {"result 0", "result 1", "result 2"};
  const bool cut[3] = {false, false, true};
  oq_ack_opts ao = {.results = res, .results_truncated = cut};
  bool acked[3];
  size_t nacked = 0;
  oq_err e = oq_ack_batch(db, s, ids, 3, acked, &nacked, &ao);
  if (!cutproxy_wait_settled(px, 40000))
    OQT_FAIL("the cut connection did not settle within 40 s");
  printf("CASE %-15s (isolation %s): oq_ack_batch -> %s, acked %zu "
         "(%d %d %d), hook ran %d\n",
         "batch-subset", oqt_isolation(), oq_strerror(e), nacked, acked[0],
         acked[1], acked[2], g.ran);
  ASSERT_EQ(cutproxy_fired(px), 1);
  ASSERT_EQ(g.ran, 1);
  ASSERT_ERR(OQ_OK, e);
  ASSERT_EQ(nacked, 2);
  ASSERT(acked[0] && !acked[1] && acked[2]);
  for (int i = 0; i < 3; i += 2) {
    char want[64];
    snprintf(want, sizeof want, "result %d|%s", i, i == 2 ? "t" : "f");
    first_text ft = query1(direct,
                           "SELECT result || '|' || left(truncated::text, 1)"
                           " FROM onceq_results WHERE item_id = $1::uuid",
                           ids[i]);
    ASSERT_EQ(ft.rows, 1);
    ASSERT_STREQ(ft.val, want);
  }
  ASSERT_EQ(count1(direct, "SELECT count(*) FROM onceq_results", NULL), 2);
  ASSERT_EQ(count1(direct, "SELECT count(*) FROM onceq_items", NULL), 1);
  oq_items_free(items, n);
  ASSERT_OK(db, oq_session_end(db, s));
  oq_session_free(s);
  oq_session_free(other);
  oq_db_close(db);
  cutproxy_stop(px);
  oq_db_close(direct);
}

int main(int argc, char **argv)
{
  const char *admin = oqt_admin_dsn();
  find_upstream(admin);
  const char *only = argc > 1 ? argv[1] : NULL;
  int ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only && strcmp(only, cases[i].name) != 0)
      continue;
    run_case(&cases[i]);
    ran++;
  }
  if (!only || strcmp(only, "batch-landed") == 0) {
    run_batch_case("batch-landed", CUTPROXY_CUT_AFTER_COMMIT);
    ran++;
  }
  if (!only || strcmp(only, "batch-not-landed") == 0) {
    run_batch_case("batch-not-landed", CUTPROXY_CUT_BEFORE_COMMIT);
    ran++;
  }
  if (!only || strcmp(only, "batch-error-commit") == 0) {
    run_batch_case("batch-error-commit", CUTPROXY_ERROR_AFTER_COMMIT);
    ran++;
  }
  if (!only || strcmp(only, "batch-subset") == 0) {
    run_batch_subset();
    ran++;
  }
  if (!only || strcmp(only, "gave-up") == 0) {
    run_gave_up(false);
    ran++;
  }
  if (!only || strcmp(only, "batch-gave-up") == 0) {
    run_gave_up(true);
    ran++;
  }
  if (ran == 0)
    OQT_FAIL("no case named '%s'", only ? only : "");
  printf("PASS: %d case(s) under %s\n", ran, oqt_isolation());
  return 0;
}
