/*
 * lazylib.h: libmicrohttpd and libcurl loaded on first use, not at start.
 *
 * Linked normally, the two pull about 3 MiB of resident pages into every
 * daemon (GnuTLS initialises itself at load time through libmicrohttpd;
 * libcurl brings libssh2, LDAP, RTMP, ...), although most workers never
 * serve /metrics nor POST anything. lazy_mhd.c and lazy_curl.c define the
 * library functions the programs call, with the libraries' own prototypes
 * (from their headers, so the compiler checks them), and forward each call
 * to the real function, found with dlopen/dlsym the first time one is
 * needed. A worker without --metrics-addr or --http never maps either.
 */
#ifndef ONCEQ_COMMON_LAZYLIB_H
#define ONCEQ_COMMON_LAZYLIB_H

/*
 * The address of symbol sym in the library soname (dlopen'ed once, by the
 * first caller; thread-safe), or NULL after one line on stderr naming the
 * library and the Debian package to install.
 */
void *cm_lazy_sym(const char *soname, const char *package, const char *sym);

/*
 * In a forwarder: fn, a pointer of the type of the library's own function
 * `name`, looked up once. Executors call in at the same moment: the
 * pointer is atomic, and the acquire load orders the call after the dlopen
 * that relocated the code (two threads may both look it up: dlsym gives
 * both the same address).
 */
#define CM_LAZY(name, soname, package)                                         \
  static __typeof__(&name) fn_;                                                \
  __typeof__(&name) fn = __atomic_load_n(&fn_, __ATOMIC_ACQUIRE);              \
  if (!fn) {                                                                   \
    fn = (__typeof__(&name))cm_lazy_sym(soname, package, #name);               \
    __atomic_store_n(&fn_, fn, __ATOMIC_RELEASE);                              \
  }                                                                            \
  (void)0

/*
 * Call first in main. libpq links libldap, which links GnuTLS, and GnuTLS
 * initialises itself when it is loaded (about 0.7 MiB resident: random
 * pools, PKCS#11 configuration) although onceq never uses it; LDAP over TLS
 * initialises it explicitly when needed. GnuTLS skips that implicit set-up
 * when GNUTLS_NO_IMPLICIT_INIT=1 is in the environment at load time, so
 * the program re-executes itself once (same pid, same argv) with it set,
 * then takes the variable out of its environment again so that programs it
 * starts (--exec handlers) never see it. Does nothing when the variable is
 * already set by the user, or when /proc/self/exe cannot be executed.
 */
void cm_exec_lean(char **argv);

/* Seconds since the program started: since cm_exec_lean's first call,
 * across its re-execution (0 when it was never called). */
double cm_seconds_since_start(void);

#endif
