/*
 * cutproxy.h: a PostgreSQL-protocol-aware TCP proxy that cuts connections
 * around COMMIT or after a chosen statement's reply, and blackholes them,
 * for fault-injection tests of the ambiguous-commit and recovery paths.
 *
 * It listens on 127.0.0.1 and relays every accepted connection to one
 * upstream server. In the frontend->backend direction it parses the wire
 * protocol (the untyped startup packet, then 1-byte type + int32 length
 * messages); it answers an SSLRequest or GSSENCRequest with 'N' itself, so
 * clients talk plaintext through it. In the backend->frontend direction it
 * tracks message boundaries so it knows when the server has answered.
 *
 * Terms:
 *  - a COMMIT: a simple Query ('Q') whose text is COMMIT or END (optionally
 *    followed by WORK/TRANSACTION and ';', any case, any surrounding blanks),
 *    or, in the extended protocol, a Bind ('B') of a statement whose Parse
 *    ('P') text is such a COMMIT.
 *  - a matching statement: a simple Query whose text contains the match
 *    string (cutproxy_set_match), or a Bind of a statement whose Parse text
 *    contains it (set the match before that Parse).
 *  - armed: the next COMMIT (the COMMIT modes) or matching statement
 *    (CUTPROXY_CUT_AFTER_MATCH) seen on any connection fires the armed mode.
 *    Arming is one-shot: firing disarms. Connections accepted before or after
 *    arming are treated alike, and the proxy keeps accepting new connections
 *    after a cut (clients reconnect through it).
 *  - blackholed: a connection the proxy has stopped relaying, in both
 *    directions, WITHOUT closing either socket: what each side sends is read
 *    (so its kernel sees the data acknowledged: neither TCP retransmission
 *    limits such as tcp_user_timeout nor keepalives end the connection, only
 *    the client's own deadline can) and dropped, and an EOF from one side is
 *    not passed to the other. The blackhole applies to the connections whose
 *    startup packet's application_name is a given name, or to all of them;
 *    current and new connections alike (a new one is accepted and hears
 *    nothing back: its startup packet never reaches the server, so the
 *    client's connect timeout is what ends it).
 *  - unblackhole: the blackhole is lifted; every blackholed connection is
 *    then CLOSED on both sides (the server sees EOF and rolls back whatever
 *    was open), not resumed: it is the partition healing after both ends
 *    gave the connection up. New connections relay normally.
 *
 * Thread safety: every function may be called from any thread; the proxy
 * runs one listener thread plus one thread per relayed connection.
 */
#ifndef OQ_CUTPROXY_H
#define OQ_CUTPROXY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cutproxy cutproxy;

typedef enum cutproxy_mode {
  CUTPROXY_NONE = 0, /* relay everything */
  /* Drop the COMMIT (never forwarded) and close both sockets: the commit
   * never lands; the server sees EOF and rolls the transaction back. */
  CUTPROXY_CUT_BEFORE_COMMIT = 1,
  /* Forward the COMMIT (for the extended protocol: up to the next Sync),
   * wait until the server has answered it (the reply is read and NOT
   * relayed), then close both sockets: the commit has landed (or failed, see
   * cutproxy_commit_result) before the client sees its connection drop. */
  CUTPROXY_CUT_AFTER_COMMIT = 2,
  /* Forward the COMMIT and close the client's socket at once, then read
   * (and drop) the server's answer before closing the server side: the
   * client sees the drop while the commit may still be running. */
  CUTPROXY_CUT_DURING_COMMIT = 3,
  /* Like CUT_AFTER_COMMIT, on the next matching statement instead of a
   * COMMIT: forward it (extended protocol: up to the next Sync), wait until
   * the server has answered it fully (ReadyForQuery), drop the reply, close
   * both sockets. For an autocommit statement: it committed and the client
   * never learns what it returned. cutproxy_commit_result gives its tag
   * ("UPDATE 3"). */
  CUTPROXY_CUT_AFTER_MATCH = 4,
  /* Like CUT_AFTER_COMMIT, but what the server answers is relayed, except
   * that a COMMIT's CommandComplete becomes an ErrorResponse with SQLSTATE
   * 40003 (statement completion unknown, what CockroachDB sends for an
   * ambiguous result) and the ReadyForQuery after it is dropped; then both
   * sockets close. The commit has landed; the client sees an error on its
   * COMMIT and then its connection drop. */
  CUTPROXY_ERROR_AFTER_COMMIT = 5
} cutproxy_mode;

/*
 * Start a proxy listening on 127.0.0.1:listen_port (0: an ephemeral port,
 * see cutproxy_port) that relays to upstream_host:upstream_port. Returns a
 * handle to free with cutproxy_stop, or NULL (with a line on stderr) when
 * the listening socket or the thread could not be set up.
 */
cutproxy *cutproxy_start_on(int listen_port, const char *upstream_host,
                            int upstream_port);
/* cutproxy_start_on with an ephemeral listening port. */
cutproxy *cutproxy_start(const char *upstream_host, int upstream_port);

/* Stop accepting, close every relayed connection, join all threads and
 * free. NULL is allowed. */
void cutproxy_stop(cutproxy *p);

/* The port the proxy listens on (on 127.0.0.1). */
int cutproxy_port(const cutproxy *p);

/* Arm mode for the next COMMIT (CUTPROXY_NONE disarms). */
void cutproxy_arm(cutproxy *p, cutproxy_mode mode);
/* What is armed now (CUTPROXY_NONE once it fired). */
cutproxy_mode cutproxy_armed(const cutproxy *p);
/* Number of cuts performed since start. */
uint64_t cutproxy_fired(const cutproxy *p);
/* Number of client connections accepted since start. */
uint64_t cutproxy_accepted(const cutproxy *p);

/*
 * What the server answered to the last COMMIT the proxy withheld from its
 * client (AFTER and DURING modes): the CommandComplete tag ("COMMIT", or
 * "ROLLBACK" when the transaction had failed), "ERROR <SQLSTATE>" for an
 * ErrorResponse, "EOF" when the server closed first, "TIMEOUT" when it did
 * not answer within 30 s, "" when nothing was recorded yet. Copied into out.
 */
void cutproxy_commit_result(cutproxy *p, char *out, size_t outlen);

/*
 * Wait up to timeout_ms for the connection that fired the last cut to be
 * fully closed (in DURING mode the server side stays open until the server
 * has answered). Returns 1 when done, 0 on timeout.
 */
int cutproxy_wait_settled(cutproxy *p, int timeout_ms);

/*
 * Called on the relay thread of the connection that fired, after its server
 * side is closed and before its client side is (in DURING mode the client
 * side is already closed): the client learns of the cut only once fn has
 * returned, so a test can change the database "while the connection is
 * down" deterministically. In BEFORE mode the server sees EOF first, so
 * the abandoned transaction is rolling back while fn runs. NULL clears.
 * Set it before arming.
 */
typedef void (*cutproxy_cut_fn)(void *ud, cutproxy_mode mode);
void cutproxy_on_cut(cutproxy *p, cutproxy_cut_fn fn, void *ud);

/* Close every connection relayed right now (as if the network failed);
 * the proxy keeps listening. */
void cutproxy_drop_all(cutproxy *p);

/* The substring that makes a statement match (CUTPROXY_CUT_AFTER_MATCH);
 * copied (up to 255 bytes); NULL or "" matches nothing. */
void cutproxy_set_match(cutproxy *p, const char *text);

/* Blackhole the connections whose application_name is app (NULL or ""
 * clears the name; bh_all stays as it is). Takes effect on current
 * connections within ~50 ms. */
void cutproxy_blackhole_app(cutproxy *p, const char *app);
/* Blackhole every connection, current and new. */
void cutproxy_blackhole_all(cutproxy *p);
/* Lift both blackholes; every blackholed connection is closed (see the
 * file comment) within ~50 ms. */
void cutproxy_unblackhole(cutproxy *p);
/* Connections blackholed right now, and that ever entered the blackhole. */
int cutproxy_blackholed_now(const cutproxy *p);
uint64_t cutproxy_blackholed_total(const cutproxy *p);

/* Name of a mode ("cut-after-commit", ...). */
const char *cutproxy_mode_name(cutproxy_mode mode);

#ifdef __cplusplus
}
#endif
#endif
