/*
 * dialect.c: every SQL statement libonceq sends, per engine. Text differs
 * between PostgreSQL and CockroachDB only where it must (the claims, the
 * migration lock); everything else is shared text that both engines accept.
 *
 * Parameters carry explicit casts so both engines infer the same types.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ITEM_COLS                                                              \
  "id::text, queue, payload::text, attempts, max_attempts, priority, "         \
  "(extract(epoch FROM created_at) * 1000000)::int8, "                         \
  "(extract(epoch FROM claimed_at) * 1000000)::int8, part, ordering_key"

/* A claim's identity beside the session: the claim's own timestamp, as the
 * claim statement returned it (the same expression on the same stored
 * value, so it compares exactly on both engines). Failure paths match it so
 * a stale retry cannot touch a newer claim of the same item (ABA). */
#define CLAIM_US "(extract(epoch FROM claimed_at) * 1000000)::int8"

/*
 * Ordering keys (schema v5, docs/enqueue.md "Ordering keys"): KEY_HEAD is
 * the predicate of every CockroachDB claim; PostgreSQL's keyed claims ask
 * the same two questions their own way (KEY_CANDIDATES below). A keyed
 * item may be claimed only while it is the head of its key -- no item of
 * its queue and key with a lower enqueue_seq is still in onceq_items,
 * claimed or not (a failed item waiting for its retry, or an exhausted one
 * waiting for the reap, still blocks; acked, dead-lettered and cancelled
 * ones are gone) -- and no item of its key is claimed (a lower enqueue_seq
 * committed after a higher one was claimed). So one statement claims at
 * most one item per key, and a concurrent claimer that skipped a locked
 * head finds the next item blocked by it. Both answers come from the
 * statement's snapshot: under READ COMMITTED, two claims running while a
 * lower enqueue_seq commits can each see a different head of one key
 * (docs/design.md section 5a). It only decides where to look: the ack is
 * still the claim-checked DELETE. On CockroachDB both probes are one
 * descent of a partial index (onceq_items_key_order,
 * onceq_items_key_claimed); an item without a key pays one NULL test. `t`
 * is the claimed table's name in the statement. The claimed-key probe
 * comes first, so a hash lookup or one short descent drops the rows of
 * keys already in flight before the second probe (AND keeps its written
 * order inside an OR).
 */
/*
 * Written so that stale statistics cannot change the plan's shape
 * (docs/benchmarks.md, "Plans that statistics cannot spoil"; an audit of
 * every PostgreSQL statement's generic plan in states where the
 * statistics were taken before the rows changed, confirmed at 20,000 and
 * 80,000 rows):
 *  - BY_ID_UNCLAIMED: where rows are found by id or ctid and only then
 *    checked unclaimed (the keyed arm's lock, the next-item statement's),
 *    the test says `(claim IS NULL) IS TRUE`, the same truth, from which
 *    the planner does not derive onceq_items_ready's predicate: it cannot
 *    walk that index and filter every ready row against the ids, which
 *    it did when the statistics said nearly nothing was ready (analyzed
 *    while everything was claimed, or after a drain without a VACUUM):
 *    6,052 -> 10,516 buffer reads, 26 -> 94 ms, for a next-item statement
 *    at 20,000 -> 80,000 rows, 5,608 and 6.2 ms by ctid. OQ__STILL_CLAIMED
 *    is the same device for `claim = $session`.
 *  - NO_KEY: the unkeyed walks' NULL test, as coalesce(..., false), whose
 *    selectivity the planner takes as a constant: analyzed while every
 *    item had a key, it costed `ordering_key IS NULL` at one row and
 *    sorted the whole queue instead of walking it in claim order (a claim
 *    of 10 at 20,000 rows: 40,021 rows read, 31 this way;
 *    it_lib_keyed_claim_plan). The value is the same (IS NULL is never
 *    NULL), on a rechecked row's newest version too.
 */
#define BY_ID_UNCLAIMED "(claim IS NULL) IS TRUE AND "
#define NO_KEY "coalesce(ordering_key IS NULL, false)"
#define KEY_HEAD(t)                                                            \
  " AND (" t ".ordering_key IS NULL OR (NOT EXISTS (SELECT 1"                  \
  " FROM onceq_items k WHERE k.queue = " t ".queue"                            \
  " AND k.ordering_key = " t ".ordering_key AND k.ordering_key IS NOT NULL"    \
  " AND k.claim IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM onceq_items k"      \
  " WHERE k.queue = " t ".queue AND k.ordering_key = " t ".ordering_key"       \
  " AND k.ordering_key IS NOT NULL AND k.enqueue_seq < " t ".enqueue_seq)))"

#define READY                                                                  \
  "claim IS NULL AND queue = ANY($2::text[]) AND run_at <= now() "             \
  "AND attempts < max_attempts" KEY_HEAD("onceq_items")

/*
 * PostgreSQL claim, around a per-queue predicate (q.name is the queue).
 * MATERIALIZED is required: without it the planner may inline the CTE and
 * evaluate the LIMIT subquery more than once, claiming more than $3 rows
 * (PostgreSQL docs, "WITH Queries": MATERIALIZED forces separate
 * evaluation). SKIP LOCKED lets concurrent claimers pass each other's rows
 * instead of queueing on them. One index-ordered scan per queue (LATERAL)
 * instead of queue = ANY($2): with ANY the planner cannot walk the ready
 * index in (priority, run_at) order and sorts every ready row (68 ms per
 * claim at 100k items vs 0.6 ms, measured by test/bench). A queue's extra
 * locked rows beyond the final LIMIT are unlocked when the statement
 * commits. The UPDATE finds the chosen rows by primary key
 * (= ANY(ARRAY(...)): an index scan); joined to the CTE instead, the
 * planner hashed the whole table per claim (12 ms of a 14 ms claim of 500
 * at 20,000 items, and a relation-wide predicate lock under SERIALIZABLE).
 * The outer SELECT hands the rows back in claim order.
 * The byte budget (the parameter `budget`, int8): b keeps the chosen rows
 * in claim order while the payload bytes taken before each row are under
 * it, so the row that crosses it is the last one and one row always comes
 * (a claimer holds bytes as well as items: issue 20). The size is
 * octet_length(payload::text), the text the RETURNING sends and the worker
 * holds; computed on the rows the LIMIT keeps, not on the table.
 */
/*
 * Queue controls (onceq_queues, schema v6; onceq/queues.h): the claims skip
 * a paused queue and a queue with a concurrency limit (max_running); claim.c
 * claims a limited queue in a transaction of its own (CLAIM_LIMITED below).
 * Controls only decide where a claim looks: the ack's claim check is
 * unchanged, so an item claimed before a pause finishes and is acknowledged
 * as usual. One primary-key probe per queue per claim; a queue without a
 * row (the common case) finds none and is claimed as before. PostgreSQL
 * filters the queue list before the per-queue scans (QUEUES_OPEN);
 * CockroachDB, whose claim is one UPDATE per queue, adds QUEUE_OPEN to its
 * WHERE clause.
 */
#define QUEUES_OPEN                                                            \
  "(SELECT name FROM unnest($2::text[]) AS n(name) WHERE NOT EXISTS"           \
  " (SELECT 1 FROM onceq_queues ctl WHERE ctl.queue = n.name"                  \
  " AND (ctl.paused OR ctl.max_running IS NOT NULL"                            \
  " OR ctl.rate_limit IS NOT NULL))) AS q0"
#define QUEUE_OPEN                                                             \
  " AND NOT EXISTS (SELECT 1 FROM onceq_queues ctl"                            \
  " WHERE ctl.queue = onceq_items.queue"                                       \
  " AND (ctl.paused OR ctl.max_running IS NOT NULL"                            \
  " OR ctl.rate_limit IS NOT NULL))"
#define QUEUES_ALL "unnest($2::text[]) AS q0(name)"

/*
 * Where a PostgreSQL claim looks, per queue (q.name), in one of two arms
 * chosen by q.keyed: does the queue hold any keyed item (one descent of
 * onceq_items_key_order; a one-time filter of each arm, so only one runs)?
 *  - no keyed item: the walk of onceq_items_ready in claim order above,
 *    with `ordering_key IS NULL` (NO_KEY) for KEY_HEAD: in this statement's
 *    snapshot the queue has no keyed row, and the NULL test also holds on
 *    a row's newer version that READ COMMITTED rechecks before locking it.
 *    (KEY_HEAD's subplans made the planner cost this walk at about 93,000
 *    at 20,000 items, near jit_above_cost: past it every claim paid some
 *    70 ms of JIT compilation.) A queue without keys pays the one probe.
 *  - keyed items: the candidates are gathered first (KEY_CANDIDATES) and
 *    then locked in claim order. The walk above, testing KEY_HEAD on each
 *    ready row, reads on to the end of the queue whenever the claim wants
 *    more items than there are free keys (at most one per key can come):
 *    19,000 rows, 30 to 60 ms a claim at 1,000 keys x 20 items
 *    (docs/benchmarks.md, "The keyed claim: a loose scan of the key heads").
 */
/*
 * The free key heads of a keyed queue, KEY_HEADS(ready, lo, hi): a loose
 * index scan of onceq_items_key_order (queue, part, ordering_key,
 * enqueue_seq; schema v11), one descent per key (a recursive CTE: each
 * step the first row of the next (part, key) pair, a row comparison the
 * index answers), so its cost follows the number of keys, not of items.
 * It walks only the slots [lo, hi): a --partitioned claim's own run ($4,
 * $5), so a worker that owns a quarter of the slots descends to a quarter
 * of the keys (before v11, with the key second, it walked every key of
 * the queue: 999 descents, 123 ms of an empty claim); any other claim
 * walks all of them, [0, 1024). A key's items share one part on
 * PostgreSQL (the trigger of schema v11 sets part from the key on every
 * INSERT and on every UPDATE that names the key or the part) and the
 * index holds only unclaimed rows (v12: a keyed claim adds no entry to
 * it; a key whose items are all claimed is not walked), so the row it
 * finds for a pair is its key's lowest enqueue_seq among the unclaimed
 * items, ready or not: KEY_HEAD's "no earlier item" once no item of the
 * key is claimed, which is the other test. It is a candidate if that row
 * is ready (`ready`, the arm's predicate, read on h's columns) and no item
 * of its key is claimed (KEYS_CLAIMED_PG:
 * NOT IN, which the planner does not turn into a per-row anti-join; the
 * key column is never NULL on either side). At most $3 heads, in (part,
 * key) order, so a claim of ten does not read a million keys.
 */
/*
 * The keys of queue q.name with an item claimed, PostgreSQL: KEY_HEAD's
 * claimed-key question, asked once per queue per claim (the CTE `busy` of
 * KEY_CANDIDATES, read by the front walk and the loose scan as a hashed
 * NOT IN) rather than per candidate. It reads the claimed rows of every
 * queue (onceq_items_claim), one heap visit each: 0.16 ms with 1,000 of
 * 20,000 keyed rows claimed, 2.9 ms with 50,000 unkeyed rows of another
 * queue claimed as well (EXPLAIN ANALYZE, private PostgreSQL 15). Until
 * schema v12 left the claimed rows out of onceq_items_key_order the
 * planner could read the queue's keyed rows there instead, which is
 * cheaper when far more items of other queues are in flight: with 20,000
 * keyed rows and 200,000 unkeyed ones of another queue claimed, a keyed
 * claim of 10 took 34 to 38 ms against 9 to 15 ms with v11. The trade:
 * every keyed claim of v12 writes one index entry fewer. Schema v9 dropped the
 * index this used to read (onceq_items_key_claimed, (queue, ordering_key) of
 * the claimed keyed rows): every keyed claim added an entry to it, in a few hot
 * pages, and the next-item statement below, its other reader, needs no such
 * probe. The keyed 20,000-item drain: 0.536 s against 0.605 s with the index
 * (docs/benchmarks.md, "One index fewer per keyed claim").
 */
#define KEYS_CLAIMED_PG                                                        \
  "SELECT k.ordering_key FROM onceq_items k WHERE k.claim IS NOT NULL"         \
  " AND k.queue = q.name AND k.ordering_key IS NOT NULL"
#define KEY_HEADS(ready, lo, hi)                                               \
  "SELECT kh.id FROM (WITH RECURSIVE h AS ("                                   \
  "(SELECT i.queue, i.part, i.ordering_key, i.id, i.claim, i.run_at,"          \
  " i.attempts, i.max_attempts FROM onceq_items i WHERE i.queue = q.name"      \
  " AND i.ordering_key IS NOT NULL AND i.claim IS NULL"                        \
  " AND i.part >= " lo " AND i.part < " hi                                     \
  " ORDER BY i.part, i.ordering_key, i.enqueue_seq LIMIT 1) UNION ALL"         \
  " SELECT nx.* FROM h CROSS JOIN LATERAL"                                     \
  " (SELECT i.queue, i.part, i.ordering_key, i.id, i.claim, i.run_at,"         \
  " i.attempts, i.max_attempts FROM onceq_items i WHERE i.queue = q.name"      \
  " AND i.ordering_key IS NOT NULL AND i.claim IS NULL"                        \
  " AND (i.part, i.ordering_key) > (h.part, h.ordering_key) AND i.part < " hi  \
  " ORDER BY i.part, i.ordering_key, i.enqueue_seq LIMIT 1) nx)"               \
  " SELECT h.id FROM h WHERE " ready                                           \
  " AND h.ordering_key NOT IN (SELECT b.ordering_key FROM busy b)"             \
  " LIMIT $3::int) kh"
/*
 * The keyed arm's candidates (ids; the = ANY that uses them drops
 * duplicates):
 *  - f: the heads among the keyed rows of the first 2 x $3 ready rows in
 *    claim order (KEY_HEAD's meaning on each: no claimed item of its key,
 *    from busy, and no earlier one): when it finds $3, they are the
 *    claim's (what an unbounded walk would have found, in the time it
 *    takes to read 2 x $3 rows: many keys with few items each). The key
 *    test is outside the walk's LIMIT, so the walk is never the key
 *    index's: with `ordering_key IS NOT NULL` inside it, that index (whose
 *    predicate the walk's implies, schema v12) let a generic plan made
 *    from statistics of an empty queue read and sort every keyed row of
 *    the claim's slots (an empty --partitioned claim at 20,000 keyed rows:
 *    6,531 buffer reads and 17 to 23 ms against 1,415 and 10 ms;
 *    keys_bench: docs/benchmarks.md, session 23). The window is 2 x $3,
 *    not $3, so that a few unkeyed rows or later items of busy keys at the
 *    front do not leave f short: then the loose scan below fills in with
 *    heads in key order, and a head further back in claim order (a higher
 *    priority than the loose scan's) would lose its turn. A front of
 *    unkeyed rows costs at most 2 x $3 rows read (the unkeyed arm claims
 *    them first in any case);
 *  - only when f found fewer: the free key heads (KEY_HEADS), at most $3
 *    in key order (with more free keys than that, f still puts the front
 *    of the queue, priority and run_at, first). Not when the window was
 *    not full either: then it held every ready row of the queue (and of
 *    the claim's slots), so every ready head, and f found them all. A
 *    queue of few items whose keys are all busy then costs its claims no
 *    descent per key; the loose scan walks every key with an unclaimed
 *    item;
 *  - the unkeyed ready items in claim order, locked as in the other arm
 *    (SKIP LOCKED: concurrent claimers pass each other). This walk passes
 *    the keyed rows with a NULL test each, no probe (about 3 ms at 20,000
 *    keyed rows; the planner may read them sequentially): what a keyed
 *    queue still pays per item; an index of the unkeyed ready rows would
 *    remove it, at the cost of one more index entry per unkeyed enqueue.
 */
/*
 * The front walk's "no earlier item" (KEY_HEAD's second question): f0 is
 * its key's first unclaimed row by enqueue_seq, one descent of
 * onceq_items_key_order (v11; unclaimed rows only, v12) in the part the
 * key's items share, and busy (above) says no item of its key is claimed.
 * Written as a comparison with a scalar subquery, which PostgreSQL always runs
 * as a subplan per row with f0's columns as its index condition, and not as NOT
 * EXISTS, which the planner turns into an anti-join and may then plan as a
 * nested loop that scans the key index whole for every row of f0. It did so in
 * the claim's generic plan whenever the statistics showed no keyed rows (a
 * queue analyzed before its first keyed items: ordering_key all NULL), a
 * state autovacuum may leave for minutes: 1.54 million buffer reads and
 * 513 ms for one claim of 1,000 at 20,000 keyed items, 65 thousand and 49
 * ms written this way (EXPLAIN ANALYZE, PostgreSQL 15; with fresh
 * statistics 18,900 before, 21,500 this way). Under four --partitioned
 * workers such claims outlived the 4 s statement deadline, and a 20,000-
 * item drain took 144 s (docs/benchmarks.md, "The keyed claim's plan
 * without keyed statistics"; test: it_lib_keyed_claim_plan). Equal, not
 * NOT EXISTS's "<": the row itself is in the subquery's snapshot.
 *
 * Only one row per key of the window can pass that descent: the one with
 * the key's lowest enqueue_seq in f0 (a key's head, its lowest unclaimed
 * seq, is also its lowest among f0's rows, which are unclaimed; f0 holds
 * one queue, and a key's items share one part, so the key alone names the
 * descent's range). So the descent runs only on those rows, (key, lowest
 * seq) pairs found by one hashed subplan over f0 (kept a subplan by IS
 * TRUE, so the planner cannot turn it into a join of its own choosing): f
 * is the same set, with one descent per key of the window instead of one
 * per keyed row. With many items per key the window is mostly later
 * items: a --partitioned claim of 1,000 on 251 keys x 20 items walked
 * 2,000 rows and made 2,000 descents; now 251 (EXPLAIN ANALYZE, PostgreSQL
 * 15: about 12,700 -> 7,500 buffers a claim; docs/benchmarks.md, "One
 * descent per key of the claim's window"; test: it_lib_keyed_claim_plan).
 */
#define KEY_WINDOW(ready)                                                      \
  " f0 AS MATERIALIZED (SELECT id, queue, part, ordering_key, enqueue_seq"     \
  " FROM onceq_items WHERE " ready " ORDER BY priority DESC, run_at"           \
  " LIMIT 2 * $3::int),"
#define KEY_FRONT                                                              \
  "SELECT f0.id FROM f0 WHERE f0.ordering_key IS NOT NULL"                     \
  " AND f0.ordering_key NOT IN (SELECT b.ordering_key FROM busy b)"            \
  " AND ((f0.ordering_key, f0.enqueue_seq) IN (SELECT m.ordering_key,"         \
  " min(m.enqueue_seq) FROM f0 m WHERE m.ordering_key IS NOT NULL"             \
  " GROUP BY m.ordering_key)) IS TRUE"                                         \
  " AND f0.enqueue_seq = (SELECT k.enqueue_seq FROM onceq_items k"             \
  " WHERE k.queue = f0.queue AND k.part = f0.part"                             \
  " AND k.ordering_key = f0.ordering_key AND k.ordering_key IS NOT NULL"       \
  " AND k.claim IS NULL ORDER BY k.enqueue_seq LIMIT 1)"
#define UNKEYED_READY(ready)                                                   \
  " SELECT u.id FROM (SELECT id FROM onceq_items WHERE " ready " AND " NO_KEY  \
  " ORDER BY priority DESC, run_at"                                            \
  " LIMIT $3::int FOR UPDATE SKIP LOCKED) u"
/* KEY_CANDIDATES's loose scan runs only after a full window (above) */
#define FULL_WINDOW " AND (SELECT count(*) FROM f0) >= 2 * $3::int"
#define KEY_CANDIDATES(ready, lo, hi)                                          \
  "WITH busy AS MATERIALIZED (" KEYS_CLAIMED_PG ")," KEY_WINDOW(               \
      ready) " f AS MATERIALIZED (" KEY_FRONT ") SELECT f.id FROM f"           \
             " UNION ALL " KEY_HEADS(                                          \
                 ready, lo,                                                    \
                 hi) " WHERE (SELECT count(*) FROM f) < $3::int" FULL_WINDOW   \
                     " UNION ALL" UNKEYED_READY(ready)
/* Both arms, for one queue q (LATERAL). The keyed arm locks its
 * candidates in claim order with SKIP LOCKED (a claimer passes the heads
 * another one holds and takes the next candidates), `ready` checked again
 * on a concurrently updated row's newest version before it is locked
 * (READ COMMITTED), as the walk does. Every keyed candidate was its key's
 * head, with no item of its key claimed, in this statement's snapshot:
 * KEY_HEAD's guarantee, found another way. Ordering decides only where to
 * look; the ack stays the claim-checked DELETE. */
#define CLAIM_ARMS(ready, ready_by_id, lo, hi)                                 \
  "SELECT * FROM (SELECT id, priority, run_at,"                                \
  " octet_length(payload::text) AS bytes FROM onceq_items"                     \
  " WHERE NOT q.keyed AND " ready " AND " NO_KEY                               \
  " ORDER BY priority DESC, run_at LIMIT $3::int FOR UPDATE SKIP LOCKED) p"    \
  " UNION ALL SELECT * FROM (SELECT id, priority, run_at,"                     \
  " octet_length(payload::text) AS bytes FROM onceq_items"                     \
  " WHERE q.keyed AND " ready_by_id " AND id = ANY (ARRAY(" KEY_CANDIDATES(    \
      ready, lo, hi) ")) ORDER BY priority DESC, run_at"                       \
                     " LIMIT $3::int FOR UPDATE SKIP LOCKED) k"

/*
 * The claim's session lock (schema v8, docs/design.md section 1): it
 * replaces the `claim` foreign key, which checked every claimed row
 * against onceq_sessions (about 15% of a 1,000-row claim,
 * test/bench/claim_fk_ab.sh). Every claim statement reads its own session
 * row once, only if it has not expired, with a shared lock, and divides by
 * the count: no live row, and the statement fails with 22012 (claim.c
 * reports OQ_ERR_SESSION_LOST) before it claims anything. The lock is what
 * orders a claim and a reap of its session (reaper.c):
 *  - the claim locked first: the reap's DELETE waits for the claim to
 *    commit, and its release, a later statement of the same transaction,
 *    sees and releases what the claim took;
 *  - the reap deleted first: the claim's lock waits for the reap's
 *    commit, then finds the row gone (READ COMMITTED rechecks a locked
 *    row's latest version), and the claim fails.
 * So no item stays claimed by a session whose row is gone (model:
 * test/model/onceq.pml, NOSESSIONLOCK; test: it_lib_claim_reap_race).
 * PostgreSQL takes FOR KEY SHARE: it conflicts with the DELETE but not
 * with the heartbeat's UPDATE of a non-key column (PostgreSQL docs,
 * "Explicit Locking", row-level lock modes). CockroachDB takes FOR SHARE
 * (v23.2+; FOR KEY SHARE is an alias there): under SERIALIZABLE, its
 * default, a claim that read the row and a reap that deletes it cannot both
 * commit out of order whatever the lock does (CockroachDB docs, "SELECT
 * ... FOR UPDATE": shared locks are best-effort under SERIALIZABLE, which
 * does not rely on locking for correctness); under READ COMMITTED the lock
 * is durable and orders them as on PostgreSQL.
 * PostgreSQL: a one-row CTE joined into the claim's scan (c below), so
 * no row is chosen without it. CockroachDB: an uncorrelated subquery in
 * the UPDATE's WHERE, planned and run once before the scan.
 */
#define SESSION_LIVE(lock)                                                     \
  "(SELECT 1 / count(*) AS live FROM (SELECT 1 FROM onceq_sessions"            \
  " WHERE id = $1::uuid AND heartbeated_at + expiry >= now() " lock ") l)"
#define SESSION_LIVE_CRDB " AND " SESSION_LIVE("FOR SHARE") " = 1"

#define SESSION_LIVE_PG SESSION_LIVE("FOR KEY SHARE")

/* Does queue q0 hold any unclaimed keyed item (the only kind a claim may
 * take)? One descent of onceq_items_key_order (unclaimed keyed rows,
 * v12): min() of its second column (part, v11), where min(ordering_key)
 * would now read the queue's every entry. */
#define QUEUE_KEYED                                                            \
  "(SELECT min(k0.part) FROM onceq_items k0"                                   \
  " WHERE k0.queue = q0.name AND k0.ordering_key IS NOT NULL"                  \
  " AND k0.claim IS NULL) IS NOT NULL"                                         \
  " AS keyed"
/* The chosen rows c (id, priority, run_at, bytes) under the byte budget,
 * claimed: b keeps them in claim order while the payload bytes before each
 * row are under the budget, u claims them. */
#define CLAIM_TAIL(budget)                                                     \
  " b AS (SELECT id FROM (SELECT id, sum(bytes) OVER (ORDER BY priority DESC," \
  " run_at, id ROWS UNBOUNDED PRECEDING) - bytes AS before FROM c) w"          \
  " WHERE before < " budget "::int8),"                                         \
  " u AS (UPDATE onceq_items i SET claim = $1::uuid, claimed_at = now(),"      \
  " attempts = i.attempts + 1"                                                 \
  " WHERE i.id = ANY (ARRAY(SELECT id FROM b))"                                \
  " RETURNING i.id::text AS id, i.queue, i.payload::text AS payload,"          \
  " i.attempts, i.max_attempts, i.priority,"                                   \
  " (extract(epoch FROM i.created_at) * 1000000)::int8 AS created_us,"         \
  " (extract(epoch FROM i.claimed_at) * 1000000)::int8 AS claimed_us,"         \
  " i.part, i.ordering_key, i.run_at)"
/* the columns a claim returns, in order (claim.c, item_from_row) */
#define CLAIM_ROW                                                              \
  " SELECT id, queue, payload, attempts, max_attempts, priority, created_us,"  \
  " claimed_us, part, ordering_key"

/*
 * A keyed queue's claim (CLAIM_KEYED_PG): both arms. On PostgreSQL it runs
 * only after the queue's key lock (OQ__SQL_KEY_LOCK, claim.c keyed_stmt),
 * in the lock's transaction, or in a limited queue's transaction after its
 * control row's lock (CLAIM_LIMITED): either lock is taken before the
 * claim's snapshot, so under READ COMMITTED the claims that may take a
 * key's head run one at a time per queue and each sees what the one
 * before it claimed. Without it, a claim whose snapshot predates the
 * commit of a key's lower enqueue_seq takes the key's next item while one
 * with a later snapshot takes that lower one, and both run
 * (it_lib_ordering, test_late_commit_race).
 */
#define CLAIM_KEYED_PG(queues, ready_in_queue, by_id, lo, hi, budget)          \
  "WITH s AS " SESSION_LIVE_PG ", c AS MATERIALIZED ("                         \
  " SELECT x.id, x.priority, x.run_at, x.bytes"                                \
  " FROM s CROSS JOIN (SELECT q0.name, " QUEUE_KEYED " FROM " queues ") AS q"  \
  " CROSS JOIN LATERAL (" CLAIM_ARMS(                                          \
      ready_in_queue, by_id, lo,                                               \
      hi) ") x"                                                                \
          " ORDER BY x.priority DESC, x.run_at LIMIT "                         \
          "$3::int)," CLAIM_TAIL(budget) CLAIM_ROW                             \
      " FROM u ORDER BY priority DESC, run_at"

/*
 * The claim every PostgreSQL claim starts with (CLAIM_OPEN_PG), one
 * statement with no lock but its session's: the walk of each queue that
 * holds no keyed item, and for each queue that does, a row with no id and
 * the queue's name, after the items. claim.c then claims those queues one
 * by one under their key locks (CLAIM_KEYED_PG). So a queue without keys
 * is claimed as before, in one statement, and pays its one probe.
 */
#define CLAIM_OPEN_PG(queues, ready_in_queue, budget)                          \
  "WITH s AS " SESSION_LIVE_PG ","                                             \
  " q AS MATERIALIZED (SELECT q0.name, " QUEUE_KEYED                           \
  " FROM s CROSS JOIN " queues "),"                                            \
  " c AS MATERIALIZED (SELECT x.id, x.priority, x.run_at, x.bytes FROM q"      \
  " CROSS JOIN LATERAL (SELECT id, priority, run_at,"                          \
  " octet_length(payload::text) AS bytes FROM onceq_items"                     \
  " WHERE NOT q.keyed AND " ready_in_queue " AND " NO_KEY                      \
  " ORDER BY priority DESC, run_at LIMIT $3::int FOR UPDATE SKIP LOCKED) x"    \
  " ORDER BY x.priority DESC, x.run_at LIMIT $3::int)," CLAIM_TAIL(budget)     \
      CLAIM_ROW " FROM (SELECT *, false AS marker FROM u UNION ALL SELECT"     \
                " NULL, q.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"     \
                " NULL, NULL, true FROM q WHERE q.keyed) r"                    \
                " ORDER BY marker, priority DESC, run_at"

#define IN_QUEUE_READY                                                         \
  "queue = q.name AND run_at <= now() AND attempts < max_attempts"
#define READY_IN_QUEUE "claim IS NULL AND " IN_QUEUE_READY
#define READY_IN_QUEUE_BY_ID BY_ID_UNCLAIMED IN_QUEUE_READY

static const char claim_pg[] = CLAIM_OPEN_PG(QUEUES_OPEN, READY_IN_QUEUE, "$4");
static const char claim_keyed_pg[] = CLAIM_KEYED_PG(
    QUEUES_OPEN, READY_IN_QUEUE, READY_IN_QUEUE_BY_ID, "0", "1024", "$4");

/* A limited queue's claim (claim.c, in the transaction that locked its
 * control row and counted its claimed items): one queue, $3 = the room
 * left under its limit. */
static const char claim_limited_pg[] = CLAIM_KEYED_PG(
    QUEUES_ALL, READY_IN_QUEUE, READY_IN_QUEUE_BY_ID, "0", "1024", "$4");
static const char claim_limited_crdb[] =
    "UPDATE onceq_items SET claim = $1::uuid, claimed_at = now(),"
    " attempts = attempts + 1"
    " WHERE " READY SESSION_LIVE_CRDB
    " ORDER BY priority DESC, run_at LIMIT $3::int"
    " RETURNING " ITEM_COLS;

/*
 * CockroachDB claim: one UPDATE with ORDER BY/LIMIT, sent as an implicit
 * transaction so the server can retry it itself (CockroachDB docs,
 * "UPDATE": ORDER BY and LIMIT are supported; "Transactions": automatic
 * retries of single-statement implicit transactions). It has no byte
 * budget (a running sum needs a window over a subquery, not this one
 * UPDATE): claim.c applies the budget between statements only, and the
 * count bounds each statement.
 */
static const char claim_crdb[] =
    "UPDATE onceq_items SET claim = $1::uuid, claimed_at = now(),"
    " attempts = attempts + 1"
    " WHERE " READY QUEUE_OPEN SESSION_LIVE_CRDB
    " ORDER BY priority DESC, run_at LIMIT $3::int"
    " RETURNING " ITEM_COLS;

/*
 * Partitioned claims (partition.c): the READY predicate plus one slot range
 * [$4, $5) (a contiguous run of parts) and, for orphan parts, "ready for
 * longer than $6 ms" ($6 = 0 for the session's own parts). Claimers in
 * different blocks never lock, or predicate-lock, each other's rows:
 *  - PostgreSQL walks onceq_items_ready (queue, priority DESC, run_at,
 *    enqueue_seq, part; schema v10) per queue in claim order, like the
 *    claim above, with the slot range as an Index Cond on the last key:
 *    other blocks' entries are skipped inside the index, without a heap
 *    visit, and the scan stops after $3 rows. (With part as the second key
 *    the range would be contiguous, but every claim would read and sort its
 *    whole block: 16 ms instead of 0.4 ms per claim at 20,000 ready items,
 *    8 sessions.)
 *  - CockroachDB scans its own span of onceq_items_part_ready (queue, part,
 *    priority DESC, run_at): sessions' spans are disjoint, so a claim never
 *    meets another block's intents.
 */
#define READY_IN_RANGE                                                         \
  "claim IS NULL AND queue = ANY($2::text[])"                                  \
  " AND run_at <= now() - $6::int8 * interval '1 millisecond'"                 \
  " AND attempts < max_attempts AND part >= $4::int4 AND part < "              \
  "$5::int4" KEY_HEAD("onceq_items")

#define IN_QUEUE_RANGE_READY                                                   \
  "queue = q.name AND run_at <= now() - $6::int8 * interval '1 millisecond'"   \
  " AND attempts < max_attempts AND part >= $4::int4 AND part < $5::int4"
#define READY_IN_QUEUE_RANGE "claim IS NULL AND " IN_QUEUE_RANGE_READY
#define READY_IN_QUEUE_RANGE_BY_ID BY_ID_UNCLAIMED IN_QUEUE_RANGE_READY
static const char claim_parts_pg[] =
    CLAIM_OPEN_PG(QUEUES_OPEN, READY_IN_QUEUE_RANGE, "$7");
static const char claim_parts_keyed_pg[] =
    CLAIM_KEYED_PG(QUEUES_OPEN, READY_IN_QUEUE_RANGE,
                   READY_IN_QUEUE_RANGE_BY_ID, "$4::int4", "$5::int4", "$7");

/* No SKIP LOCKED (it needs v24.1.5+/v24.2.3+): within one block only its
 * owner claims, so there is nobody to skip in steady state. */
static const char claim_parts_crdb[] =
    "UPDATE onceq_items SET claim = $1::uuid, claimed_at = now(),"
    " attempts = attempts + 1"
    " WHERE " READY_IN_RANGE QUEUE_OPEN SESSION_LIVE_CRDB
    " ORDER BY priority DESC, run_at LIMIT $3::int"
    " RETURNING " ITEM_COLS;

/*
 * The batched ack's next items (oq_ack_opts.next, ack_many.c; docs/design.md
 * 5a, "The ack's next item"), PostgreSQL only. Sent as a statement of its
 * own after the claim check of the same transaction: inside the check's
 * statement the deleted heads would still be visible. $2/$3 are the
 * acknowledged items' (queue, ordering_key) pairs, as the items carry them
 * (or read before the check, OQ__SQL_ACK_KEYS, for items built without
 * theirs). Per key, the key's first unclaimed row by
 * enqueue_seq (one descent of onceq_items_key_order, in the part every
 * item of the key has: onceq_key_slot, schema v11; the index holds only
 * unclaimed rows, v12; not "the row after the head": an enqueue may commit
 * later with a lower enqueue_seq) is claimed only if it is ready and has
 * attempts left, and its queue is neither
 * paused nor limited (QUEUES_OPEN's test: a limited queue's claims count
 * and take tokens in claim.c's own transaction, so they keep it). The
 * claim's session lock as a filter, not 1/count(*): no live session row
 * and nothing is claimed, but the ack (already checked) still commits.
 * The lock orders this claim and a reap as it does for the claim
 * (SESSION_LIVE). The rows are locked with SKIP LOCKED and `ready` is
 * checked again on their newest version, as the claim does, and the SET
 * list is the claim's. The lock and the UPDATE find each row by the ctid
 * of the version the descent read, a TID scan, instead of two descents of
 * the primary key (quiet PostgreSQL 15, 251 rows, 20 alternating runs:
 * 5.45 ms against 6.21, medians). A row updated by another transaction
 * after this statement's snapshot is left out: from PostgreSQL 14 its
 * recheck fails on the new version's ctid; on 13, whose TID recheck
 * passes, the lock takes the new version, whose ctid the UPDATE's snapshot
 * does not see. Either way the item stays unclaimed for a later claim, as
 * with SKIP LOCKED. It only decides where to look: the next item is
 * acknowledged by its own claim-checked DELETE later.
 * KEY_HEAD's other probe, "no item of the key is claimed", is not asked
 * here (it was until schema v9), so the first unclaimed row is the key's
 * first remaining one: the key's item this transaction deletes
 * was claimed by this session and its claim check passed, and while it
 * was claimed no claim took another item of its key (the claims ask that
 * probe), nor did another next-item statement (it follows the ack of an
 * item of the key, and there was none to ack but this one). So when the
 * check passed, nothing else of the key was claimed, and a claim's
 * snapshot sees the key busy either way: the deleted item still claimed
 * (before this commit) or the next one (after). A session lost in
 * between changes nothing: its item's check fails and the transaction,
 * this statement included, rolls back.
 */
#define NEXT_READY BY_ID_UNCLAIMED "run_at <= now() AND attempts < max_attempts"
static const char ack_next_pg[] =
    "WITH s AS (SELECT 1 FROM onceq_sessions WHERE id = $1::uuid"
    " AND heartbeated_at + expiry >= now() FOR KEY SHARE),"
    " h AS (SELECT DISTINCT a.queue, a.k FROM unnest($2::text[], $3::text[])"
    " AS a(queue, k) WHERE NOT EXISTS (SELECT 1 FROM onceq_queues ctl"
    " WHERE ctl.queue = a.queue AND (ctl.paused OR ctl.max_running IS NOT"
    " NULL OR ctl.rate_limit IS NOT NULL))),"
    " c AS MATERIALIZED (SELECT f.ctid FROM s CROSS JOIN h CROSS JOIN LATERAL"
    " (SELECT i.ctid, i.claim, i.run_at, i.attempts, i.max_attempts, i.part"
    " FROM onceq_items i WHERE i.queue = h.queue"
    " AND i.part = onceq_key_slot(h.k) AND i.ordering_key = h.k"
    " AND i.ordering_key IS NOT NULL AND i.claim IS NULL"
    " ORDER BY i.enqueue_seq LIMIT 1) f"
    " WHERE f.claim IS NULL AND f.run_at <= now()"
    " AND ($4::int4[] IS NULL OR f.part = ANY($4::int4[]))"
    " AND f.attempts < f.max_attempts),"
    " l AS MATERIALIZED (SELECT ctid FROM onceq_items"
    " WHERE ctid = ANY (ARRAY(SELECT ctid FROM c)) AND " NEXT_READY
    " FOR UPDATE SKIP LOCKED),"
    " u AS (UPDATE onceq_items i SET claim = $1::uuid, claimed_at = now(),"
    " attempts = i.attempts + 1"
    " WHERE i.ctid = ANY (ARRAY(SELECT ctid FROM l))"
    " RETURNING i.id::text AS id, i.queue, i.payload::text AS payload,"
    " i.attempts, i.max_attempts, i.priority,"
    " (extract(epoch FROM i.created_at) * 1000000)::int8 AS created_us,"
    " (extract(epoch FROM i.claimed_at) * 1000000)::int8 AS claimed_us,"
    " i.part, i.ordering_key, i.run_at)"
    " SELECT id, queue, payload, attempts, max_attempts, priority,"
    " created_us, claimed_us, part, ordering_key FROM u"
    " ORDER BY priority DESC, run_at";
/* CockroachDB: not asked (ack_many.c sends nothing); a statement that
 * claims nothing, should one be sent. */
static const char ack_next_crdb[] = "SELECT NULL WHERE false";

#define DEAD_COLS                                                              \
  "id, queue, payload, priority, attempts, max_attempts, unique_key, "         \
  "last_error, created_at, ordering_key"

/*
 * The ack family (docs/design.md section 1): the one claim check, built
 * here once and sent by oq_ack (OQ__SQL_ACK), oq_ack_batch
 * (OQ__SQL_ACK_BATCH) and oq_ack_many (OQ__SQL_ACK_MANY). Each is the
 * claim-checked DELETE plus, in the same statement, the history row
 * (history: true) and the result row of an item that asked for one
 * (keep_result): a result row exists if and only if that ack committed.
 * Every CTE is referenced, so both engines run it.
 */
#define ACK_DELETE(ids)                                                        \
  "WITH d AS (DELETE FROM onceq_items WHERE " ids " AND " OQ__STILL_CLAIMED    \
  " RETURNING id, queue, attempts, created_at, keep_result),"
/* The rows of d that write a row of their own (all of them when history
 * is asked, else those that keep their result), joined with the results
 * array and the "cut by the caller" flags, both parallel to $1. One entry
 * per id (a duplicate id must not write its row twice), result and flag
 * from the same entry: the greatest non-NULL result (res IS NULL sorts
 * false first on both engines, whose NULL orders differ). Most acks write
 * neither: then no row of d reaches the join, and in the plans PostgreSQL
 * chooses (d the join's outer side) the arrays are never unnested nor
 * sorted: a 1,000-item check took 7.11 ms instead of 8.19 (docs/
 * benchmarks.md, session 20). The counts and the returned ids read d. */
#define KEEP_X(results, cuts, history)                                         \
  " v AS (SELECT DISTINCT ON (u.id) u.id, u.res, u.cut"                        \
  " FROM unnest($1::uuid[], " results "::text[], " cuts "::bool[])"            \
  " AS u(id, res, cut) ORDER BY u.id, u.res IS NULL, u.res DESC),"             \
  " x AS (SELECT d.id, d.queue, d.attempts, d.created_at, d.keep_result,"      \
  " v.res, v.cut FROM d LEFT JOIN v ON v.id = d.id"                            \
  " WHERE " history "::bool OR d.keep_result),"
/*
 * The one writer of onceq_results rows, as a CTE named r over the rows of
 * `select` (item_id, queue, outcome, result, truncated): an ack writes
 * 'done', `onceq cancel` (oq_cancel) 'cancelled'. A later outcome of the
 * same id replaces the row.
 */
#define RESULT_ROW(select)                                                     \
  " r AS (INSERT INTO onceq_results (item_id, queue, outcome, result,"         \
  " truncated) " select " ON CONFLICT (item_id) DO UPDATE SET"                 \
  " outcome = excluded.outcome, result = excluded.result,"                     \
  " truncated = excluded.truncated, finished_at = now() RETURNING item_id)"
#define KEEP_WRITES(history)                                                   \
  " h AS (INSERT INTO onceq_done (item_id, queue, attempts, session_id,"       \
  " result, created_at)"                                                       \
  " SELECT id, queue, attempts, $2::uuid, res, created_at FROM x"              \
  " WHERE " history "::bool"                                                   \
  " ON CONFLICT (item_id) DO UPDATE SET done_at = now(),"                      \
  " session_id = excluded.session_id, result = excluded.result"                \
  " RETURNING item_id)," RESULT_ROW(                                           \
      "SELECT id, queue, 'done', left(res, 65536),"                            \
      " coalesce(length(res) > 65536 OR (cut AND res IS NOT NULL), false)"     \
      " FROM x WHERE keep_result")
#define KEEP_COUNTS_FROM                                                       \
  " FROM (SELECT count(*) FROM h) AS hn, (SELECT count(*) FROM r) AS rn"
#define KEEP_COUNTS                                                            \
  ", (SELECT count(*) FROM h) AS hn, (SELECT count(*) FROM r) AS rn"

/* OQ_RETENTION_BATCH as SQL text */
#define RETAIN_BATCH "1000"
_Static_assert(OQ_RETENTION_BATCH == 1000, "RETAIN_BATCH must match");

/* The end of a move from onceq_dead back to onceq_items (d: the dead rows
 * deleted), and "no live item holds dd's unique key". An item with an
 * ordering key goes back to the end of its key (a new enqueue_seq). */
#define RETRY_MOVE_TAIL                                                        \
  " RETURNING id, queue, payload, priority, max_attempts, unique_key,"         \
  " last_error, created_at, ordering_key)"                                     \
  " INSERT INTO onceq_items (id, queue, payload, priority, run_at,"            \
  " attempts, max_attempts, unique_key, last_error, created_at,"               \
  " ordering_key)"                                                             \
  " SELECT id, queue, payload, priority, now(), 0, max_attempts,"              \
  " unique_key, last_error, created_at, ordering_key FROM d"                   \
  " RETURNING id::text"
#define RETRY_KEY_FREE                                                         \
  " NOT EXISTS (SELECT 1 FROM onceq_items i"                                   \
  " WHERE i.unique_key = dd.unique_key)"

/* Items claimed by a session whose row is gone without a release (a row
 * deleted by hand, or by a version before schema v8 after its foreign key
 * was dropped): released by the reap. The join on o.c keeps it to the
 * orphan's claim: a row released and claimed again meanwhile (by a live
 * session) no longer matches when the UPDATE rechecks it.
 * PostgreSQL: every reap of every worker runs it, so it reads the claim
 * index as a loose scan (like KEY_HEADS: a recursive CTE, each step one
 * descent to the next distinct claim), once per session holding claims
 * rather than once per claimed item: 100,000 items claimed by 100
 * sessions, 10.6 -> 1.1 ms (docs/design.md section 4a). CockroachDB keeps
 * the plain DISTINCT, whose plan there is its own affair and untested
 * with the recursive form. */
static const char release_orphans_pg[] =
    "UPDATE onceq_items i SET claim = NULL FROM (WITH RECURSIVE c AS ("
    "(SELECT claim FROM onceq_items WHERE claim IS NOT NULL"
    " ORDER BY claim LIMIT 1) UNION ALL SELECT nx.claim FROM c"
    " CROSS JOIN LATERAL (SELECT claim FROM onceq_items"
    " WHERE claim IS NOT NULL AND claim > c.claim ORDER BY claim"
    " LIMIT 1) nx) SELECT c.claim AS c FROM c WHERE NOT EXISTS"
    " (SELECT 1 FROM onceq_sessions s WHERE s.id = c.claim)) o"
    " WHERE i.claim = o.c";
static const char release_orphans_crdb[] =
    "UPDATE onceq_items i SET claim = NULL FROM (SELECT DISTINCT"
    " claim AS c FROM onceq_items WHERE claim IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM onceq_sessions s"
    " WHERE s.id = onceq_items.claim)) o WHERE i.claim = o.c";

/*
 * oq_enqueue_many: one statement for a JSON array of payloads ($1), the
 * other parameters as OQ__SQL_ENQUEUE's, $7 the field that holds each
 * item's unique key (NULL: none), $8 the one that holds its ordering key
 * (NULL, or absent from an element: $9, the ordering key of every item, or
 * none). The elements' ordering_key column follows ORDER BY ord, so
 * enqueue_seq is array order. new_id in a MATERIALIZED CTE gives each
 * element its id before the insert, so the RETURNING rows map back to
 * elements (ord) even when ON CONFLICT skips some. It is the column's own
 * DEFAULT: PostgreSQL's time-ordered onceq_item_id() (schema v10),
 * CockroachDB's random gen_random_uuid().
 */
#define ENQUEUE_MANY(new_id)                                                   \
  "WITH src AS MATERIALIZED ("                                                 \
  " SELECT " new_id " AS id, t.ord, t.x"                                       \
  " FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(x, ord)),"       \
  " ins AS (INSERT INTO onceq_items (id, queue, payload, priority,"            \
  " run_at, max_attempts, unique_key, ordering_key)"                           \
  " SELECT id, $2::text, x, $3::int,"                                          \
  " coalesce($4::timestamptz,"                                                 \
  " now() + $5::int8 * interval '1 millisecond'),"                             \
  " $6::int, x ->> $7::text, coalesce(x ->> $8::text, $9::text)"               \
  " FROM src ORDER BY ord"                                                     \
  " ON CONFLICT (unique_key) DO NOTHING RETURNING id)"                         \
  " SELECT src.ord, src.id::text FROM src JOIN ins ON ins.id = src.id"         \
  " ORDER BY src.ord"

static const char *const shared[OQ__SQL__COUNT] = {
    /* Reconciling an ambiguous ack: an item that is gone was acknowledged
     * unless it is in onceq_dead (dead-lettered meanwhile) or has a
     * 'cancelled' row in onceq_results (`onceq cancel` writes one for every
     * item it deletes, and no onceq_dead row): either comes back as a row
     * with no claim, so it reads as lost. An ack's own result row says
     * 'done', never 'cancelled'. */
    [OQ__SQL_ITEM_CLAIM_OF] =
        "SELECT claim::text FROM onceq_items WHERE id = $1::uuid"
        " UNION ALL SELECT NULL FROM onceq_dead WHERE id = $1::uuid"
        " UNION ALL SELECT NULL FROM onceq_results WHERE item_id = $1::uuid"
        " AND outcome = 'cancelled'",
    [OQ__SQL_ITEMS_CLAIMED_BY_US] =
        "SELECT id::text, claim = $2::uuid FROM onceq_items"
        " WHERE id = ANY($1::uuid[])"
        " UNION ALL SELECT id::text, false FROM onceq_dead"
        " WHERE id = ANY($1::uuid[])"
        " UNION ALL SELECT item_id::text, false FROM onceq_results"
        " WHERE item_id = ANY($1::uuid[]) AND outcome = 'cancelled'",
    [OQ__SQL_FAIL_RETRY] =
        "UPDATE onceq_items SET claim = NULL, claimed_at = NULL,"
        " run_at = now() + $3::int8 * interval '1 millisecond',"
        " last_error = $4::text"
        " WHERE id = $1::uuid AND " OQ__STILL_CLAIMED
        " AND ($5::int8 IS NULL OR " CLAIM_US " = $5::int8)"
        " AND attempts < max_attempts",
    [OQ__SQL_FAIL_DEAD] =
        "WITH d AS (DELETE FROM onceq_items WHERE id = $1::uuid"
        " AND " OQ__STILL_CLAIMED " AND ($4::int8 IS NULL OR " CLAIM_US
        " = $4::int8)"
        " RETURNING " DEAD_COLS ")"
        " INSERT INTO onceq_dead (" DEAD_COLS ")"
        " SELECT id, queue, payload, priority, attempts, max_attempts,"
        " unique_key, $3::text, created_at, ordering_key FROM d",
    [OQ__SQL_RELEASE] =
        "UPDATE onceq_items SET claim = NULL, claimed_at = NULL,"
        " attempts = greatest(attempts - 1, 0)"
        " WHERE id = ANY($1::uuid[]) AND " OQ__STILL_CLAIMED
        " AND (id::text || '@' || " CLAIM_US "::text = ANY($3::text[])"
        " OR id::text || '@*' = ANY($3::text[]))",
    /* the reconciliation sweep: served by the index on claim */
    [OQ__SQL_CLAIMS_OF_SESSION] =
        "SELECT id::text, " CLAIM_US ", ordering_key IS NOT NULL"
        " FROM onceq_items WHERE claim = $1::uuid",
    [OQ__SQL_ENQUEUE] =
        "INSERT INTO onceq_items (queue, payload, priority, run_at,"
        " max_attempts, unique_key, ordering_key)"
        " VALUES ($1::text, $2::jsonb, $3::int,"
        " coalesce($4::timestamptz,"
        " now() + $5::int8 * interval '1 millisecond'), $6::int, $7::text,"
        " $8::text)"
        " ON CONFLICT (unique_key) DO NOTHING RETURNING id::text",
    [OQ__SQL_ENQUEUE_FIND_KEY] =
        "SELECT id::text FROM onceq_items WHERE unique_key = $1::text",
    /* ---- cancel (cancel.c): $1 the ids (uuid[]) ----
     * Lock the live ones: an ack in flight then waits for us, and loses. */
    [OQ__SQL_CANCEL_LOCK] =
        "SELECT id::text, 'live', claim::text FROM onceq_items"
        " WHERE id = ANY($1::uuid[]) FOR UPDATE",
    /* Say where the others are, for the caller's error message. */
    [OQ__SQL_CANCEL_CLASSIFY] =
        "SELECT u.id::text, CASE"
        " WHEN EXISTS (SELECT 1 FROM onceq_dead d WHERE d.id = u.id)"
        " THEN 'dead'"
        " WHEN EXISTS (SELECT 1 FROM onceq_done h WHERE h.item_id = u.id)"
        " THEN 'done' ELSE 'unknown' END, NULL"
        " FROM unnest($1::uuid[]) AS u(id)"
        " WHERE NOT EXISTS (SELECT 1 FROM onceq_items i WHERE i.id = u.id)",
    /* Every cancelled item gets its 'cancelled' row in onceq_results in
     * the same statement, whether it asked for its outcome (keep_result)
     * or not (cancel.h). The row's result is the item's last error, as a
     * dead letter keeps its own; retention (`--keep-results`) removes it
     * like any kept outcome. The count is of deleted items. */
    [OQ__SQL_CANCEL] =
        "WITH d AS (DELETE FROM onceq_items"
        " WHERE id = ANY($1::uuid[])"
        " RETURNING id, queue, keep_result, last_error)," RESULT_ROW(
            "SELECT id, queue, 'cancelled', last_error, false"
            " FROM d") " SELECT d.id FROM d,"
                       " (SELECT count(*) FROM r) AS rn",
    /* ---- retention (retention.c): $1 the age in ms; each subquery walks
     * the done_at / died_at / finished_at index from the oldest row,
     * OQ_RETENTION_BATCH rows at a time ---- */
    [OQ__SQL_RETAIN_DONE] =
        "DELETE FROM onceq_done WHERE item_id IN (SELECT item_id FROM"
        " onceq_done WHERE done_at < now() - $1::int8 * interval"
        " '1 millisecond' ORDER BY done_at LIMIT " RETAIN_BATCH ")",
    /* $2: true when every old row may go; false keeps the unnotified ones */
    [OQ__SQL_RETAIN_DEAD] =
        "DELETE FROM onceq_dead WHERE id IN (SELECT id FROM onceq_dead"
        " WHERE died_at < now() - $1::int8 * interval '1 millisecond'"
        " AND ($2::bool OR notified_at IS NOT NULL)"
        " ORDER BY died_at LIMIT " RETAIN_BATCH ")",
    /* kept outcomes (`onceq wait`, schema v3) */
    [OQ__SQL_RETAIN_RESULTS] =
        "DELETE FROM onceq_results WHERE item_id IN (SELECT item_id FROM"
        " onceq_results WHERE finished_at < now() - $1::int8 * interval"
        " '1 millisecond' ORDER BY finished_at LIMIT " RETAIN_BATCH ")",
    /* ---- retry of dead items (retry.c) ----
     * One statement moves them: a DELETE ... RETURNING from onceq_dead
     * feeds the INSERT, so an item is never in both tables, nor in
     * neither. Same id, payload, priority, max_attempts, unique_key and
     * created_at; attempts 0, run_at now, last_error kept. $1 the ids
     * (uuid[]). */
    [OQ__SQL_RETRY_IDS] = "WITH d AS (DELETE FROM onceq_dead dd WHERE"
                          " dd.id = ANY($1::uuid[])" RETRY_MOVE_TAIL,
    /* every dead item ($1: of that queue; NULL: all) whose unique key no
     * live item holds */
    [OQ__SQL_RETRY_ALL] =
        "WITH d AS (DELETE FROM onceq_dead dd"
        " WHERE ($1::text IS NULL OR dd.queue = $1::text) AND" RETRY_KEY_FREE
            RETRY_MOVE_TAIL,
    /* the ones OQ__SQL_RETRY_ALL left dead: a live item holds their key */
    [OQ__SQL_RETRY_KEPT] = "SELECT count(*) FROM onceq_dead dd"
                           " WHERE ($1::text IS NULL OR dd.queue = $1::text) "
                           "AND NOT" RETRY_KEY_FREE,
    /* Explicit ids: lock the dead rows, then find what would block each
     * one: (id, where, the live item holding its unique key, the key) */
    [OQ__SQL_RETRY_LOCK] =
        "SELECT id FROM onceq_dead WHERE id = ANY($1::uuid[]) FOR UPDATE",
    [OQ__SQL_RETRY_CHECK] =
        "SELECT u.id::text,"
        " CASE WHEN dd.id IS NOT NULL THEN 'dead'"
        " WHEN EXISTS (SELECT 1 FROM onceq_items i WHERE i.id = u.id)"
        " THEN 'live'"
        " WHEN EXISTS (SELECT 1 FROM onceq_done h WHERE h.item_id = u.id)"
        " THEN 'done' ELSE 'unknown' END,"
        " (SELECT i.id::text FROM onceq_items i"
        " WHERE i.unique_key = dd.unique_key),"
        " dd.unique_key"
        " FROM unnest($1::uuid[]) AS u(id)"
        " LEFT JOIN onceq_dead dd ON dd.id = u.id",
    [OQ__SQL_SESSION_OPEN] =
        "INSERT INTO onceq_sessions (expiry, hostname, pid, version, queues)"
        " VALUES ($1::int8 * interval '1 millisecond', $2::text, $3::int,"
        " $4::text, $5::text) RETURNING id::text",
    /* the end of a session and the reap: the DELETE, then (same
     * transaction, a statement of its own) OQ__SQL_RELEASE_SESSIONS */
    [OQ__SQL_SESSION_END] = "DELETE FROM onceq_sessions WHERE id = $1::uuid"
                            " RETURNING id::text",
    /* an expired row is never revived (docs/design.md §4a): 0 rows means lost
     * even if no reaper has deleted it yet */
    [OQ__SQL_HEARTBEAT] = "UPDATE onceq_sessions SET heartbeated_at = now()"
                          " WHERE id = $1::uuid"
                          " AND heartbeated_at + expiry >= now()",
    /* now() is the database's clock: worker clocks never decide expiry */
    [OQ__SQL_REAP_SESSIONS] = "DELETE FROM onceq_sessions"
                              " WHERE heartbeated_at + expiry < now()"
                              " RETURNING id::text",
    /* Release every item the deleted sessions $1 (uuid[]) held, in the
     * transaction that deleted them (schema v8: no foreign key does it).
     * A statement of its own, after the DELETE: the DELETE waited for the
     * claims that had locked those rows (SESSION_LIVE), and under READ
     * COMMITTED this statement's snapshot, taken after, sees their items
     * (one statement with the DELETE in a CTE would read them with the
     * snapshot from before the wait). Only claim is cleared, as the foreign
     * key's SET NULL did: the attempt stays counted. */
    [OQ__SQL_RELEASE_SESSIONS] = "UPDATE onceq_items SET claim = NULL"
                                 " WHERE claim = ANY($1::uuid[])",
    /* matches the onceq_items_exhausted partial index predicate */
    [OQ__SQL_REAP_EXHAUSTED] =
        "WITH d AS (DELETE FROM onceq_items"
        " WHERE claim IS NULL AND attempts >= max_attempts"
        " RETURNING " DEAD_COLS ")"
        " INSERT INTO onceq_dead (" DEAD_COLS ")"
        " SELECT id, queue, payload, priority, attempts, max_attempts,"
        " unique_key, coalesce(last_error || '; ', '') ||"
        " 'abandoned: its session expired during attempt ' || attempts,"
        " created_at, ordering_key FROM d",
    /* ---- partitions (partition.c) ---- */
    [OQ__SQL_PARTS_JOIN] = "UPDATE onceq_sessions SET partitioned = true"
                           " WHERE id = $1::uuid",
    [OQ__SQL_PARTS_LEAVE] = "UPDATE onceq_sessions SET partitioned = false"
                            " WHERE id = $1::uuid",
    /* one consistent read per round: P, the live members, the owners */
    [OQ__SQL_PARTS_SNAPSHOT] =
        "SELECT 'P'::text, value, NULL::int8, NULL::text FROM onceq_settings"
        " WHERE key = 'partitions'"
        " UNION ALL SELECT 'M'::text, id::text, NULL::int8, queues"
        " FROM onceq_sessions WHERE partitioned"
        " AND heartbeated_at + expiry >= now()"
        " UNION ALL SELECT 'O'::text, session_id::text, part::int8, NULL::text"
        " FROM onceq_session_parts",
    [OQ__SQL_PARTS_TAKE] =
        "INSERT INTO onceq_session_parts (part, session_id)"
        " SELECT t.p, $1::uuid FROM unnest($2::int4[]) AS t(p)"
        " ON CONFLICT (part) DO NOTHING RETURNING part",
    [OQ__SQL_PARTS_GIVE_UP] = "DELETE FROM onceq_session_parts"
                              " WHERE session_id = $1::uuid"
                              " AND part = ANY($2::int4[])",
    [OQ__SQL_PARTS_GIVE_UP_ALL] = "DELETE FROM onceq_session_parts"
                                  " WHERE session_id = $1::uuid",
    /* the slots of our in-flight items (onceq_items_claim index) */
    [OQ__SQL_PARTS_INFLIGHT] =
        "SELECT DISTINCT part FROM onceq_items WHERE claim = $1::uuid",
    [OQ__SQL_PARTS_GET] =
        "SELECT value FROM onceq_settings WHERE key = 'partitions'",
    [OQ__SQL_PARTS_SET] =
        "INSERT INTO onceq_settings (key, value) VALUES ('partitions',"
        " $1::text) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [OQ__SQL_PARTS_OWNERS] = "SELECT sp.part, s.id::text, s.hostname, s.pid,"
                             " s.heartbeated_at + s.expiry >= now()"
                             " FROM onceq_session_parts sp"
                             " JOIN onceq_sessions s ON s.id = sp.session_id",
    [OQ__SQL_PARTS_MEMBERS] =
        "SELECT count(*) FROM onceq_sessions WHERE partitioned"
        " AND heartbeated_at + expiry >= now()",
    /* per slot; the report folds slots into parts */
    [OQ__SQL_PARTS_SLOT_COUNTS] =
        "SELECT part, sum(CASE WHEN claim IS NULL AND run_at <= now()"
        " AND attempts < max_attempts THEN 1 ELSE 0 END)::int8,"
        " sum(CASE WHEN claim IS NOT NULL THEN 1 ELSE 0 END)::int8"
        " FROM onceq_items GROUP BY part",
    [OQ__SQL_MIGRATIONS_TABLE] =
        "CREATE TABLE IF NOT EXISTS onceq_migrations ("
        " version INT PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    [OQ__SQL_MIGRATIONS_VERSION] =
        "SELECT coalesce(max(version), 0) FROM onceq_migrations",
    [OQ__SQL_MIGRATIONS_RECORD] =
        "INSERT INTO onceq_migrations (version, name) VALUES ($1::int,"
        " $2::text) ON CONFLICT (version) DO NOTHING",
    /* ---- the ack family (see ACK_DELETE) ----
     * One item: $1 the id, $3 its result (text, NULL: none), $4 history,
     * $5 the result was cut by the caller (bool). */
    [OQ__SQL_ACK] = ACK_DELETE(
        "id = $1::uuid") " x AS (SELECT d.id, d.queue, d.attempts,"
                         " d.created_at, d.keep_result, $3::text AS res,"
                         " $5::bool AS cut FROM d)," KEEP_WRITES(
                             "$4") " SELECT x.id::text FROM x" KEEP_COUNTS,
    /* A batch, acked item by item: $1 the ids, $3 results parallel to $1
     * (text[], NULL entries: none), $4 history, $5 their cut flags
     * (bool[]). */
    [OQ__SQL_ACK_BATCH] =
        ACK_DELETE("id = ANY($1::uuid[])") KEEP_X("$3", "$5", "$4")
            KEEP_WRITES("$4") " SELECT d.id::text FROM d" KEEP_COUNTS,
    /* oq_ack_many, all or nothing: it fails the whole transaction unless it
     * deleted every id sent ($3 of them), so no handler effect of a batch
     * commits without its item's ack; $4 results (text[]), $5 history, $6
     * the results' cut flags (bool[]). The divisor depends on count(*), so
     * no planner folds it into a constant error (a CASE does not protect a
     * constant subexpression, PostgreSQL docs "Expression Evaluation
     * Rules"); 1/0 is SQLSTATE 22012 on both engines. */
    [OQ__SQL_ACK_MANY] =
        ACK_DELETE("id = ANY($1::uuid[])") KEEP_X("$4", "$6", "$5")
            KEEP_WRITES("$5") " SELECT 1 / (CASE WHEN"
                              " (SELECT count(*) FROM d)"
                              " = $3::int8"
                              " THEN 1 ELSE 0 END)" KEEP_COUNTS_FROM,
    /* the keys of a batch's items still claimed by the session, read in
     * its transaction before the check deletes them (ack_many.c) */
    [OQ__SQL_ACK_KEYS] = "SELECT DISTINCT queue, ordering_key FROM onceq_items"
                         " WHERE id = ANY($1::uuid[]) AND " OQ__STILL_CLAIMED
                         " AND (ordering_key IS NOT NULL) IS TRUE",
    /* a waiter asks for the outcome of live items it waits for */
    [OQ__SQL_WAIT_OPT_IN] = "UPDATE onceq_items SET keep_result = true"
                            " WHERE id = ANY($1::uuid[]) AND NOT keep_result",
    /* one statement, one snapshot: live, result row, dead, history */
    [OQ__SQL_WAIT_STATE] =
        "SELECT w.id::text, i.id IS NOT NULL, r.outcome, r.result,"
        " coalesce(r.truncated, false), dd.id IS NOT NULL, dd.last_error,"
        " dd.attempts, dn.item_id IS NOT NULL, dn.result"
        " FROM unnest($1::uuid[]) AS w(id)"
        " LEFT JOIN onceq_items i ON i.id = w.id"
        " LEFT JOIN onceq_results r ON r.item_id = w.id"
        " LEFT JOIN onceq_dead dd ON dd.id = w.id"
        " LEFT JOIN onceq_done dn ON dn.item_id = w.id",
    /* ---- queue controls (queues.c): $1 the queue ---- */
    [OQ__SQL_QUEUE_PAUSE] =
        "INSERT INTO onceq_queues (queue, paused) VALUES ($1::text, $2::bool)"
        " ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused,"
        " updated_at = now()",
    [OQ__SQL_QUEUE_SET_LIMIT] =
        "INSERT INTO onceq_queues (queue, max_running) VALUES ($1::text,"
        " $2::int4) ON CONFLICT (queue) DO UPDATE SET max_running ="
        " excluded.max_running, updated_at = now()",
    /* the limited queues a claim must take in their own transaction */
    [OQ__SQL_QUEUE_LIMITED] =
        "SELECT queue FROM onceq_queues"
        " WHERE (max_running IS NOT NULL OR rate_limit IS NOT NULL)"
        " AND NOT paused"
        " ORDER BY queue LIMIT 1000",
    /* Lock a limited queue's control row for the claim transaction: an
     * UPDATE, so that under REPEATABLE READ/SERIALIZABLE a second claimer
     * fails with 40001 and runs again instead of counting from an older
     * snapshot; under READ COMMITTED the next statement's snapshot sees
     * the first claimer's committed claims. */
    [OQ__SQL_QUEUE_LIMIT_LOCK] =
        "UPDATE onceq_queues SET rate_tokens = CASE WHEN rate_limit IS NULL"
        " THEN NULL ELSE least(rate_limit::float8, coalesce(rate_tokens,"
        " rate_limit::float8) + rate_limit * greatest(0::float8,"
        " extract(epoch FROM now() - coalesce(rate_at, now()))::float8)"
        " / extract(epoch FROM rate_interval)::float8) END,"
        " rate_at = CASE WHEN rate_limit IS NULL THEN NULL ELSE"
        " greatest(now(), coalesce(rate_at, now())) END"
        " WHERE queue = $1::text AND NOT paused"
        " AND (max_running IS NOT NULL OR rate_limit IS NOT NULL)"
        " RETURNING coalesce(max_running, -1),"
        " coalesce(floor(rate_tokens)::int8, -1)",
    /* the rate limit's tokens taken by the claim just made ($2) */
    [OQ__SQL_QUEUE_RATE_TAKE] =
        "UPDATE onceq_queues SET rate_tokens = rate_tokens - $2::int8"
        " WHERE queue = $1::text AND rate_limit IS NOT NULL",
    [OQ__SQL_QUEUE_SET_RATE] =
        "INSERT INTO onceq_queues (queue, rate_limit, rate_interval)"
        " VALUES ($1::text, $2::int4, $3::int8 * interval '1 millisecond')"
        " ON CONFLICT (queue) DO UPDATE SET rate_limit = excluded.rate_limit,"
        " rate_interval = excluded.rate_interval, rate_tokens = NULL,"
        " rate_at = NULL, updated_at = now()",
    /* claimed items of the queue, of live and not yet reaped sessions */
    [OQ__SQL_QUEUE_RUNNING] = "SELECT count(*) FROM onceq_items"
                              " WHERE claim IS NOT NULL AND queue = $1::text",
    /* paused first (oq_queue_paused_get reads only it), then the limits
     * as oq_queue_controls_get gives them: -1 for none */
    [OQ__SQL_QUEUE_GET] =
        "SELECT paused, coalesce(max_running, -1),"
        " coalesce(rate_limit, -1), coalesce((extract(epoch FROM"
        " rate_interval) * 1000)::int8, -1)"
        " FROM onceq_queues WHERE queue = $1::text",
    [OQ__SQL_ENQUEUE_KEEP_RESULT] = "UPDATE onceq_items SET keep_result = true"
                                    " WHERE id = $1::uuid",
};

/* Only PostgreSQL has advisory locks; on CockroachDB migrations rely on
 * idempotent DDL instead. The key is "onceq" in ASCII. */
static const char migrate_lock_pg[] = "SELECT pg_advisory_lock(465793504625)";
static const char migrate_unlock_pg[] =
    "SELECT pg_advisory_unlock(465793504625)";

/* A keyed queue's key locks, sent ahead of the queue's keyed claim in one
 * implicit transaction (claim.c, keyed_stmt; db_tx.c,
 * oq__db_claim_next_locked), or as a statement of its own before it in a
 * transaction (a limited queue's, or a caller's): transaction-level
 * advisory locks, released at commit or rollback, one per stripe of
 * OQ_KEY_LOCK_SLOTS slots that the claim looks in ($3..$4; all of them for
 * a claim that is not partitioned), each on the pair (0x6f6e6300, "onc"
 * in ASCII, plus the stripe; hashtext($2), $2 the queue), taken in
 * ascending order (generate_series's), so two claimers never wait for
 * each other in a cycle. On PostgreSQL all of a key's items lie in one
 * slot (the onceq_items_key_part trigger), so any two claims that could
 * both take an item of one key share that slot's stripe, while
 * partitioned members whose blocks lie in different stripes do not wait
 * for each other. Two queues sharing a hash only share the wait. Only
 * under READ COMMITTED, where each statement takes its snapshot after the
 * locks: under SERIALIZABLE the snapshot is the transaction's and would
 * predate the wait, so a waiter would only meet 40001 once the holder
 * commits; there the database's own check stops two such claims. $1: the
 * claim's prelude settings (db_tx.c): 'sync' or 'async' (a commit without
 * waiting for the WAL flush) set the claim's plan settings
 * (OQ__PLAN_SETTINGS_LIST); NULL (inside a transaction) changes nothing but
 * the locks. CockroachDB never sends it: its claims do not name keyed queues.
 */
#define UNLESS_NULL(setting, value)                                            \
  "set_config('" setting "', CASE WHEN $1::text IS NULL THEN current_setting"  \
  "('" setting "') ELSE '" value "' END, true)"
#define COMMIT_AS_ASKED                                                        \
  "set_config('synchronous_commit', CASE WHEN $1::text = 'async' THEN 'off'"   \
  " ELSE current_setting('synchronous_commit') END, true)"
static const char key_lock_pg[] =
    "SELECT (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(1869505280 +"
    " g.s, hashtext($2::text)) FROM generate_series($3::int, $4::int) AS g(s)"
    " WHERE current_setting('transaction_isolation') = 'read committed') "
    "l), " OQ__PLAN_SETTINGS_LIST(UNLESS_NULL) ", " COMMIT_AS_ASKED;

const char *oq__sql(oq_engine engine, oq__stmt stmt)
{
  bool crdb = engine == OQ_ENGINE_COCKROACH;
  switch (stmt) {
  case OQ__SQL_CLAIM:
    return crdb ? claim_crdb : claim_pg;
  case OQ__SQL_CLAIM_LIMITED:
    return crdb ? claim_limited_crdb : claim_limited_pg;
  case OQ__SQL_CLAIM_PARTS:
    return crdb ? claim_parts_crdb : claim_parts_pg;
  case OQ__SQL_CLAIM_KEYED:
    return crdb ? claim_crdb : claim_keyed_pg;
  case OQ__SQL_CLAIM_PARTS_KEYED:
    return crdb ? claim_parts_crdb : claim_parts_keyed_pg;
  case OQ__SQL_KEY_LOCK:
    return crdb ? "SELECT NULL WHERE false" : key_lock_pg;
  case OQ__SQL_ENQUEUE_MANY:
    return crdb ? ENQUEUE_MANY("gen_random_uuid()")
                : ENQUEUE_MANY("onceq_item_id()");
  case OQ__SQL_RELEASE_ORPHANS:
    return crdb ? release_orphans_crdb : release_orphans_pg;
  case OQ__SQL_ACK_NEXT:
    return crdb ? ack_next_crdb : ack_next_pg;
  case OQ__SQL_MIGRATE_LOCK:
    return crdb ? "SELECT 1" : migrate_lock_pg;
  case OQ__SQL_MIGRATE_UNLOCK:
    return crdb ? "SELECT 1" : migrate_unlock_pg;
  default:
    break;
  }
  if ((int)stmt < 0 || stmt >= OQ__SQL__COUNT || !shared[stmt])
    return "SELECT 'onceq: unknown statement'::int";
  return shared[stmt];
}

oq_engine oq__dialect_detect(const char *crdb_version)
{
  return (crdb_version && *crdb_version) ? OQ_ENGINE_COCKROACH
                                         : OQ_ENGINE_POSTGRES;
}

char *oq__text_array(const char *const *elems, size_t n)
{
  size_t len = 3;
  for (size_t i = 0; i < n; i++)
    len += 2 * strlen(elems[i]) + 3;
  char *out = malloc(len);
  if (!out)
    return NULL;
  size_t p = 0;
  out[p++] = '{';
  for (size_t i = 0; i < n; i++) {
    if (i)
      out[p++] = ',';
    out[p++] = '"';
    for (const char *c = elems[i]; *c; c++) {
      if (*c == '"' || *c == '\\')
        out[p++] = '\\';
      out[p++] = *c;
    }
    out[p++] = '"';
  }
  out[p++] = '}';
  out[p] = '\0';
  return out;
}
