/*
 * cutproxy.c: the fault-injection proxy (see cutproxy.h): one listener
 * thread, one relay thread per connection, cuts around COMMIT or after a
 * matching statement, and blackholes.
 *
 * Terms:
 *  - c / client: the frontend side (the library under test);
 *  - s / server: the backend side (PostgreSQL);
 *  - pending: replies still owed by the server: +1 at the startup packet
 *    and at every Query, Sync and FunctionCall forwarded, -1 at every
 *    ReadyForQuery received. When a COMMIT was withheld from the client, the
 *    server has answered it once pending is back to 0.
 *  - statement kind: what a prepared statement's Parse text is, as far as
 *    the proxy cares: a COMMIT (KIND_COMMIT) and/or a text that contains the
 *    match string (KIND_MATCH); a Bind of it fires like the text would.
 *  - selected: a connection the blackhole applies to right now (all of
 *    them, or those whose startup packet's application_name is the chosen
 *    one). A selected connection in PH_RELAY enters PH_BLACKHOLE; it leaves
 *    it only by being closed, once it is no longer selected.
 *
 * Each relay thread owns its two sockets and its buffers; what threads
 * share lives in struct cutproxy, as atomics or under its mutex.
 */
#include "cutproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CP_SSL_REQUEST_CODE 80877103    /* SSLRequest: 1234 << 16 | 5679 */
#define CP_GSSENC_REQUEST_CODE 80877104 /* GSSENCRequest: 1234 << 16 | 5680 */
#define CP_MAX_MSG (1u << 30)           /* PostgreSQL's own message cap */
#define CP_POLL_MS 50                   /* relay loop tick (drop_all latency) */
#define CP_REPLY_TIMEOUT_MS 30000       /* wait for a withheld COMMIT reply */
#define CP_MAX_STMTS 16                 /* named statements tracked */
#define CP_NAME_LEN 64
#define CP_APP_LEN 64    /* application_name kept (longer: truncated) */
#define CP_MATCH_LEN 256 /* match string */
#define KIND_COMMIT 1    /* statement kind bits, see the file comment */
#define KIND_MATCH 2

struct cp_conn;

struct cutproxy {
  int lfd;     /* listening socket on 127.0.0.1 */
  int port;    /* its port */
  int wake[2]; /* stop pipe: readable once cutproxy_stop ran */
  struct sockaddr_storage up_addr; /* upstream, resolved at start */
  socklen_t up_len;
  pthread_t listener;

  atomic_int armed;              /* cutproxy_mode to fire on the next COMMIT */
  atomic_uint_fast64_t fired;    /* cuts performed */
  atomic_uint_fast64_t accepted; /* client connections accepted */
  atomic_uint drop_gen;          /* bumped by cutproxy_drop_all */
  atomic_int bh_all;             /* blackhole every connection, new ones too */
  atomic_int bh_app_set;         /* bh_app is non-empty */
  atomic_int bh_now;             /* connections in PH_BLACKHOLE now */
  atomic_uint_fast64_t bh_total; /* connections that entered PH_BLACKHOLE */
  atomic_int match_set;          /* match is non-empty */

  pthread_mutex_t mu;     /* guards the four fields below */
  pthread_cond_t cv;      /* signalled when unsettled drops */
  char commit_result[64]; /* see cutproxy_commit_result */
  int unsettled;          /* fired connections not yet fully closed */
  cutproxy_cut_fn on_cut; /* see cutproxy_on_cut */
  void *on_cut_ud;
  char bh_app[CP_APP_LEN];  /* blackholed application_name ("": none) */
  char match[CP_MATCH_LEN]; /* CUT_AFTER_MATCH's substring ("": none) */

  struct cp_conn *conns; /* relay threads; touched by the listener only */
};

typedef struct cp_buf {
  char *d;
  size_t len; /* bytes held */
  size_t cap; /* bytes allocated */
} cp_buf;

/* Where a relay connection is in its life. */
typedef enum cp_phase {
  PH_RELAY = 0,   /* relaying both ways, watching for a COMMIT */
  PH_UNTIL_SYNC,  /* fired on an extended-protocol COMMIT (Bind): forward
                   * the client's messages up to and including Sync */
  PH_AWAIT_REPLY, /* COMMIT forwarded; the client gets nothing more; read
                   * the server's answer until pending is 0 */
  PH_BLACKHOLE,   /* selected: nothing is forwarded either way; both sides
                   * are read (and what they send dropped) so that their
                   * kernels see their data acknowledged; an EOF from one
                   * side is not passed on. Ends when no longer selected. */
  PH_DONE         /* close both sides and end the thread */
} cp_phase;

typedef struct cp_conn {
  cutproxy *p;
  pthread_t th;
  atomic_int done;      /* set by the relay thread as it ends */
  struct cp_conn *next; /* listener's list */

  /* Everything below belongs to the relay thread. */
  int cfd, sfd;       /* -1 once closed */
  cp_buf c_in, c_out; /* from / to the client */
  cp_buf s_in, s_out; /* from / to the server */
  int startup_done;   /* the untyped startup packet went through */
  long pending;       /* see the file comment */
  cp_phase phase;
  cutproxy_mode fired_mode; /* the mode this connection fired, or NONE */
  uint64_t await_start_ms;  /* monotonic ms when PH_AWAIT_REPLY began */
  char last_tag[48];        /* last CommandComplete / error while awaiting */
  int unnamed_kind;         /* KIND_* bits of the unnamed statement */
  char stmts[CP_MAX_STMTS][CP_NAME_LEN]; /* named statements of some kind */
  int stmt_kind[CP_MAX_STMTS];           /* their KIND_* bits */
  char app_name[CP_APP_LEN]; /* from the startup packet ("" if none) */
} cp_conn;

static uint64_t cp_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- buffers ---------------------------------------------------------- */

static int buf_append(cp_buf *b, const void *data, size_t n)
{
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 8192;
    while (cap < b->len + n)
      cap *= 2;
    char *d = realloc(b->d, cap);
    if (!d)
      return -1;
    b->d = d;
    b->cap = cap;
  }
  memcpy(b->d + b->len, data, n);
  b->len += n;
  return 0;
}

static void buf_consume(cp_buf *b, size_t n)
{
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->d, b->d + n, b->len - n);
  b->len -= n;
}

static void buf_free(cp_buf *b)
{
  free(b->d);
  b->d = NULL;
  b->len = b->cap = 0;
}

static uint32_t get_u32(const char *s)
{
  const unsigned char *u = (const unsigned char *)s;
  return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 |
         (uint32_t)u[3];
}

/* The NUL-terminated string at body[*off], or NULL when it runs past len.
 * Advances *off past the NUL. */
static const char *get_cstr(const char *body, size_t len, size_t *off)
{
  if (*off >= len)
    return NULL;
  const char *s = body + *off;
  const char *nul = memchr(s, '\0', len - *off);
  if (!nul)
    return NULL;
  *off += (size_t)(nul - s) + 1;
  return s;
}

/* ---- COMMIT recognition ---------------------------------------------- */

static const char *skip_ws(const char *s, const char *end)
{
  while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' ||
                     *s == '\f' || *s == '\v'))
    s++;
  return s;
}

/* Does [s, end) start with word (any case) followed by a non-word byte? */
static int eat_word(const char **s, const char *end, const char *word)
{
  size_t n = strlen(word);
  if ((size_t)(end - *s) < n || strncasecmp(*s, word, n) != 0)
    return 0;
  const char *after = *s + n;
  if (after < end) {
    char c = *after;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '_' || c == '$')
      return 0;
  }
  *s = after;
  return 1;
}

/* COMMIT / END [WORK | TRANSACTION] [;], blanks anywhere around. */
static int is_commit_sql(const char *sql, size_t len)
{
  const char *nul = memchr(sql, '\0', len);
  const char *end = nul ? nul : sql + len;
  const char *s = skip_ws(sql, end);
  if (!eat_word(&s, end, "commit") && !eat_word(&s, end, "end"))
    return 0;
  s = skip_ws(s, end);
  if (!eat_word(&s, end, "work"))
    (void)eat_word(&s, end, "transaction");
  s = skip_ws(s, end);
  if (s < end && *s == ';')
    s++;
  s = skip_ws(s, end);
  return s == end;
}

/* Does the SQL text [sql, sql+len) contain the match string? */
static int is_match_sql(cutproxy *p, const char *sql, size_t len)
{
  if (!atomic_load(&p->match_set))
    return 0;
  const char *nul = memchr(sql, '\0', len);
  size_t n = nul ? (size_t)(nul - sql) : len;
  pthread_mutex_lock(&p->mu);
  size_t m = strlen(p->match);
  int hit = 0;
  for (size_t i = 0; m > 0 && i + m <= n && !hit; i++)
    hit = memcmp(sql + i, p->match, m) == 0;
  pthread_mutex_unlock(&p->mu);
  return hit;
}

/* KIND_* bits of a SQL text. */
static int sql_kind(cp_conn *c, const char *sql, size_t len)
{
  return (is_commit_sql(sql, len) ? KIND_COMMIT : 0) |
         (is_match_sql(c->p, sql, len) ? KIND_MATCH : 0);
}

static int stmt_kind(const cp_conn *c, const char *name)
{
  if (!*name)
    return c->unnamed_kind;
  for (int i = 0; i < CP_MAX_STMTS; i++)
    if (c->stmts[i][0] && strcmp(c->stmts[i], name) == 0)
      return c->stmt_kind[i];
  return 0;
}

/* Remember the KIND_* bits of statement `name` (0 forgets it). */
static void stmt_set(cp_conn *c, const char *name, int kind)
{
  if (!*name) {
    c->unnamed_kind = kind;
    return;
  }
  for (int i = 0; i < CP_MAX_STMTS; i++)
    if (c->stmts[i][0] && strcmp(c->stmts[i], name) == 0)
      c->stmts[i][0] = '\0';
  if (!kind || strlen(name) >= CP_NAME_LEN)
    return;
  for (int i = 0; i < CP_MAX_STMTS; i++)
    if (!c->stmts[i][0]) {
      memcpy(c->stmts[i], name, strlen(name) + 1);
      c->stmt_kind[i] = kind;
      return;
    }
}

/* ---- shared state ------------------------------------------------------ */

/* Take the armed mode if there is one and it applies to a statement of
 * kind `kind` (exactly one caller wins): the COMMIT modes fire on a COMMIT,
 * CUT_AFTER_MATCH on a matching statement. */
static cutproxy_mode try_fire(cutproxy *p, int kind)
{
  int m = atomic_load(&p->armed);
  for (;;) {
    int applies = m == CUTPROXY_CUT_AFTER_MATCH ? (kind & KIND_MATCH) != 0
                  : m != CUTPROXY_NONE          ? (kind & KIND_COMMIT) != 0
                                                : 0;
    if (!applies)
      return CUTPROXY_NONE;
    if (atomic_compare_exchange_weak(&p->armed, &m, CUTPROXY_NONE))
      return (cutproxy_mode)m;
  }
}

static void note_fired(cp_conn *c, cutproxy_mode m)
{
  cutproxy *p = c->p;
  c->fired_mode = m;
  atomic_fetch_add(&p->fired, 1);
  pthread_mutex_lock(&p->mu);
  p->commit_result[0] = '\0';
  p->unsettled++;
  pthread_mutex_unlock(&p->mu);
}

static void set_commit_result(cutproxy *p, const char *what)
{
  pthread_mutex_lock(&p->mu);
  snprintf(p->commit_result, sizeof p->commit_result, "%s", what);
  pthread_mutex_unlock(&p->mu);
}

/* ---- the relay --------------------------------------------------------- */

static void close_fd(int *fd)
{
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

/* Enter PH_AWAIT_REPLY: the COMMIT is in s_out; the client hears nothing
 * more (DURING: its socket is closed right now). */
static void begin_await(cp_conn *c)
{
  c->phase = PH_AWAIT_REPLY;
  c->await_start_ms = cp_now_ms();
  c->last_tag[0] = '\0';
  /* ERROR_AFTER_COMMIT relays the answers before the COMMIT's own */
  if (c->fired_mode != CUTPROXY_ERROR_AFTER_COMMIT)
    c->c_out.len = 0;
  c->c_in.len = 0;
  if (c->fired_mode == CUTPROXY_CUT_DURING_COMMIT)
    close_fd(&c->cfd);
}

static int forward(cp_conn *c, const char *msg, size_t n)
{
  return buf_append(&c->s_out, msg, n);
}

/* Handle one typed frontend message (msg = type byte + length + body).
 * Returns -1 on a protocol or memory error. */
static int client_message(cp_conn *c, const char *msg, size_t n)
{
  char type = msg[0];
  const char *body = msg + 5;
  size_t blen = n - 5;
  size_t off = 0;

  if (c->phase == PH_UNTIL_SYNC) {
    if (forward(c, msg, n) != 0)
      return -1;
    if (type == 'S') {
      c->pending++;
      begin_await(c);
    }
    return 0;
  }

  switch (type) {
  case 'Q': {
    int kind = sql_kind(c, body, blen);
    if (kind) {
      cutproxy_mode m = try_fire(c->p, kind);
      if (m == CUTPROXY_CUT_BEFORE_COMMIT) {
        note_fired(c, m);
        c->phase = PH_DONE; /* not forwarded */
        return 0;
      }
      if (m != CUTPROXY_NONE) {
        note_fired(c, m);
        if (forward(c, msg, n) != 0)
          return -1;
        c->pending++;
        begin_await(c);
        return 0;
      }
    }
    c->pending++;
    break;
  }
  case 'P': {
    const char *name = get_cstr(body, blen, &off);
    const char *query = name ? get_cstr(body, blen, &off) : NULL;
    if (!query)
      return -1;
    stmt_set(c, name, sql_kind(c, query, strlen(query)));
    break;
  }
  case 'B': {
    const char *portal = get_cstr(body, blen, &off);
    const char *stmt = portal ? get_cstr(body, blen, &off) : NULL;
    if (!stmt)
      return -1;
    int kind = stmt_kind(c, stmt);
    if (kind) {
      cutproxy_mode m = try_fire(c->p, kind);
      if (m == CUTPROXY_CUT_BEFORE_COMMIT) {
        note_fired(c, m);
        c->phase = PH_DONE;
        return 0;
      }
      if (m != CUTPROXY_NONE) {
        note_fired(c, m);
        c->phase = PH_UNTIL_SYNC;
      }
    }
    break;
  }
  case 'C': {
    const char *name = NULL;
    if (blen >= 1 && body[0] == 'S') {
      off = 1;
      name = get_cstr(body, blen, &off);
    }
    if (name)
      stmt_set(c, name, 0);
    break;
  }
  case 'S':
  case 'F':
    c->pending++;
    break;
  default:
    break;
  }
  return forward(c, msg, n);
}

/* Keep the application_name of a startup packet (length, protocol code,
 * then name/value C strings ended by an empty name). */
static void startup_app_name(cp_conn *c, const char *pkt, size_t len)
{
  size_t off = 8;
  for (;;) {
    const char *k = get_cstr(pkt, len, &off);
    if (!k || !*k)
      return;
    const char *v = get_cstr(pkt, len, &off);
    if (!v)
      return;
    if (strcmp(k, "application_name") == 0) {
      snprintf(c->app_name, sizeof c->app_name, "%s", v);
      return;
    }
  }
}

/* Consume every complete message in c_in. */
static int client_input(cp_conn *c)
{
  while (c->phase == PH_RELAY || c->phase == PH_UNTIL_SYNC) {
    if (!c->startup_done) {
      if (c->c_in.len < 8)
        return 0;
      uint32_t len = get_u32(c->c_in.d);
      if (len < 8 || len > 10000)
        return -1;
      if (c->c_in.len < len)
        return 0;
      uint32_t code = get_u32(c->c_in.d + 4);
      if (code == CP_SSL_REQUEST_CODE || code == CP_GSSENC_REQUEST_CODE) {
        if (buf_append(&c->c_out, "N", 1) != 0)
          return -1;
      } else {
        startup_app_name(c, c->c_in.d, len);
        if (forward(c, c->c_in.d, len) != 0)
          return -1;
        c->startup_done = 1;
        c->pending = 1; /* the ReadyForQuery that ends the start-up */
      }
      buf_consume(&c->c_in, len);
      continue;
    }
    if (c->c_in.len < 5)
      return 0;
    uint32_t len = get_u32(c->c_in.d + 1);
    if (len < 4 || len > CP_MAX_MSG)
      return -1;
    size_t n = (size_t)len + 1;
    if (c->c_in.len < n)
      return 0;
    if (client_message(c, c->c_in.d, n) != 0)
      return -1;
    buf_consume(&c->c_in, n);
  }
  return 0;
}

/* ERROR_AFTER_COMMIT, while the answer is awaited: relay the message
 * (msg is in s_in), except a COMMIT's CommandComplete, which becomes an
 * ErrorResponse 40003. */
static int relay_or_ambiguous(cp_conn *c, char type, const char *body,
                              size_t blen, size_t n)
{
  size_t off = 0;
  const char *tag = type == 'C' ? get_cstr(body, blen, &off) : NULL;
  if (!tag || strcmp(tag, "COMMIT") != 0)
    return buf_append(&c->c_out, c->s_in.d, n);
  static const char fields[] =
      "SERROR\0VERROR\0C40003\0"
      "Mresult is ambiguous (injected by cutproxy: the COMMIT landed)\0";
  /* the fields, then the terminating zero byte */
  uint32_t len = (uint32_t)(4 + sizeof fields);
  char hdr[5] = {'E', (char)(len >> 24), (char)(len >> 16), (char)(len >> 8),
                 (char)len};
  if (buf_append(&c->c_out, hdr, sizeof hdr) != 0)
    return -1;
  return buf_append(&c->c_out, fields, sizeof fields);
}

/* Consume every complete message in s_in: relay it, or, while a COMMIT is
 * withheld, record the answer and finish once pending is 0. */
static int server_input(cp_conn *c)
{
  while (c->s_in.len >= 5 && c->phase != PH_DONE) {
    uint32_t len = get_u32(c->s_in.d + 1);
    if (len < 4 || len > CP_MAX_MSG)
      return -1;
    size_t n = (size_t)len + 1;
    if (c->s_in.len < n)
      return 0;
    char type = c->s_in.d[0];
    const char *body = c->s_in.d + 5;
    size_t blen = n - 5;
    if (c->phase == PH_AWAIT_REPLY) {
      if (type == 'C') {
        size_t off = 0;
        const char *tag = get_cstr(body, blen, &off);
        snprintf(c->last_tag, sizeof c->last_tag, "%s", tag ? tag : "?");
      } else if (type == 'E') {
        /* fields: 1-byte code + cstring, ended by a 0 byte */
        size_t off = 0;
        char code[8] = "?";
        while (off < blen && body[off] != '\0') {
          char f = body[off++];
          const char *v = get_cstr(body, blen, &off);
          if (!v)
            break;
          if (f == 'C')
            snprintf(code, sizeof code, "%s", v);
        }
        snprintf(c->last_tag, sizeof c->last_tag, "ERROR %s", code);
      }
      if (c->fired_mode == CUTPROXY_ERROR_AFTER_COMMIT && type != 'Z' &&
          relay_or_ambiguous(c, type, body, blen, n) != 0)
        return -1;
    } else if (buf_append(&c->c_out, c->s_in.d, n) != 0) {
      return -1;
    }
    if (type == 'Z' && c->pending > 0)
      c->pending--;
    buf_consume(&c->s_in, n);
    if (c->phase == PH_AWAIT_REPLY && type == 'Z' && c->pending == 0) {
      set_commit_result(c->p, c->last_tag[0] ? c->last_tag : "no tag");
      c->phase = PH_DONE;
    }
  }
  return 0;
}

/* Read what is there; 0 on data, 1 on EOF, -1 on error. */
static int read_into(int fd, cp_buf *b)
{
  char tmp[16384];
  for (;;) {
    ssize_t n = recv(fd, tmp, sizeof tmp, 0);
    if (n > 0)
      return buf_append(b, tmp, (size_t)n);
    if (n == 0)
      return 1;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return 0;
    return -1;
  }
}

/* Write what the socket takes; -1 on error. */
static int write_from(int fd, cp_buf *b)
{
  while (b->len > 0) {
    ssize_t n = send(fd, b->d, b->len, MSG_NOSIGNAL);
    if (n > 0) {
      buf_consume(b, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    return -1;
  }
  return 0;
}

/* Best effort: push out what is left for fd, waiting up to timeout_ms. */
static void flush_for(int fd, cp_buf *b, int timeout_ms)
{
  uint64_t end = cp_now_ms() + (uint64_t)timeout_ms;
  while (fd >= 0 && b->len > 0) {
    if (write_from(fd, b) != 0)
      return;
    if (b->len == 0)
      return;
    uint64_t now = cp_now_ms();
    if (now >= end)
      return;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    (void)poll(&pf, 1, (int)(end - now));
  }
}

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -1;
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return 0;
}

/* Is the blackhole on for this connection right now? A connection is
 * chosen by name only once its startup packet was read. */
static int bh_selected(cutproxy *p, const cp_conn *c)
{
  if (atomic_load(&p->bh_all))
    return 1;
  if (!atomic_load(&p->bh_app_set) || !c->startup_done)
    return 0;
  pthread_mutex_lock(&p->mu);
  int hit = p->bh_app[0] && strcmp(p->bh_app, c->app_name) == 0;
  pthread_mutex_unlock(&p->mu);
  return hit;
}

/* PH_BLACKHOLE: forward nothing, drop what either side sends (reading it,
 * so that its kernel acknowledges it and neither TCP retransmission limits
 * nor keepalives end the connection), never pass an EOF on. Returns when
 * the connection is no longer selected, on drop_all or stop, or once both
 * sides have closed; the caller then closes what is left. */
static void blackhole_loop(cp_conn *c, unsigned gen)
{
  cutproxy *p = c->p;
  c->phase = PH_BLACKHOLE;
  atomic_fetch_add(&p->bh_now, 1);
  atomic_fetch_add(&p->bh_total, 1);
  while (c->cfd >= 0 || c->sfd >= 0) {
    struct pollfd pf[3];
    int nf = 0, ic = -1, is = -1;
    pf[nf++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    if (c->cfd >= 0) {
      ic = nf;
      pf[nf++] = (struct pollfd){.fd = c->cfd, .events = POLLIN};
    }
    if (c->sfd >= 0) {
      is = nf;
      pf[nf++] = (struct pollfd){.fd = c->sfd, .events = POLLIN};
    }
    int r = poll(pf, (nfds_t)nf, CP_POLL_MS);
    if (r < 0 && errno != EINTR)
      break;
    if (pf[0].revents || atomic_load(&p->drop_gen) != gen || !bh_selected(p, c))
      break;
    if (r <= 0)
      continue;
    int *fds[2] = {&c->cfd, &c->sfd};
    int idx[2] = {ic, is};
    for (int k = 0; k < 2; k++) {
      if (idx[k] < 0 || !(pf[idx[k]].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char tmp[16384];
      ssize_t n = recv(*fds[k], tmp, sizeof tmp, 0);
      if (n == 0 ||
          (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
        close_fd(fds[k]); /* the other side is not told */
    }
  }
  atomic_fetch_sub(&p->bh_now, 1);
  c->phase = PH_DONE;
}

static void *relay_main(void *arg)
{
  cp_conn *c = arg;
  cutproxy *p = c->p;
  unsigned gen = atomic_load(&p->drop_gen);

  if (set_nonblock(c->cfd) != 0)
    goto out;
  if (bh_selected(p, c)) { /* blackholed before it began: no upstream */
    blackhole_loop(c, gen);
    goto out;
  }
  c->sfd = socket(p->up_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->sfd < 0 ||
      connect(c->sfd, (struct sockaddr *)&p->up_addr, p->up_len) != 0) {
    fprintf(stderr, "cutproxy: connect upstream: %s\n", strerror(errno));
    goto out;
  }
  if (set_nonblock(c->sfd) != 0)
    goto out;

  while (c->phase != PH_DONE) {
    struct pollfd pf[3];
    int nf = 0, ic = -1, is = -1;
    pf[nf++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    /* While a COMMIT is withheld the client is neither read nor written. */
    if (c->cfd >= 0 && c->phase != PH_AWAIT_REPLY) {
      ic = nf;
      pf[nf++] = (struct pollfd){
          .fd = c->cfd,
          .events = (short)(POLLIN | (c->c_out.len ? POLLOUT : 0))};
    }
    is = nf;
    pf[nf++] = (struct pollfd){
        .fd = c->sfd, .events = (short)(POLLIN | (c->s_out.len ? POLLOUT : 0))};

    int r = poll(pf, (nfds_t)nf, CP_POLL_MS);
    if (r < 0 && errno != EINTR)
      break;
    if (pf[0].revents || atomic_load(&p->drop_gen) != gen)
      break; /* stopping, or drop_all */
    if (c->phase == PH_RELAY && bh_selected(p, c)) {
      blackhole_loop(c, gen); /* what is buffered is never sent */
      break;
    }
    if (c->phase == PH_AWAIT_REPLY &&
        cp_now_ms() - c->await_start_ms > CP_REPLY_TIMEOUT_MS) {
      set_commit_result(p, "TIMEOUT");
      break;
    }
    if (r <= 0)
      continue;

    if (ic >= 0 && (pf[ic].revents & (POLLIN | POLLHUP | POLLERR))) {
      int rr = read_into(c->cfd, &c->c_in);
      if (rr == 0 && client_input(c) != 0)
        rr = -1;
      if (rr != 0) {
        /* The client went away (or spoke garbage): deliver what it sent
         * before, then close. */
        flush_for(c->sfd, &c->s_out, 1000);
        break;
      }
    }
    if (c->phase == PH_DONE) /* cut before COMMIT */
      break;
    if (c->phase == PH_RELAY && bh_selected(p, c)) {
      /* its startup packet named a blackholed application: the packet
       * (still in s_out) never reaches the server */
      blackhole_loop(c, gen);
      break;
    }
    if (pf[is].revents & (POLLIN | POLLHUP | POLLERR)) {
      int rr = read_into(c->sfd, &c->s_in);
      if (rr == 0 && server_input(c) != 0)
        rr = -1;
      if (rr != 0) {
        if (c->phase == PH_AWAIT_REPLY)
          set_commit_result(p, "EOF");
        else if (c->cfd >= 0)
          flush_for(c->cfd, &c->c_out, 1000);
        break;
      }
    }
    if (c->s_out.len && write_from(c->sfd, &c->s_out) != 0) {
      if (c->phase == PH_AWAIT_REPLY)
        set_commit_result(p, "EOF");
      break;
    }
    if (c->cfd >= 0 && c->c_out.len && c->phase != PH_AWAIT_REPLY &&
        write_from(c->cfd, &c->c_out) != 0)
      break;
  }

  /* Cut before COMMIT: what the client sent before the COMMIT still goes
   * out (it was forwarded), the COMMIT itself never does. */
  if (c->fired_mode == CUTPROXY_CUT_BEFORE_COMMIT)
    flush_for(c->sfd, &c->s_out, 1000);
  /* the answers before the COMMIT's, and its 40003 in place of its own */
  if (c->fired_mode == CUTPROXY_ERROR_AFTER_COMMIT)
    flush_for(c->cfd, &c->c_out, 1000);
out:
  close_fd(&c->sfd);
  if (c->fired_mode != CUTPROXY_NONE) {
    pthread_mutex_lock(&p->mu);
    cutproxy_cut_fn fn = p->on_cut;
    void *ud = p->on_cut_ud;
    pthread_mutex_unlock(&p->mu);
    if (fn)
      fn(ud, c->fired_mode);
  }
  close_fd(&c->cfd);
  buf_free(&c->c_in);
  buf_free(&c->c_out);
  buf_free(&c->s_in);
  buf_free(&c->s_out);
  if (c->fired_mode != CUTPROXY_NONE) {
    pthread_mutex_lock(&p->mu);
    p->unsettled--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  atomic_store(&c->done, 1);
  return NULL;
}

/* ---- the listener ------------------------------------------------------ */

static void reap_conns(cutproxy *p, int all)
{
  cp_conn **pp = &p->conns;
  while (*pp) {
    cp_conn *c = *pp;
    if (all || atomic_load(&c->done)) {
      pthread_join(c->th, NULL);
      *pp = c->next;
      free(c);
    } else {
      pp = &c->next;
    }
  }
}

static void *listener_main(void *arg)
{
  cutproxy *p = arg;
  for (;;) {
    struct pollfd pf[2] = {{.fd = p->wake[0], .events = POLLIN},
                           {.fd = p->lfd, .events = POLLIN}};
    int r = poll(pf, 2, 100);
    if (r < 0 && errno != EINTR)
      break;
    if (pf[0].revents)
      break;
    reap_conns(p, 0);
    if (r <= 0 || !(pf[1].revents & POLLIN))
      continue;
    int cfd = accept(p->lfd, NULL, NULL);
    if (cfd < 0)
      continue; /* EAGAIN, ECONNABORTED, ...: try again */
    (void)fcntl(cfd, F_SETFD, FD_CLOEXEC);
    cp_conn *c = calloc(1, sizeof *c);
    if (!c) {
      close(cfd);
      continue;
    }
    c->p = p;
    c->cfd = cfd;
    c->sfd = -1;
    atomic_init(&c->done, 0);
    /* counted before its relay starts: a client whose connection is
     * made (through the relay) must find itself counted (it once raced
     * it_lib_ambiguous_commit's check under TSan) */
    atomic_fetch_add(&p->accepted, 1);
    if (pthread_create(&c->th, NULL, relay_main, c) != 0) {
      fprintf(stderr, "cutproxy: pthread_create failed\n");
      atomic_fetch_sub(&p->accepted, 1);
      close(cfd);
      free(c);
      continue;
    }
    c->next = p->conns;
    p->conns = c;
  }
  reap_conns(p, 1); /* the stop pipe ends every relay thread too */
  return NULL;
}

/* ---- public API -------------------------------------------------------- */

cutproxy *cutproxy_start_on(int listen_port, const char *upstream_host,
                            int upstream_port)
{
  cutproxy *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->lfd = -1;
  p->wake[0] = p->wake[1] = -1;
  atomic_init(&p->armed, CUTPROXY_NONE);
  atomic_init(&p->fired, 0);
  atomic_init(&p->accepted, 0);
  atomic_init(&p->drop_gen, 0);
  atomic_init(&p->bh_all, 0);
  atomic_init(&p->bh_app_set, 0);
  atomic_init(&p->bh_now, 0);
  atomic_init(&p->bh_total, 0);
  atomic_init(&p->match_set, 0);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);

  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", upstream_port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(upstream_host, portstr, &hints, &ai);
  if (gai != 0 || !ai) {
    fprintf(stderr, "cutproxy: resolve %s:%d: %s\n", upstream_host,
            upstream_port, gai_strerror(gai));
    goto fail;
  }
  memcpy(&p->up_addr, ai->ai_addr, ai->ai_addrlen);
  p->up_len = ai->ai_addrlen;
  freeaddrinfo(ai);

  if (pipe(p->wake) != 0) {
    p->wake[0] = p->wake[1] = -1;
    goto fail;
  }
  p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (p->lfd < 0)
    goto fail;
  int one = 1;
  (void)setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)listen_port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(p->lfd, 64) != 0) {
    fprintf(stderr, "cutproxy: listen on 127.0.0.1:%d: %s\n", listen_port,
            strerror(errno));
    goto fail;
  }
  socklen_t slen = sizeof sa;
  if (getsockname(p->lfd, (struct sockaddr *)&sa, &slen) != 0 ||
      set_nonblock(p->lfd) != 0)
    goto fail;
  p->port = ntohs(sa.sin_port);
  if (pthread_create(&p->listener, NULL, listener_main, p) != 0) {
    fprintf(stderr, "cutproxy: pthread_create failed\n");
    goto fail;
  }
  return p;

fail:
  if (p->lfd >= 0)
    close(p->lfd);
  if (p->wake[0] >= 0) {
    close(p->wake[0]);
    close(p->wake[1]);
  }
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return NULL;
}

cutproxy *cutproxy_start(const char *upstream_host, int upstream_port)
{
  return cutproxy_start_on(0, upstream_host, upstream_port);
}

void cutproxy_stop(cutproxy *p)
{
  if (!p)
    return;
  ssize_t w;
  do {
    w = write(p->wake[1], "x", 1);
  } while (w < 0 && errno == EINTR);
  pthread_join(p->listener, NULL);
  close(p->lfd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int cutproxy_port(const cutproxy *p)
{
  return p->port;
}

void cutproxy_arm(cutproxy *p, cutproxy_mode mode)
{
  atomic_store(&p->armed, (int)mode);
}

cutproxy_mode cutproxy_armed(const cutproxy *p)
{
  return (cutproxy_mode)atomic_load(&((cutproxy *)p)->armed);
}

uint64_t cutproxy_fired(const cutproxy *p)
{
  return atomic_load(&((cutproxy *)p)->fired);
}

uint64_t cutproxy_accepted(const cutproxy *p)
{
  return atomic_load(&((cutproxy *)p)->accepted);
}

void cutproxy_commit_result(cutproxy *p, char *out, size_t outlen)
{
  if (!outlen)
    return;
  pthread_mutex_lock(&p->mu);
  snprintf(out, outlen, "%s", p->commit_result);
  pthread_mutex_unlock(&p->mu);
}

int cutproxy_wait_settled(cutproxy *p, int timeout_ms)
{
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->mu);
  int rc = 0;
  while (p->unsettled > 0 && rc == 0)
    rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
  int ok = p->unsettled == 0;
  pthread_mutex_unlock(&p->mu);
  return ok;
}

void cutproxy_on_cut(cutproxy *p, cutproxy_cut_fn fn, void *ud)
{
  pthread_mutex_lock(&p->mu);
  p->on_cut = fn;
  p->on_cut_ud = ud;
  pthread_mutex_unlock(&p->mu);
}

void cutproxy_drop_all(cutproxy *p)
{
  atomic_fetch_add(&p->drop_gen, 1);
}

void cutproxy_blackhole_app(cutproxy *p, const char *app)
{
  pthread_mutex_lock(&p->mu);
  snprintf(p->bh_app, sizeof p->bh_app, "%s", app ? app : "");
  atomic_store(&p->bh_app_set, p->bh_app[0] != '\0');
  pthread_mutex_unlock(&p->mu);
}

void cutproxy_blackhole_all(cutproxy *p)
{
  atomic_store(&p->bh_all, 1);
}

void cutproxy_unblackhole(cutproxy *p)
{
  atomic_store(&p->bh_all, 0);
  cutproxy_blackhole_app(p, NULL);
}

int cutproxy_blackholed_now(const cutproxy *p)
{
  return atomic_load(&((cutproxy *)p)->bh_now);
}

uint64_t cutproxy_blackholed_total(const cutproxy *p)
{
  return atomic_load(&((cutproxy *)p)->bh_total);
}

void cutproxy_set_match(cutproxy *p, const char *text)
{
  pthread_mutex_lock(&p->mu);
  snprintf(p->match, sizeof p->match, "%s", text ? text : "");
  atomic_store(&p->match_set, p->match[0] != '\0');
  pthread_mutex_unlock(&p->mu);
}

const char *cutproxy_mode_name(cutproxy_mode mode)
{
  switch (mode) {
  case CUTPROXY_NONE:
    return "none";
  case CUTPROXY_CUT_BEFORE_COMMIT:
    return "cut-before-commit";
  case CUTPROXY_CUT_AFTER_COMMIT:
    return "cut-after-commit";
  case CUTPROXY_CUT_DURING_COMMIT:
    return "cut-during-commit";
  case CUTPROXY_CUT_AFTER_MATCH:
    return "cut-after-match";
  case CUTPROXY_ERROR_AFTER_COMMIT:
    return "error-after-commit";
  }
  return "?";
}
