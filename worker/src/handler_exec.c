/*
 * handler_exec.c: the --exec handler (handler_exec.h). Each call owns one
 * child process from spawn to reaping: its pipes, its process group and the
 * tails of what it printed.
 *
 * Terms:
 *  - leader: the child we spawn. It leads its own process group (pgid ==
 *    its pid), so one kill(-pid, ...) reaches everything it started.
 *  - tail: the last WK_TAIL_MAX bytes of a stream; older bytes are dropped
 *    as new ones arrive, so a chatty child costs a fixed amount of memory.
 *  - exited: the leader has ended but is not reaped yet (a zombie). While
 *    it is a zombie its pid, and so its group id, cannot be reused; that is
 *    why the group is always signalled before the leader is reaped.
 *
 * A call is a small state machine stepped once per poll() wake-up (at most
 * every 100 ms while a cancel check is set):
 *
 *   RUNNING      - stdin fed, stdout/stderr read, deadline and cancel watched
 *   TERMINATING  - timeout or cancel: SIGTERM sent to the group; SIGKILL to
 *                  the group at kill_at_ms (moved to now when the task's
 *                  kill_now check says the session is about to expire)
 *   LINGERING    - the leader died of the SIGTERM; the rest of the group
 *                  keeps the rest of the grace to clean up. It ends early
 *                  once our pipes are at EOF (the usual sign that nobody
 *                  is left), else the group gets SIGKILL at kill_at_ms
 *   KILLING      - SIGKILL sent; waiting for the leader to die
 *   EXITED       - the leader ended and the rest of the group got SIGKILL;
 *                  the pipes are drained until EOF or drain_until_ms, then
 *                  the leader is reaped
 *
 * Decisions:
 *  - posix_spawnp, no shell. fork() of a multi-threaded worker copies its
 *    page tables and takes copy-on-write faults and TLB shootdowns on every
 *    thread; glibc's posix_spawn clones with CLONE_VM|CLONE_VFORK instead,
 *    so starting a child costs about what exec costs. The child is set up
 *    by spawn attributes: its own process group (POSIX_SPAWN_SETPGROUP,
 *    pgid == pid), default dispositions for every signal (SETSIGDEF) and
 *    an empty mask (SETSIGMASK); stdin/stdout/stderr are dup2'ed from our
 *    pipes and every fd from 3 up is closed (addclosefrom_np, glibc 2.34).
 *  - An exec failure (not found, not executable) is posix_spawnp's return
 *    value: glibc reports it from the child before the parent resumes.
 *  - Every fd we create is O_CLOEXEC; the child also closes every fd above 2
 *    (a spawn file action), so it inherits none of the worker's database or
 *    HTTP sockets even if another module forgot the flag.
 *  - The child starts with default signal dispositions and an empty mask,
 *    whatever the worker ignores or blocks (a worker that ignores SIGPIPE
 *    must not hand that to `yes | head`).
 *  - SIGPIPE: a child may close stdin before reading the payload. Instead
 *    of changing the process-wide disposition (which belongs to the
 *    program, not to a handler), SIGPIPE is blocked in the calling thread
 *    for the call; a SIGPIPE our own write raised is consumed with
 *    sigtimedwait() before the mask is restored, so it is never delivered.
 *    Our write sees EPIPE and stops feeding stdin; that is not an error.
 *  - Leftovers: when the leader ends by itself, whatever is left in its
 *    group gets SIGKILL at once, whatever the exit status: an item's
 *    processes end with the item, or a forgotten background process would
 *    escape the timeout and the worker's shutdown. (On timeout or cancel
 *    the group got SIGTERM with the leader and keeps the grace, see
 *    LINGERING.) A process that must outlive its item has to leave the
 *    group (setsid). Such an escapee may still hold our pipes open, so
 *    after the group is killed we read for at most EXEC_DRAIN_MS more.
 *  - The environment is built once (wk_exec_env_new), not copied from
 *    environ per call: a child sees the safe base and the operator's
 *    --env, never the worker's database URL, PGPASSWORD or status token,
 *    and its output tails are published (result, last_error, status page,
 *    webhooks), so whatever it can read, it can leak.
 *  - Only our own pid is ever waited for (other threads run other
 *    children): waitid(WNOWAIT) to notice the end, waitpid(pid) to reap.
 */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np,        \
                       sigabbrev_np */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler_exec.h"

#define EXEC_CANCEL_POLL_MS 100 /* cancel check period (task.h) */
#define EXEC_EXIT_POLL_MS 20    /* exit check period without a pidfd */
#define EXEC_DRAIN_MS 250       /* reading after the leader ended */
#define EXEC_DEFAULT_GRACE_MS 5000
#define EXEC_READ_CHUNK 8192

typedef enum exec_state {
  EX_RUNNING,     /* working: stdin fed, outputs read */
  EX_TERMINATING, /* SIGTERM sent to the group; SIGKILL at kill_at_ms */
  EX_LINGERING,   /* leader dead; the rest of the group until kill_at_ms */
  EX_KILLING,     /* SIGKILL sent; waiting for the leader to die */
  EX_EXITED       /* leader is a zombie; draining until drain_until_ms */
} exec_state;

/* Why the call stopped the child; the first reason wins. */
typedef enum exec_stop {
  STOP_NONE,    /* the leader ended by itself */
  STOP_TIMEOUT, /* cfg->timeout_ms passed */
  STOP_CANCEL   /* t->cancelled said so */
} exec_stop;

typedef struct tail {
  char buf[WK_TAIL_MAX];
  size_t len;     /* bytes kept, <= WK_TAIL_MAX */
  bool truncated; /* older bytes were dropped */
} tail;

typedef struct exec_call {
  const wk_exec_cfg *cfg;
  const wk_task *t;
  char **argv;        /* cfg->argv + item id; strings borrowed */
  char **envp;        /* cfg->env minus our names + env_own; array owned */
  char *env_own[3];   /* ONCEQ_ITEM_ID=, ONCEQ_QUEUE=, ONCEQ_ATTEMPT= */
  pid_t pid;          /* the leader; -1 before spawn and after reaping */
  int pidfd;          /* readable when the leader ends; -1: not available */
  int in_fd;          /* our end of the child's stdin; -1 once closed */
  int out_fd, err_fd; /* our ends of stdout/stderr; -1 at EOF */
  const char *payload;
  size_t payload_len, payload_off; /* bytes; off = already written */
  bool got_epipe;                  /* our write raised SIGPIPE */
  exec_state st;
  exec_stop stop;
  bool sent_kill;          /* the group needed SIGKILL */
  bool leader_done;        /* the leader ended (a zombie until reaped) */
  bool pid_lost;           /* reaped behind our back: never signal it */
  int grace_ms;            /* SIGTERM -> SIGKILL delay */
  uint64_t deadline_ms;    /* monotonic; 0: no timeout */
  uint64_t kill_at_ms;     /* monotonic; TERMINATING and LINGERING */
  uint64_t drain_until_ms; /* monotonic; valid in EX_EXITED */
  int status;              /* waitpid status once reaped */
  bool status_known;       /* false: someone else reaped the leader */
  tail out, err;
} exec_call;

static void close_fd(int *fd)
{
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

/* Keep the last WK_TAIL_MAX bytes of everything appended. */
static void tail_add(tail *t, const char *p, size_t n)
{
  if (n >= WK_TAIL_MAX) {
    t->truncated = t->truncated || t->len > 0 || n > WK_TAIL_MAX;
    memcpy(t->buf, p + n - WK_TAIL_MAX, WK_TAIL_MAX);
    t->len = WK_TAIL_MAX;
    return;
  }
  if (t->len + n > WK_TAIL_MAX) {
    size_t drop = t->len + n - WK_TAIL_MAX;
    memmove(t->buf, t->buf + drop, t->len - drop);
    t->len -= drop;
    t->truncated = true;
  }
  memcpy(t->buf + t->len, p, n);
  t->len += n;
}

/*
 * Write prefix, then as much of the END of the tail as fits, into dst
 * (size bytes, always NUL-terminated). The text becomes a C string and
 * then a database value, so it goes through oq_text_clean (onceq/text.h):
 * a stray NUL or a byte that is not UTF-8 (a Latin-1 "M\374ller") becomes
 * '?' rather than failing the INSERT that records the failure, and a cut
 * never starts or ends inside a UTF-8 sequence.
 */
static bool put_text(char *dst, size_t size, const char *prefix, const tail *t)
{
  size_t plen = strlen(prefix);
  if (plen > size - 1)
    plen = size - 1;
  memcpy(dst, prefix, plen);
  size_t room = size - 1 - plen;
  size_t start = t->len > room ? t->len - room : 0;
  if (start > 0 || t->truncated) {
    for (int i = 0; i < 3 && start < t->len; i++) {
      if (((unsigned char)t->buf[start] & 0xC0) != 0x80)
        break;
      start++;
    }
  }
  oq_text_clean(dst + plen, size - plen, t->buf + start, t->len - start);
  return start > 0 || t->truncated; /* some of what it printed is not here */
}

/* "cannot run CMD: <what>: <strerror>" into r->error, outcome failed. */
static void start_error(wk_result *r, const char *cmd, const char *what,
                        int err)
{
  char buf[128];
  const char *msg = strerror_r(err, buf, sizeof buf); /* GNU variant */
  r->outcome = WK_FAILED;
  snprintf(r->error, sizeof r->error, "cannot run %s: %s%s%s", cmd,
           what ? what : "", what ? ": " : "", msg);
}

/* "NAME=value", malloc'd; NULL on out-of-memory. */
static char *env_pair(const char *name, const char *value)
{
  size_t n = strlen(name) + 1 + strlen(value) + 1;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s=%s", name, value);
  return s;
}

/* The names the worker sets for each item: never taken from elsewhere. */
static const char *const item_names[] = {"ONCEQ_ITEM_ID", "ONCEQ_QUEUE",
                                         "ONCEQ_ATTEMPT"};

/* Length of the NAME part of "NAME=VALUE" (or of a bare "NAME"). */
static size_t name_len(const char *entry)
{
  const char *eq = strchr(entry, '=');
  return eq ? (size_t)(eq - entry) : strlen(entry);
}

static bool same_name(const char *a, const char *b)
{
  size_t n = name_len(a);
  return n == name_len(b) && strncmp(a, b, n) == 0;
}

bool wk_exec_env_is_item_name(const char *name, size_t len)
{
  for (size_t i = 0; i < sizeof item_names / sizeof item_names[0]; i++) {
    if (strlen(item_names[i]) == len && strncmp(name, item_names[i], len) == 0)
      return true;
  }
  return false;
}

static bool env_is_ours(const char *entry)
{
  return wk_exec_env_is_item_name(entry, name_len(entry));
}

/*
 * The safe base: what a program needs to find commands, files and its
 * locale, copied when the worker has it. Nothing here opens a door: no
 * credentials, no library or loader switches (LD_*), no proxy settings.
 */
static bool env_is_base(const char *entry)
{
  static const char *const names[] = {"PATH",  "HOME",  "USER", "LOGNAME",
                                      "SHELL", "TERM",  "LANG", "LANGUAGE",
                                      "TZ",    "TMPDIR"};
  size_t n = name_len(entry);
  if (n > 3 && strncmp(entry, "LC_", 3) == 0)
    return true;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strlen(names[i]) == n && strncmp(entry, names[i], n) == 0)
      return true;
  }
  return false;
}

/* The names the worker or libpq read credentials from: never passed
 * unless asked for, and asking is worth a warning. */
static bool env_is_credential(const char *name)
{
  static const char *const names[] = {"ONCEQ_DATABASE_URL", "DATABASE_URL",
                                      "ONCEQ_STATUS_TOKEN"};
  size_t n = name_len(name);
  if (n > 2 && strncmp(name, "PG", 2) == 0)
    return true;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strlen(names[i]) == n && strncmp(name, names[i], n) == 0)
      return true;
  }
  return false;
}

/* Put entry (owned) into env (room for it), replacing one of its name. */
static void env_put(char **env, size_t *n, char *entry)
{
  for (size_t i = 0; i < *n; i++) {
    if (same_name(env[i], entry)) {
      free(env[i]);
      env[i] = entry;
      return;
    }
  }
  env[(*n)++] = entry;
}

char **wk_exec_env_new(const char *const *specs, size_t nspecs)
{
  size_t envc = 0, n = 0;
  for (char **e = environ; e && *e; e++)
    envc++;
  char **env = calloc(envc + nspecs + 1, sizeof *env);
  if (!env)
    return NULL;
  for (size_t i = 0; i < envc; i++) {
    if (!env_is_base(environ[i]) || env_is_ours(environ[i]))
      continue;
    char *copy = strdup(environ[i]);
    if (!copy)
      goto nomem;
    env_put(env, &n, copy);
  }
  for (size_t i = 0; i < nspecs; i++) {
    const char *spec = specs[i];
    size_t len = name_len(spec);
    char *entry;
    if (env_is_ours(spec))
      continue; /* config.c refuses these; the item's own value wins */
    if (env_is_credential(spec))
      OQ_LOG(OQ_LOG_WARN, NULL, NULL,
             "--env %.*s hands a credential the worker withholds by default "
             "to every --exec child; what the child prints becomes its "
             "result or last_error (status page, /api/dead, webhooks)",
             (int)len, spec);
    if (spec[len] == '=') {
      entry = strdup(spec);
    } else {
      const char *v = getenv(spec);
      if (!v) {
        OQ_LOG(OQ_LOG_WARN, NULL, NULL,
               "--env %s: not set in the worker's environment; children get "
               "no %s",
               spec, spec);
        continue;
      }
      entry = env_pair(spec, v);
    }
    if (!entry)
      goto nomem;
    env_put(env, &n, entry);
  }
  return env;
nomem:
  wk_exec_env_free(env);
  return NULL;
}

void wk_exec_env_free(char **env)
{
  if (!env)
    return;
  for (char **e = env; *e; e++)
    free(*e);
  free(env);
}

/*
 * Build argv (the command, then the item id) and envp (cfg->env, the
 * environment built once by wk_exec_env_new, then our three variables).
 * Built before the spawn (the child shares our memory until exec).
 * Returns 0, or -1 on out-of-memory.
 */
static int build_args(exec_call *c)
{
  const oq_item *it = c->t->item;
  char attempt[16];
  size_t argc = 0, envc = 0;

  while (c->cfg->argv[argc])
    argc++;
  c->argv = calloc(argc + 2, sizeof *c->argv);
  if (!c->argv)
    return -1;
  for (size_t i = 0; i < argc; i++)
    c->argv[i] = c->cfg->argv[i];
  /* execvpe takes char *const[]; the strings are never written. */
  c->argv[argc] = (char *)it->id;

  snprintf(attempt, sizeof attempt, "%d", it->attempt);
  c->env_own[0] = env_pair(item_names[0], it->id);
  c->env_own[1] = env_pair(item_names[1], it->queue ? it->queue : "");
  c->env_own[2] = env_pair(item_names[2], attempt);
  if (!c->env_own[0] || !c->env_own[1] || !c->env_own[2])
    return -1;

  char *const *base = c->cfg->env;
  while (base && base[envc])
    envc++;
  c->envp = calloc(envc + 4, sizeof *c->envp);
  if (!c->envp)
    return -1;
  size_t n = 0;
  for (size_t i = 0; i < envc; i++) {
    if (!env_is_ours(base[i]))
      c->envp[n++] = base[i];
  }
  for (size_t i = 0; i < 3; i++)
    c->envp[n++] = c->env_own[i];
  return 0;
}

/* Keep fd out of 0..2 (the worker may run with those closed), so the
 * child's dup2 onto 0..2 cannot clobber another pipe end. -1 on error. */
static int above_stdio(int *fd)
{
  if (*fd > 2)
    return 0;
  int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0)
    return -1;
  close(*fd);
  *fd = moved;
  return 0;
}

/* Where PATH finds cmd (as execvp would), into buf; false if nowhere. */
static bool resolve_in_path(const char *cmd, char *buf, size_t len)
{
  if (strchr(cmd, '/')) {
    snprintf(buf, len, "%s", cmd);
    return true;
  }
  const char *path = getenv("PATH");
  if (!path || !*path)
    path = "/bin:/usr/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t dl = end ? (size_t)(end - path) : strlen(path);
    int n = snprintf(buf, len, "%.*s%s%s", (int)dl, dl ? path : ".",
                     dl ? "/" : "/", cmd);
    if (n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
      return true;
    if (!end)
      break;
    path = end + 1;
  }
  return false;
}

/*
 * An executable file without a #! line: execvp runs it with /bin/sh, and so
 * did this handler before it used posix_spawnp, which (glibc >= 2.15) does
 * not. Keep execvp's behaviour: /bin/sh FILE ARGS...
 */
static int spawn_with_sh(const exec_call *c,
                         const posix_spawn_file_actions_t *fa,
                         const posix_spawnattr_t *at, pid_t *pid)
{
  char file[4096];
  if (!resolve_in_path(c->argv[0], file, sizeof file))
    return ENOEXEC;
  size_t argc = 0;
  while (c->argv[argc])
    argc++;
  char **sh_argv = calloc(argc + 2, sizeof *sh_argv);
  if (!sh_argv)
    return ENOMEM;
  sh_argv[0] = "/bin/sh";
  sh_argv[1] = file;
  for (size_t i = 1; i < argc; i++)
    sh_argv[i + 1] = c->argv[i];
  int rc = posix_spawn(pid, "/bin/sh", fa, at, sh_argv, c->envp);
  free(sh_argv);
  return rc;
}

/* Start the child: returns 0 and *pid, or an errno (posix_spawnp's; an
 * exec failure included) with *step naming a set-up step or NULL. */
static int spawn_child(const exec_call *c, int in_fd, int out_fd, int err_fd,
                       pid_t *pid, const char **step)
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  *step = "spawn set-up";
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc != 0)
    return rc;
  rc = posix_spawnattr_init(&at);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return rc;
  }
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  if ((rc = posix_spawn_file_actions_adddup2(&fa, in_fd, 0)) == 0 &&
      (rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 1)) == 0 &&
      (rc = posix_spawn_file_actions_adddup2(&fa, err_fd, 2)) == 0 &&
      (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
      (rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
                                              POSIX_SPAWN_SETSIGDEF |
                                              POSIX_SPAWN_SETSIGMASK)) == 0 &&
      (rc = posix_spawnattr_setpgroup(&at, 0)) == 0 &&
      (rc = posix_spawnattr_setsigdefault(&at, &all)) == 0 &&
      (rc = posix_spawnattr_setsigmask(&at, &none)) == 0) {
    *step = NULL; /* an exec error reads best bare: "cannot run x: ..." */
    rc = posix_spawnp(pid, c->argv[0], &fa, &at, c->argv, c->envp);
    if (rc == ENOEXEC)
      rc = spawn_with_sh(c, &fa, &at, pid);
  }
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

/*
 * SIGPIPE guard for the calling thread (see "Decisions" above): block it
 * for the call; at the end swallow the one our write raised, unless one
 * was already pending before the call (that one is not ours to eat).
 */
typedef struct sigpipe_guard {
  sigset_t old; /* the thread's mask before the call */
  bool active;
  bool was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g)
{
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  g->active = pthread_sigmask(SIG_BLOCK, &set, &g->old) == 0;
  sigemptyset(&pending);
  g->was_pending =
      sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_restore(sigpipe_guard *g, bool got_epipe)
{
  if (!g->active)
    return;
  if (got_epipe && !g->was_pending) {
    sigset_t set;
    struct timespec zero = {0, 0};
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Signal the leader's group, unless its id may belong to someone else. */
static void signal_group(exec_call *c, int sig)
{
  if (!c->pid_lost)
    (void)kill(-c->pid, sig);
}

/* True once the leader has ended; it stays a zombie (WNOWAIT) so its
 * group id stays reserved until we reap it. */
static bool leader_ended(exec_call *c)
{
  siginfo_t si;
  int rc;
  memset(&si, 0, sizeof si);
  do {
    rc = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    /* ECHILD: the program set SIGCHLD to SIG_IGN, so the kernel reaped
     * the leader and its id is free for reuse. */
    c->pid_lost = true;
    return true;
  }
  return si.si_pid == c->pid;
}

/* Timeout or cancel: SIGTERM the whole group, stop feeding stdin. */
static void begin_termination(exec_call *c, exec_stop why, uint64_t now)
{
  c->stop = why;
  signal_group(c, SIGTERM);
  close_fd(&c->in_fd);
  c->kill_at_ms = now + (uint64_t)c->grace_ms;
  c->st = EX_TERMINATING;
}

/* Write what the pipe takes now; EPIPE means the child closed stdin. */
static void feed_stdin(exec_call *c)
{
  size_t left = c->payload_len - c->payload_off;
  ssize_t n = write(c->in_fd, c->payload + c->payload_off, left);
  if (n > 0) {
    c->payload_off += (size_t)n;
    if (c->payload_off == c->payload_len)
      close_fd(&c->in_fd); /* EOF: the child may stop reading */
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0 && errno == EPIPE)
    c->got_epipe = true;
  close_fd(&c->in_fd); /* the child does not want the rest */
}

/* One read from a readable stream into its tail; closes it at EOF. */
static void drain_once(int *fd, tail *t)
{
  char chunk[EXEC_READ_CHUNK];
  ssize_t n = read(*fd, chunk, sizeof chunk);
  if (n > 0)
    tail_add(t, chunk, (size_t)n);
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    close_fd(fd);
}

/* Poll timeout: the smaller of cur (-1: none) and ms_left. */
static int shorter(int cur, uint64_t until, uint64_t now)
{
  uint64_t left = until > now ? until - now : 0;
  if (left > INT32_MAX)
    left = INT32_MAX;
  if (cur < 0 || (int)left < cur)
    return (int)left;
  return cur;
}

/* SIGKILL the group (the zombie leader keeps its id reserved) and read
 * what is left for at most drain_ms. `late`: someone outlived the grace. */
static void kill_group(exec_call *c, bool late, uint64_t now, int drain_ms)
{
  signal_group(c, SIGKILL);
  c->sent_kill = c->sent_kill || late;
  c->drain_until_ms = now + (uint64_t)drain_ms;
  c->st = EX_EXITED;
}

/* Step the state machine until the leader is reaped. */
static void supervise(exec_call *c)
{
  for (;;) {
    uint64_t now = oq_monotonic_ms();

    if (!c->leader_done && leader_ended(c)) {
      c->leader_done = true;
      close_fd(&c->in_fd);
      if (c->st == EX_TERMINATING)
        c->st = EX_LINGERING;
      else if (c->st != EX_EXITED)
        kill_group(c, false, now, EXEC_DRAIN_MS); /* leftovers end now */
    }
    /* a fenced session's expiry is near: no grace is left for anyone */
    if ((c->st == EX_RUNNING || c->st == EX_TERMINATING ||
         c->st == EX_LINGERING) &&
        c->t->kill_now && c->t->kill_now(c->t->cancel_ctx)) {
      if (c->st == EX_RUNNING)
        begin_termination(c, STOP_CANCEL, now);
      c->kill_at_ms = now;
    }
    switch (c->st) {
    case EX_RUNNING:
      if (c->t->cancelled && c->t->cancelled(c->t->cancel_ctx))
        begin_termination(c, STOP_CANCEL, now);
      else if (c->deadline_ms && now >= c->deadline_ms)
        begin_termination(c, STOP_TIMEOUT, now);
      break;
    case EX_TERMINATING:
      if (now >= c->kill_at_ms) {
        signal_group(c, SIGKILL);
        c->sent_kill = true;
        c->st = EX_KILLING;
      }
      break;
    case EX_LINGERING:
      /* Pipes at EOF: the group is most likely gone; the SIGKILL is only
       * for members that closed or redirected their output. */
      if (c->out_fd < 0 && c->err_fd < 0)
        kill_group(c, false, now, 0);
      else if (now >= c->kill_at_ms)
        kill_group(c, true, now, EXEC_DRAIN_MS);
      break;
    case EX_KILLING:
      break;
    case EX_EXITED:
      if ((c->out_fd < 0 && c->err_fd < 0) || now >= c->drain_until_ms)
        goto reap;
      break;
    }

    int wait_ms = -1;
    switch (c->st) {
    case EX_RUNNING:
      if (c->t->cancelled)
        wait_ms = EXEC_CANCEL_POLL_MS;
      if (c->deadline_ms)
        wait_ms = shorter(wait_ms, c->deadline_ms, now);
      break;
    case EX_TERMINATING:
    case EX_LINGERING:
      wait_ms = shorter(wait_ms, c->kill_at_ms, now);
      if (c->t->kill_now && (wait_ms < 0 || wait_ms > EXEC_CANCEL_POLL_MS))
        wait_ms = EXEC_CANCEL_POLL_MS;
      break;
    case EX_KILLING:
      break;
    case EX_EXITED:
      wait_ms = shorter(wait_ms, c->drain_until_ms, now);
      break;
    }
    if (c->pidfd < 0 && !c->leader_done &&
        (wait_ms < 0 || wait_ms > EXEC_EXIT_POLL_MS))
      wait_ms = EXEC_EXIT_POLL_MS;

    struct pollfd p[4] = {
        {.fd = c->in_fd, .events = POLLOUT},
        {.fd = c->out_fd, .events = POLLIN},
        {.fd = c->err_fd, .events = POLLIN},
        {.fd = c->leader_done ? -1 : c->pidfd, .events = POLLIN},
    };
    int n = poll(p, 4, wait_ms);
    if (n < 0 && errno != EINTR) {
      /* Cannot happen with valid fds; avoid a busy loop regardless. */
      (void)poll(NULL, 0, EXEC_EXIT_POLL_MS);
      continue;
    }
    if (n <= 0)
      continue;
    if (c->in_fd >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
      feed_stdin(c);
    if (c->out_fd >= 0 && (p[1].revents & (POLLIN | POLLERR | POLLHUP)))
      drain_once(&c->out_fd, &c->out);
    if (c->err_fd >= 0 && (p[2].revents & (POLLIN | POLLERR | POLLHUP)))
      drain_once(&c->err_fd, &c->err);
    /* pidfd readiness needs no action: the next leader_ended() sees it. */
  }

reap:
  while (!c->pid_lost) {
    pid_t w = waitpid(c->pid, &c->status, 0);
    if (w == c->pid) {
      c->status_known = true;
      break;
    }
    if (w < 0 && errno != EINTR)
      break; /* ECHILD: see leader_ended */
  }
  c->pid = -1;
}

/* "exit status 3", "killed by signal 9 (SIGKILL)", ... */
static void describe_status(const exec_call *c, char *buf, size_t size)
{
  int s = c->status;
  if (!c->status_known) {
    snprintf(buf, size, "exit status unknown (SIGCHLD is ignored)");
  } else if (WIFEXITED(s)) {
    snprintf(buf, size, "exit status %d", WEXITSTATUS(s));
  } else if (WIFSIGNALED(s)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(s));
    snprintf(buf, size, "killed by signal %d (SIG%s)%s", WTERMSIG(s),
             abbrev ? abbrev : "?", WCOREDUMP(s) ? ", core dumped" : "");
  } else {
    snprintf(buf, size, "wait status %d", s);
  }
}

/* Turn the ended call into r (see handler_exec.h for the texts). */
static void fill_result(const exec_call *c, wk_result *r)
{
  char reason[160];
  char grace[64] = "";

  if (c->sent_kill)
    snprintf(grace, sizeof grace, ", SIGKILL after %d ms grace", c->grace_ms);
  switch (c->stop) {
  case STOP_CANCEL:
    r->outcome = WK_ABANDONED;
    snprintf(reason, sizeof reason, "cancelled%s", grace);
    break;
  case STOP_TIMEOUT:
    r->outcome = WK_FAILED;
    snprintf(reason, sizeof reason, "timed out after %d ms%s",
             c->cfg->timeout_ms, grace);
    break;
  case STOP_NONE:
  default:
    if (c->status_known && WIFEXITED(c->status) &&
        WEXITSTATUS(c->status) == 0) {
      r->outcome = WK_OK;
      reason[0] = '\0';
    } else {
      r->outcome = WK_FAILED;
      describe_status(c, reason, sizeof reason);
    }
    break;
  }
  r->output_cut = put_text(r->output, sizeof r->output, "", &c->out);
  if (r->outcome == WK_OK) {
    r->error[0] = '\0';
    return;
  }
  if (c->err.len > 0) {
    size_t n = strlen(reason);
    snprintf(reason + n, sizeof reason - n, ": ");
  }
  (void)put_text(r->error, sizeof r->error, reason, &c->err);
}

int wk_exec_run(const wk_exec_cfg *cfg, const wk_task *t, wk_result *r)
{
  int rc = -1;
  exec_call *c = NULL;
  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
  sigpipe_guard guard = {.active = false};
  const char *cmd = cfg && cfg->argv && cfg->argv[0] ? cfg->argv[0] : "";

  wk_result_init(r);
  if (!cfg || !cfg->argv || !cfg->argv[0] || !t || !t->item) {
    snprintf(r->error, sizeof r->error, "exec handler: no command or item");
    goto out;
  }
  /* Heap, not stack: two tails plus state is ~8 KiB per call. */
  c = calloc(1, sizeof *c);
  if (!c) {
    start_error(r, cmd, NULL, ENOMEM);
    goto out;
  }
  c->cfg = cfg;
  c->t = t;
  c->pid = -1;
  c->pidfd = c->in_fd = c->out_fd = c->err_fd = -1;
  c->grace_ms =
      cfg->kill_grace_ms > 0 ? cfg->kill_grace_ms : EXEC_DEFAULT_GRACE_MS;
  c->payload = t->item->payload ? t->item->payload : "";
  c->payload_len = strlen(c->payload);
  if (build_args(c) < 0) {
    start_error(r, cmd, NULL, ENOMEM);
    goto out;
  }

  if (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 ||
      pipe2(err_p, O_CLOEXEC) < 0) {
    start_error(r, cmd, "pipe", errno);
    goto out;
  }
  if (above_stdio(&in_p[0]) < 0 || above_stdio(&out_p[1]) < 0 ||
      above_stdio(&err_p[1]) < 0) {
    start_error(r, cmd, "redirect", errno);
    goto out;
  }
  /* Our ends never block: poll() decides when to read or write. */
  if (fcntl(in_p[1], F_SETFL, O_NONBLOCK) < 0 ||
      fcntl(out_p[0], F_SETFL, O_NONBLOCK) < 0 ||
      fcntl(err_p[0], F_SETFL, O_NONBLOCK) < 0) {
    start_error(r, cmd, "fcntl", errno);
    goto out;
  }

  sigpipe_block(&guard);
  const char *step = NULL;
  pid_t pid = -1;
  int spawn_err = spawn_child(c, in_p[0], out_p[1], err_p[1], &pid, &step);
  if (spawn_err != 0) {
    start_error(r, cmd, step, spawn_err);
    goto out;
  }
  c->pid = pid;
  close_fd(&in_p[0]);
  close_fd(&out_p[1]);
  close_fd(&err_p[1]);

  c->in_fd = in_p[1];
  c->out_fd = out_p[0];
  c->err_fd = err_p[0];
  in_p[1] = out_p[0] = err_p[0] = -1;
  if (c->payload_len == 0)
    close_fd(&c->in_fd);
  /* Without a pidfd (old kernel, seccomp) supervise() polls waitid. */
  c->pidfd = pidfd_open(c->pid, 0);
  c->deadline_ms =
      cfg->timeout_ms > 0 ? oq_monotonic_ms() + (uint64_t)cfg->timeout_ms : 0;
  c->st = EX_RUNNING;
  c->stop = STOP_NONE;

  supervise(c);
  fill_result(c, r);
  rc = 0;

out:
  if (c && c->pid > 0) {
    /* Defensive: no path jumps here with a live child today; if one is
     * added, the child must not outlive the call. */
    (void)kill(-c->pid, SIGKILL);
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  if (guard.active)
    sigpipe_restore(&guard, c && c->got_epipe);
  for (int i = 0; i < 2; i++) {
    close_fd(&in_p[i]);
    close_fd(&out_p[i]);
    close_fd(&err_p[i]);
  }
  if (c) {
    close_fd(&c->pidfd);
    close_fd(&c->in_fd);
    close_fd(&c->out_fd);
    close_fd(&c->err_fd);
    free(c->argv);
    free(c->envp);
    for (int i = 0; i < 3; i++)
      free(c->env_own[i]);
    free(c);
  }
  return rc;
}
