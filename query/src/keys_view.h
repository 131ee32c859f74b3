/*
 * keys_view.h: the ordering keys view of `onceq keys` (schema v5): one row
 * per (queue, ordering_key) with items in onceq_items, its head (the item
 * with the lowest enqueue_seq, the only one of the key a claim may take)
 * and how many wait behind it.
 */
#ifndef ONCEQ_QUERY_KEYS_VIEW_H
#define ONCEQ_QUERY_KEYS_VIEW_H

#include <stdbool.h>

#include "listing.h"
#include "onceq/onceq.h"

typedef struct qv_keys_sum {
  long n;       /* keys read (at most limit + 1) */
  long blocked; /* of them, with a head that failed and waits */
} qv_keys_sum;

/* Open l for the keys view: JSON key "keys", or its table.
 * CM_EXIT_OK or CM_EXIT_RUNTIME (listing.h). */
int qv_keys_open(cm_listing *l, bool json);
/* The keys of queue (NULL: every queue), by queue and key, at most
 * limit + 1 rows (the extra row says there are more); blocked_only: only
 * the keys whose head has failed (waiting for its retry, or exhausted
 * and waiting for the reap that dead-letters it). */
OQ_MUST_CHECK oq_err qv_keys_read(oq_db *db, const char *queue,
                                  bool blocked_only, long limit, cm_listing *l,
                                  qv_keys_sum *sum);

/* The statement of qv_keys_read with blocked_only, shown for its plan test
 * (it_cli_blocked_plan): $1 queue or NULL, $2 true, $3 the row limit. */
const char *qv_keys_blocked_sql(oq_engine engine);

#endif
