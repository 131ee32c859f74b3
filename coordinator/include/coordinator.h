/*
 * coordinator.h: the coordinator daemon as a library (onceq_coordinator),
 * the counterpart of the worker's runtime (worker/src/worker.h). Its one
 * entry point runs the whole daemon: its flags, logging, signals, the
 * /metrics server and status page, then the loop that reaps, leads by a
 * lease and does the leader's duties (coordinator.c has the states).
 * `onceq coordinator` (cli/src/cmd_coordinator.c) calls it; nothing here
 * knows the CLI.
 *
 * Thread safety: call once per process, on the main thread; it installs
 * the process's signal handlers and log sink.
 */
#ifndef ONCEQ_COORD_COORDINATOR_H
#define ONCEQ_COORD_COORDINATOR_H

/*
 * Run the coordinator until SIGTERM/SIGINT. db: where to connect (a URL
 * or conninfo; NULL: ONCEQ_DATABASE_URL, DATABASE_URL, then libpq's PG*
 * variables). argv[0] is the command's name; the rest are the daemon's
 * flags (--help prints them). Returns the exit code: 0 stopped by a
 * signal (or --help), 1 runtime failure, 2 bad usage or configuration,
 * each failure after one line on stderr ("onceq: coordinator: ...").
 * Flag values in argv that carry secrets (--notify-url, --status-token)
 * are masked in place, so `ps` does not show them.
 */
int co_coordinator_main(const char *db, int argc, char **argv);

#endif
