/*
 * enqueue.h: adding items, inside the CALLER's transaction.
 *
 * oq_enqueue is a plain INSERT into onceq_items on the caller's db: run it
 * between your own BEGIN and COMMIT and a rolled-back enqueue never runs.
 * It does not open or retry a transaction of its own.
 *
 * Thread safety: uses the caller's db, on one thread.
 */
#ifndef ONCEQ_ENQUEUE_H
#define ONCEQ_ENQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include "onceq/db.h"
#include "onceq/item.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_DEFAULT_QUEUE "default"
#define OQ_DEFAULT_MAX_ATTEMPTS 25
/* The largest payload onceq_items accepts, in bytes of its JSON text as
 * the server prints it (payload::text): 1 MiB. Enforced by the schema
 * (v4, onceq_items_payload_size: SQLSTATE 23514), so a plain INSERT from
 * any language is refused too; docs/enqueue.md, "Payload size". */
#define OQ_MAX_PAYLOAD_BYTES 1048576
/* The longest ordering key oq_enqueue takes, in bytes: it is an index key
 * (a btree entry holds at most about 2700 bytes); `onceq push` allows the
 * same for --queue, --unique-key and --ordering-key. */
#define OQ_MAX_ORDERING_KEY_BYTES 1000

typedef struct oq_enqueue_opts {
  const char *queue;      /* NULL: "default" */
  const char *payload;    /* JSON text; NULL: "{}" */
  int priority;           /* higher runs first; default 0 */
  int64_t delay_ms;       /* run_at = now() + delay; ignored if run_at set */
  const char *run_at;     /* timestamptz text, e.g. "2030-01-01T00:00:00Z" */
  const char *unique_key; /* at most one live item per key; NULL: none */
  int max_attempts;       /* 0: 25 */
  bool keep_result;       /* keep its outcome for oq_wait (keep_result) */
  /* Items of one queue and one ordering key run one at a time, in enqueue
   * order (docs/enqueue.md, "Ordering keys"); NULL: no key. Not empty, at
   * most OQ_MAX_ORDERING_KEY_BYTES. oq_enqueue_many: every item's key. */
  const char *ordering_key;
  /* oq_enqueue_many only: the object field whose value (a string or a
   * number, as ->> gives it) is each item's ordering key; an element
   * without it gets ordering_key. NULL: none. Not empty. */
  const char *ordering_key_field;
} oq_enqueue_opts;

typedef enum oq_enqueue_status {
  OQ_ENQUEUED = 0,         /* a new item was inserted */
  OQ_ENQUEUE_DUPLICATE = 1 /* unique_key exists: id is the existing item */
} oq_enqueue_status;

/*
 * Insert one item. id_out (OQ_UUID_LEN + 1 bytes) gets its id. With a
 * unique_key that already exists, nothing is inserted, id_out gets the
 * existing id and *status (may be NULL) OQ_ENQUEUE_DUPLICATE. Invalid JSON
 * gives OQ_ERR_INVALID, and so does a payload over OQ_MAX_PAYLOAD_BYTES
 * (SQLSTATE 23514, a message naming the limit and the fix), and an empty
 * or too long ordering_key (nothing is sent).
 * Blocks: one statement (up to three when its unique_key keeps changing hands),
 * not retried: it is part of your transaction, whose runner (oq_db_transact)
 * reruns it; bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_enqueue(oq_db *db, const oq_enqueue_opts *opts,
                                char *id_out, oq_enqueue_status *status);

/*
 * Insert many items in one statement, in the caller's transaction (the
 * bulk path of `onceq push`). payloads is one JSON array whose elements
 * are the items' payloads; the other options come from opts (queue,
 * priority, delay_ms or run_at, max_attempts, ordering_key and
 * ordering_key_field; payload, unique_key and keep_result are not used),
 * the same for every item; the items' enqueue order is array order. The
 * keys ordering_key_field finds are the elements' own: the caller checks
 * them (`onceq push` refuses an empty or long one). key_field (NULL:
 * none) names the object field whose value is each item's unique key: an
 * item whose key a live item holds is skipped (ON CONFLICT DO NOTHING).
 * on_row (may be NULL) is called with (ordinal in the array from 1, new
 * id) for each item inserted, in array order. Errors come as the server gave
 * them (SQLSTATE on db; oq_enqueue_too_large tells the payload limit), so a
 * caller can find the element the server refused.
 * Blocks: one statement, not retried (your transaction's runner reruns
 * it); bounded by the deadline.
 */
OQ_MUST_CHECK oq_err oq_enqueue_many(oq_db *db, const oq_enqueue_opts *opts,
                                     const char *payloads,
                                     const char *key_field, oq_row_fn on_row,
                                     void *ud);

/*
 * Whether db's last error is the schema refusing a payload over
 * OQ_MAX_PAYLOAD_BYTES (23514 from onceq_items_payload_size: PostgreSQL's
 * trigger names it, CockroachDB's CHECK message shows its expression),
 * e.g. after oq_enqueue_many, whose errors are the server's own.
 * Blocks: never.
 */
bool oq_enqueue_too_large(const oq_db *db);

#ifdef __cplusplus
}
#endif
#endif
