/* schema_embed.h: the migration table generated from schema/ at build time. */
#ifndef ONCEQ_SCHEMA_EMBED_H
#define ONCEQ_SCHEMA_EMBED_H

typedef struct oq__migration {
  int version;
  const char *name;
  const char *pg_sql;   /* PostgreSQL text */
  const char *crdb_sql; /* CockroachDB variant (same as pg_sql if none) */
} oq__migration;

extern const oq__migration oq__migrations[];
extern const int oq__migration_count;

#endif
