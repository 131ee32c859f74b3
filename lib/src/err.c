/* err.c: text for oq_err codes. */
#include "onceq/err.h"

static const char *const texts[OQ_ERR__COUNT] = {
    [OQ_OK] = "ok",
    [OQ_ERR_NOMEM] = "out of memory",
    [OQ_ERR_INVALID] = "invalid argument or input",
    [OQ_ERR_CONFIG] = "bad configuration",
    [OQ_ERR_CONN] = "connection failed or lost",
    [OQ_ERR_AUTH] = "authentication failed",
    [OQ_ERR_SCHEMA] = "schema missing or out of date",
    [OQ_ERR_RETRY] = "transaction restarts exhausted",
    [OQ_ERR_AMBIGUOUS] = "commit outcome unknown",
    [OQ_ERR_CLAIM_LOST] = "claim lost",
    [OQ_ERR_SESSION_LOST] = "session lost",
    [OQ_ERR_CONFLICT] = "unique violation",
    [OQ_ERR_TIMEOUT] = "timed out",
    [OQ_ERR_SQL] = "SQL error",
    [OQ_ERR_CALLBACK] = "callback failed",
    [OQ_ERR_FENCED] = "session fenced",
};

const char *oq_strerror(oq_err err)
{
  if ((int)err < 0 || err >= OQ_ERR__COUNT || !texts[err])
    return "unknown error";
  return texts[err];
}
