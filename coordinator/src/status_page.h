/*
 * status_page.h: the coordinator's read-only status page, served beside
 * /metrics on --metrics-addr (common/src/promhttp.c calls co_status_serve
 * for every other GET path).
 *
 * Routes:
 *  - /, /status: one self-contained HTML page (no script, no font, no
 *    request to anywhere else; it refreshes itself every 5 s with a meta
 *    refresh): queues, the scaling hint, live sessions, the partition owner
 *    map and the latest dead letters. Every value that came from the
 *    database (queue names, payloads, errors, hostnames) is HTML-escaped.
 *  - /api/stats, /api/sessions, /api/dead, /api/parts: JSON, the same
 *    documents as `onceq stats --json`, `onceq sessions --json`,
 *    `onceq list --state dead --json` (the latest 50) and
 *    `onceq parts --json` (views.h).
 *
 * Access: with a token (--status-token or ONCEQ_STATUS_TOKEN) every route
 * but /metrics and /healthz needs "Authorization: Bearer TOKEN" (401
 * otherwise). The page shows payloads and errors, so a coordinator bound
 * beyond 127.0.0.1 should have a token and sit behind TLS.
 *
 * Thread safety: co_status_serve runs on the HTTP server's page thread
 * (promhttp.h), one request at a time and never on the thread that answers
 * /healthz and /metrics, so a slow page cannot fail the health check; it
 * holds its own database connection (opened on first use, reopened after a
 * failure), that thread's alone, never the coordinator loop's.
 */
#ifndef ONCEQ_COORD_STATUS_PAGE_H
#define ONCEQ_COORD_STATUS_PAGE_H

#include <stddef.h>

#include "onceq/onceq.h"

typedef struct co_status co_status;

/* A status page that connects with dbo (copied; conninfo too) and, when
 * token is neither NULL nor "", asks for it. NULL when out of memory.
 * Free with co_status_free. */
co_status *co_status_new(const oq_db_opts *dbo, const char *token);
/* Close its connection and free it. NULL is fine. */
void co_status_free(co_status *st);

/*
 * Answer GET url (authorization: the request's Authorization header, or
 * NULL). Returns the HTTP status with *body (malloc'd, the caller frees),
 * *len and *ctype (static text) set; 404 for an unknown path.
 * The signature of cm_promhttp_opts.page.
 */
int co_status_serve(void *st, const char *url, const char *authorization,
                    char **body, size_t *len, const char **ctype);

#endif
