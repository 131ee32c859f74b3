/*
 * partition.h: static partition assignment (docs/design.md §5): which part of
 * the keyspace a session claims from, so that claims stop contending.
 *
 * Terms:
 *  - slot: onceq_items.part, 0..1023, random at insert time (a column
 *    default, so a plain SQL INSERT from any language gets one);
 *  - P: the cluster-wide partition count, 1..1024, in onceq_settings
 *    key 'partitions' (OQ_PARTS_DEFAULT while it is not set);
 *  - part: 0..P-1. Slot s belongs to part s * P / 1024, so part p is the
 *    slot range [ceil(p * 1024 / P), ceil((p + 1) * 1024 / P)) and a
 *    contiguous run of parts is one contiguous slot range: one claim
 *    statement with part >= lo AND part < hi as an index condition;
 *  - member: a live session (heartbeated_at + expiry >= now()) that takes
 *    part in the assignment (onceq_sessions.partitioned, set by its first
 *    round). Sessions that claim with oq_claim are not members;
 *  - block: member i of k, ordered by id, is assigned the parts
 *    [i * P / k, (i + 1) * P / k). With k > P some blocks are empty: those
 *    sessions own nothing and stay idle but alive (hot standby);
 *  - owned: a row in onceq_session_parts (part is the key: one owner);
 *  - claimable: owned, inside the current block, under the current P;
 *  - draining: owned but outside the block: never claimed from again, and
 *    given up (the row deleted) only once none of this session's claimed
 *    items lies in that part's slots, i.e. the in-flight ones have been
 *    acknowledged, failed or released;
 *  - orphan: a part < P with no owner, or whose owner is not live. Its
 *    items that have been ready for longer than orphan_after_ms may be
 *    claimed by any member, so nothing waits forever on a broken
 *    assignment.
 *
 * A round (oq_parts_rebalance, on the poll cadence) is one transaction (at
 * READ COMMITTED on PostgreSQL: it only decides where to look): it reads
 * P, the members and the ownership rows in one statement, gives up drained
 * parts and takes the free parts of its block with INSERT ... ON CONFLICT
 * (part) DO NOTHING. A reaped session's rows go with it (ON DELETE CASCADE).
 * When P changes, every member adopts it on its next round: a row always means
 * its part under the current P, so rows inside the new block are kept and
 * the rest drain (in the new P's slots) and are given up. Until every
 * member has adopted the new P, two of them may briefly claim in the same
 * slots: contention, not a correctness problem.
 *
 * Ownership only decides where to look. The ack's claim = session check
 * alone decides who may acknowledge, so a stale or transient double view
 * of ownership costs contention, never a duplicate ack.
 *
 * Thread safety: an oq_parts belongs to one thread (the claim loop) and is
 * used with that thread's db. The pure functions may be called anywhere.
 */
#ifndef ONCEQ_PARTITION_H
#define ONCEQ_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include "onceq/db.h"
#include "onceq/item.h"
#include "onceq/session.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_PARTS_SLOTS 1024            /* onceq_items.part is 0..1023 */
#define OQ_PARTS_MAX OQ_PARTS_SLOTS    /* P is at most one part per slot */
#define OQ_PARTS_DEFAULT 64            /* P while the setting is absent */
#define OQ_PARTS_ORPHAN_AFTER_MS 30000 /* default orphan_after_ms */

/* ---- the mapping (pure) ---------------------------------------------- */

/* The part of slot (0..1023) when there are P parts: slot * P / 1024.
 * Blocks: never (pure, like the two below). */
int oq_parts_of_slot(int slot, int partitions);
/* The slots [*slot_lo, *slot_hi) of parts [part_lo, part_hi); parts >= P
 * have none (the range ends at 1024). */
void oq_parts_slots(int part_lo, int part_hi, int partitions, int *slot_lo,
                    int *slot_hi);
/* The block of member index (0-based) of members: parts [*lo, *hi), empty
 * (lo == hi) when there are more members than parts. */
void oq_parts_block(int index, int members, int partitions, int *lo, int *hi);

/* ---- the cluster-wide setting ---------------------------------------- */

/* *partitions gets P (OQ_PARTS_DEFAULT when unset); *is_set (may be NULL)
 * whether onceq_settings holds it. A stored value outside 1..1024 gives
 * OQ_ERR_CONFIG naming `onceq parts set`.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy. */
OQ_MUST_CHECK oq_err oq_parts_get(oq_db *db, int *partitions, bool *is_set);
/* Store P (1..1024, else OQ_ERR_INVALID). Members adopt it on their next
 * round.
 * Blocks: one statement, rerun on restarts; bounded by the deadline and the
 * retry policy. */
OQ_MUST_CHECK oq_err oq_parts_set(oq_db *db, int partitions);

/* ---- a session's assignment ------------------------------------------ */

typedef struct oq_parts oq_parts;

typedef struct oq_parts_opts {
  int orphan_after_ms; /* 0: OQ_PARTS_ORPHAN_AFTER_MS; < 0: no orphans */
} oq_parts_opts;

/* A session's partition state (opts may be NULL). Free with
 * oq_parts_free. It follows whichever session it is used with: a new
 * session id (a worker re-registered) starts from nothing.
 * Blocks: never. */
OQ_MUST_CHECK oq_err oq_parts_new(const oq_parts_opts *opts, oq_parts **out);
/* Free. NULL is allowed. Does not touch the database: the rows go when
 * the session row is deleted, or with oq_parts_leave.
 * Blocks: never. */
void oq_parts_free(oq_parts *p);

/*
 * One assignment round for session s (see the top of this file); call it
 * on the poll cadence. The first round for a session marks it a member.
 * OQ_ERR_SESSION_LOST when the session row is gone (or s is not live).
 * Blocks: one short transaction, rerun on restarts; bounded by the deadline per
 * statement and the retry policy.
 */
OQ_MUST_CHECK oq_err oq_parts_rebalance(oq_db *db, const oq_session *s,
                                        oq_parts *p);

/*
 * Like oq_claim, but only from the claimable parts (one range statement
 * per contiguous run of parts), then, with room left, from orphan parts
 * (items ready for longer than orphan_after_ms). Runs a round first when p
 * has none for s yet. *items (free with oq_items_free) holds *n items,
 * possibly 0 (a session whose block is empty claims only orphans).
 * OQ_ERR_NOMEM as for oq_claim: claimed rows may be left to release.
 * Blocks: one statement per run of claimable parts, then up to 8 for orphans
 * (and a round first when p has none), each rerun on restarts; bounded by the
 * deadline and the retry policy. Never waits for items.
 */
OQ_MUST_CHECK oq_err oq_parts_claim(oq_db *db, const oq_session *s, oq_parts *p,
                                    const char *const *queues, size_t nqueues,
                                    int max, oq_item **items, size_t *n);
/* oq_parts_claim with a byte budget, as oq_claim_bytes (item.h): each
 * statement stops once max_bytes of payload are taken, and no further
 * statement runs. */
OQ_MUST_CHECK oq_err oq_parts_claim_bytes(
    oq_db *db, const oq_session *s, oq_parts *p, const char *const *queues,
    size_t nqueues, int max, int64_t max_bytes, oq_item **items, size_t *n);

/* Stop being a member: delete s's ownership rows and clear its flag. Call
 * it only once s's in-flight items are finished or released (ending the
 * session does the same through the cascade).
 * Blocks: two statements, rerun on restarts; bounded by the deadline and the
 * retry policy. */
OQ_MUST_CHECK oq_err oq_parts_leave(oq_db *db, const oq_session *s,
                                    oq_parts *p);

/* What the last round decided (for logs, metrics and tests). */
typedef struct oq_parts_status {
  int partitions; /* P in effect */
  int members;    /* k: live members seen */
  int index;      /* this session's place among them; -1 if not seen */
  int block_lo;   /* this session's block: parts [block_lo, block_hi) */
  int block_hi;
  int owned;            /* rows held (claimable + draining) */
  int claimable;        /* owned and in the block */
  int draining;         /* owned, outside the block, not yet drained */
  int orphans;          /* parts < P with no live owner */
  bool stable;          /* owns exactly its block and nothing else */
  unsigned long rounds; /* rounds done for the current session */
} oq_parts_status;
/* Blocks: never. */
void oq_parts_status_get(const oq_parts *p, oq_parts_status *st);
/* Whether the last round left part (0..P-1 under status.partitions)
 * claimable.
 * Blocks: never. */
bool oq_parts_claimable(const oq_parts *p, int part);

/* ---- the operator's view (`onceq parts`) ------------------------------ */

typedef struct oq_part_info {
  int part;
  int slot_lo, slot_hi;        /* slots [slot_lo, slot_hi) */
  char owner[OQ_UUID_LEN + 1]; /* session id; "" when unowned */
  char owner_host[64];         /* its hostname (truncated) */
  int owner_pid;               /* its pid */
  bool owner_live;             /* heartbeated_at + expiry >= now() */
  long ready;                  /* unclaimed, run_at <= now() */
  long claimed;                /* claimed right now */
} oq_part_info;

typedef struct oq_parts_report {
  int partitions;      /* P */
  bool is_set;         /* stored in onceq_settings (else the default) */
  int members;         /* live member sessions */
  int owners;          /* distinct live sessions owning >= 1 part */
  int unowned;         /* parts with no live owner */
  long stale_rows;     /* ownership rows >= P (taken under a larger P) */
  double imbalance;    /* max / mean ready items per live owner (1 = even;
                          0 when nothing is ready or nobody owns) */
  oq_part_info *parts; /* partitions entries, in part order */
} oq_parts_report;

/* Read the report; free with oq_parts_report_free (NULL allowed).
 * Blocks: four read statements; bounded by the deadline and the retry policy.
 */
OQ_MUST_CHECK oq_err oq_parts_report_read(oq_db *db, oq_parts_report **out);
/* Blocks: never. */
void oq_parts_report_free(oq_parts_report *r);

#ifdef __cplusplus
}
#endif
#endif
