/*
 * lazylib.c: dlopen once, dlsym per symbol (lazylib.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lazylib.h"

#define LAZY_LIBS 4

typedef struct lib {
  const char *soname;
  void *handle;
  int failed;
} lib;

static lib libs[LAZY_LIBS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void *cm_lazy_sym(const char *soname, const char *package, const char *sym)
{
  void *h = NULL;
  int failed = 0;
  pthread_mutex_lock(&mu);
  lib *l = NULL;
  for (int i = 0; i < LAZY_LIBS && !l; i++)
    if (!libs[i].soname || strcmp(libs[i].soname, soname) == 0)
      l = &libs[i];
  if (l && !l->soname)
    l->soname = soname;
  if (l && !l->handle && !l->failed) {
    /* RTLD_LOCAL: its symbols stay out of the global scope, so ours (the
     * forwarders) and its own never meet */
    l->handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!l->handle) {
      l->failed = 1;
      fprintf(stderr,
              "onceq: cannot load %s (%s); install the Debian package %s\n",
              soname, dlerror(), package);
    }
  }
  if (l) {
    h = l->handle;
    failed = l->failed;
  }
  pthread_mutex_unlock(&mu);
  if (!h || failed)
    return NULL;
  void *p = dlsym(h, sym);
  if (!p)
    fprintf(stderr, "onceq: %s has no %s; install the Debian package %s\n",
            soname, sym, package);
  return p;
}

#define LEAN_VAR "GNUTLS_NO_IMPLICIT_INIT"
#define LEAN_MARK "ONCEQ_LEAN_EXEC" /* its value: the first start's clock */

static uint64_t started_us;

static uint64_t mono_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

double cm_seconds_since_start(void)
{
  return started_us ? (double)(mono_us() - started_us) / 1e6 : 0.0;
}

void cm_exec_lean(char **argv)
{
  const char *mark = getenv(LEAN_MARK);
  if (mark) { /* the second start: we set it, take it back */
    started_us = strtoull(mark, NULL, 10);
    if (!started_us || started_us > mono_us())
      started_us = mono_us(); /* not ours: count from here */
    unsetenv(LEAN_VAR);
    unsetenv(LEAN_MARK);
    return;
  }
  started_us = mono_us();
  if (getenv(LEAN_VAR) || !argv || !argv[0])
    return;
  /* the file's own path, not /proc/self/exe: the kernel names the
   * process after the file executed (comm), and `ps -C onceq-worker`,
   * pgrep and deploy/quickstart.sh's stop look for that name */
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || (size_t)len >= sizeof self - 1)
    return;
  self[len] = '\0';
  char t[32];
  snprintf(t, sizeof t, "%llu", (unsigned long long)started_us);
  if (setenv(LEAN_VAR, "1", 1) != 0 || setenv(LEAN_MARK, t, 1) != 0)
    return;
  execv(self, argv);
  /* not re-executed: carry on as we are */
  unsetenv(LEAN_VAR);
  unsetenv(LEAN_MARK);
}
