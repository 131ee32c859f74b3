/*
 * migrate.h: the schema versions embedded in the library, and applying them.
 *
 * Migrations are numbered 1..oq_migrate_latest(); each has a PostgreSQL
 * text and, where its DDL differs, a CockroachDB variant. Applying is
 * idempotent and safe when several processes run it at once.
 *
 * Thread safety: uses the caller's db.
 */
#ifndef ONCEQ_MIGRATE_H
#define ONCEQ_MIGRATE_H

#include "onceq/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The newest schema version this library knows.
 * Blocks: never. */
int oq_migrate_latest(void);
/* Name of migration v ("init", ...) or NULL when out of range.
 * Blocks: never. */
const char *oq_migrate_name(int version);

/* Sets *applied to the newest applied version (0: schema absent).
 * Blocks: one statement; bounded by the deadline. */
OQ_MUST_CHECK oq_err oq_migrate_status(oq_db *db, int *applied);

/* Apply every missing version. from and to (may be NULL) get the version
 * before and after. A schema newer than this library is OQ_ERR_SCHEMA.
 * Blocks: on PostgreSQL first on the advisory lock another running migration
 * holds, then one statement per change, each rerun on restarts; bounded by the
 * deadline per statement (the lock wait is one) and the retry policy; cancel
 * by: the deadline. */
OQ_MUST_CHECK oq_err oq_migrate_run(oq_db *db, int *from, int *to);

/* OQ_OK when the schema is exactly the version this library needs;
 * OQ_ERR_SCHEMA with a message naming `onceq migrate` when it is absent or
 * older, or naming the upgrade when it is newer than this library knows.
 * Blocks: one statement; bounded by the deadline. */
OQ_MUST_CHECK oq_err oq_migrate_check(oq_db *db);

/* OQ_ERR_SCHEMA (message naming the upgrade) when the schema is newer
 * than this library knows; OQ_OK for an absent, older or current one. For
 * commands that work on any schema they know, and for oq_migrate_run,
 * which refuses a newer schema too.
 * Blocks: one statement; bounded by the deadline. */
OQ_MUST_CHECK oq_err oq_migrate_check_not_newer(oq_db *db);

#ifdef __cplusplus
}
#endif
#endif
