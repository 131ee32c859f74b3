#!/usr/bin/env python3
"""it_systemd_drain.py: the systemd drain contract of onceq-worker@.service.

Starts onceq-worker the way the unit does and stops it the way systemd
does, against a private database of the harness's PostgreSQL:
  1. reads deploy/systemd/onceq-worker@.service: ExecStart, KillSignal,
     KillMode, TimeoutStopSec;
  2. writes an EnvironmentFile with ONCEQ_DATABASE_URL (the unit's
     /etc/onceq/onceq.env) and reads it back with systemd's syntax;
  3. builds argv from ExecStart exactly as written, for the instance
     `drainq` (%i), with only the /usr/local paths pointing at this build
     and at a handler that sleeps 3 s; starts it in its own session (as
     systemd does) with only PATH and the file's variables;
  4. enqueues one item, waits until the handler runs, then sends KillSignal
     to the main process only (KillMode=mixed), and enqueues a second item
     1.5 s later, while the first is still in flight;
  5. requires a clean drain within TimeoutStopSec: exit 0, the in-flight
     item finished (the handler was not killed) and acknowledged (gone, not
     dead), the second item never claimed (no new claims while draining),
     and no session row left. Past TimeoutStopSec it is a failure (systemd
     would SIGKILL there) and the test SIGKILLs the group.
  6. the counter-check: the same stop with KillMode=control-group's
     behaviour (KillSignal to every process of the service at once, here the
     worker and its descendants) kills the handler mid-item, so that item is
     not acknowledged. This is why the unit says KillMode=mixed; if this
     phase ever acknowledges the item, the test no longer tells the two
     apart and fails.
Environment: ONCEQ_TEST_DSN (skips with 77 without it), ONCEQ_WORKER,
ONCEQ_TEST_ISOLATION, ONCEQ_TEST_PGBIN (psql).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

QUEUE = "drainq"
HANDLER_SLEEP_S = 3
WORKER_BIN = "/usr/local/bin/onceq-worker"
HANDLER_DIR = "/usr/local/libexec/onceq/"


class Psql:
    def __init__(self, dsn):
        pgbin = os.environ.get("ONCEQ_TEST_PGBIN", "")
        cand = os.path.join(pgbin, "psql") if pgbin else ""
        self.exe = cand if cand and os.access(cand, os.X_OK) else \
            shutil.which("psql")
        self.dsn = dsn

    def run(self, sql, dsn=None):
        """Run SQL, return its unaligned output; under SERIALIZABLE our own
        reads can be chosen as the victim of a serialization failure while
        the worker runs, so those are run again (at most 10 times)."""
        out = ""
        for _ in range(10):
            r = subprocess.run([self.exe, "-X", "-q", "-At", "-v",
                                "ON_ERROR_STOP=1", "-d", dsn or self.dsn,
                                "-c", sql], capture_output=True, text=True,
                               timeout=60)
            out = r.stdout + r.stderr
            if r.returncode == 0:
                return r.stdout.strip()
            if "could not serialize" not in out:
                break
            time.sleep(0.05)
        raise RuntimeError(f"psql failed: {sql}: {out.strip()}")

    def is_crdb(self, dsn=None):
        return "CockroachDB" in self.run("SELECT version()", dsn=dsn)

    def drop_db(self, name, dsn=None):
        """DROP DATABASE, closing other sessions first (PostgreSQL's WITH
        (FORCE); CockroachDB has no such option but CASCADE)."""
        if self.is_crdb(dsn):
            self.run(f"DROP DATABASE IF EXISTS {name} CASCADE", dsn=dsn)
        else:
            self.run(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", dsn=dsn)


def descendants(pid):
    """Every live process below pid (what a service's cgroup holds)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for ch in children.get(todo.pop(), []):
            out.append(ch)
            todo.append(ch)
    return out


def wait_for(cond, secs):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class Worker:
    """onceq-worker started the way the unit starts it."""

    def __init__(self, argv, env, tmp, name):
        self.log_path = os.path.join(tmp, f"{name}.log")
        log = open(self.log_path, "w")
        # systemd starts a service in its own session, with a clean
        # environment and cwd /.
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     env=env, cwd="/", start_new_session=True)
        log.close()

    def kill_all(self, sig):
        """Signal the worker and every descendant (its "cgroup")."""
        for p in [self.proc.pid] + descendants(self.proc.pid):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        if self.proc.poll() is None:
            self.kill_all(signal.SIGKILL)
            self.proc.wait(10)

    def tail(self):
        if os.path.exists(self.log_path):
            return "".join(open(self.log_path).readlines()[-40:])
        return ""


def make_handler(hdir, tmp, tag):
    """The unit's per-queue handler: sleeps, then records the item id."""
    handler = os.path.join(hdir, QUEUE)
    with open(handler, "w") as f:
        f.write("#!/bin/sh\n"
                "cat >/dev/null\n"
                f'echo "$1" >>"{tmp}/{tag}.started"\n'
                f"sleep {HANDLER_SLEEP_S}\n"
                f'echo "$1" >>"{tmp}/{tag}.done"\n')
    os.chmod(handler, 0o755)


def lines(path):
    return open(path).read().split() if os.path.exists(path) else []


def main():
    admin = os.environ.get("ONCEQ_TEST_DSN")
    if not admin:
        print("SKIP: ONCEQ_TEST_DSN is not set; run ./test/run.sh --one "
              + os.environ.get("ONCEQ_TEST_NAME", "NAME"))
        return 77
    worker = os.environ.get("ONCEQ_WORKER", "")
    cli = os.environ.get("ONCEQ_CLI", "")
    if not os.access(worker, os.X_OK) or not os.access(cli, os.X_OK):
        print("FAIL: ONCEQ_WORKER / ONCEQ_CLI not executable", file=sys.stderr)
        return 1
    iso = os.environ.get("ONCEQ_TEST_ISOLATION", "read committed")
    c = dl.Checks("it_systemd_drain")

    unit_path = os.path.join(dl.repo_root(), "deploy", "systemd",
                             "onceq-worker@.service")
    unit = dl.parse_unit(open(unit_path).read())
    exec_start = dl.unit_value(unit, "Service", "ExecStart")
    kill_signal = dl.unit_value(unit, "Service", "KillSignal") or "SIGTERM"
    kill_mode = dl.unit_value(unit, "Service", "KillMode") or "control-group"
    stop_ms = dl.parse_systemd_timespan_ms(
        dl.unit_value(unit, "Service", "TimeoutStopSec") or "90s")
    if not c.ok(exec_start is not None and stop_ms is not None,
                "the unit has ExecStart and TimeoutStopSec", exec_start,
                "both"):
        return c.report()
    c.eq(kill_mode, "mixed", "KillMode (the signal goes to the main "
         "process only)")
    sig = getattr(signal, kill_signal if kill_signal.startswith("SIG")
                  else "SIG" + kill_signal)

    db = f"deploy_drain_{os.getpid()}"
    psql = Psql(admin)
    tmp = tempfile.mkdtemp(prefix="onceq-deploy-drain.")
    workers = []
    try:
        psql.drop_db(db)
        psql.run(f"CREATE DATABASE {db}")
        psql.run(f"ALTER DATABASE {db} SET default_transaction_isolation = "
                 f"'{iso}'")
        dsn = f"{admin} dbname={db}"
        psql.dsn = dsn
        r = subprocess.run([cli, "migrate"], capture_output=True, text=True,
                           env={"PATH": os.environ.get("PATH", ""),
                                "ONCEQ_DATABASE_URL": dsn}, timeout=60)
        if not c.eq(r.returncode, 0, "onceq migrate " + r.stderr.strip()):
            return c.report()

        # The unit's EnvironmentFile, written and read back.
        env_file = os.path.join(tmp, "onceq.env")
        with open(env_file, "w") as f:
            f.write("# /etc/onceq/onceq.env for this test\n"
                    f"ONCEQ_DATABASE_URL='{dsn}'\n")
        os.chmod(env_file, 0o600)
        file_env = dl.parse_env_file(open(env_file).read())
        c.eq(file_env.get("ONCEQ_DATABASE_URL"), dsn,
             "EnvironmentFile round trip")

        hdir = os.path.join(tmp, "libexec")
        os.makedirs(hdir)
        argv = dl.systemd_exec_argv(exec_start, QUEUE, file_env)
        c.eq(argv[:1], [WORKER_BIN], "ExecStart runs onceq-worker")
        argv = [worker if a == WORKER_BIN else
                a.replace(HANDLER_DIR, hdir + "/") for a in argv]
        print("argv: " + " ".join(argv))
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                       "/sbin:/bin"}
        env.update(file_env)

        # ---- 1. the unit's stop: KillSignal to the main process only
        make_handler(hdir, tmp, "mixed")
        w = Worker(argv, env, tmp, "worker-mixed")
        workers.append(w)
        id1 = psql.run(f"INSERT INTO onceq_items (queue, payload) VALUES "
                       f"('{QUEUE}', '{{}}') RETURNING id")
        started = os.path.join(tmp, "mixed.started")
        c.ok(wait_for(lambda: lines(started) == [id1], 20),
             "the handler started on the item", lines(started), [id1])
        c.eq(psql.run(f"SELECT count(*) FROM onceq_sessions WHERE pid = "
                      f"{w.proc.pid}"), "1", "the worker's session row")

        t0 = time.monotonic()
        os.kill(w.proc.pid, sig)  # KillMode=mixed: the main process only
        time.sleep(1.5)
        c.eq(lines(os.path.join(tmp, "mixed.done")), [],
             "the first item is still in flight when the second is enqueued")
        id2 = psql.run(f"INSERT INTO onceq_items (queue, payload) VALUES "
                       f"('{QUEUE}', '{{}}') RETURNING id")
        exited = wait_for(lambda: w.proc.poll() is not None,
                          stop_ms / 1000.0 - (time.monotonic() - t0))
        took_ms = int((time.monotonic() - t0) * 1000)
        c.ok(exited, f"exited within TimeoutStopSec ({stop_ms} ms) after "
             f"{kill_signal}", took_ms if exited else "still running",
             f"<= {stop_ms} ms")
        w.stop()  # past TimeoutStopSec systemd SIGKILLs the cgroup
        print(f"METRIC deploy_systemd_drain_ms {took_ms} ms "
              f"(isolation: {iso})")
        c.eq(w.proc.returncode, 0, "exit code after the drain")
        c.eq(lines(os.path.join(tmp, "mixed.done")), [id1],
             "the in-flight item's handler finished (not killed)")
        c.eq(psql.run(f"SELECT count(*) FROM onceq_items WHERE id = "
                      f"'{id1}'"), "0", "the in-flight item is acknowledged")
        c.eq(psql.run("SELECT count(*) FROM onceq_dead"), "0",
             "nothing dead-lettered")
        c.eq(psql.run(f"SELECT coalesce(claim::text, 'none') || ' ' || "
                      f"attempts FROM onceq_items WHERE id = '{id2}'"),
             "none 0", "the item enqueued during the drain was never claimed")
        c.eq(lines(started), [id1],
             "the handler ran once, on the first item only")
        c.eq(psql.run("SELECT count(*) FROM onceq_sessions"), "0",
             "no session row left")

        # ---- 2. counter-check: control-group's stop kills the handler
        psql.run(f"DELETE FROM onceq_items WHERE id = '{id2}'")
        make_handler(hdir, tmp, "cgroup")
        w = Worker(argv, env, tmp, "worker-cgroup")
        workers.append(w)
        id3 = psql.run(f"INSERT INTO onceq_items (queue, payload) VALUES "
                       f"('{QUEUE}', '{{}}') RETURNING id")
        started = os.path.join(tmp, "cgroup.started")
        c.ok(wait_for(lambda: lines(started) == [id3], 20),
             "control-group phase: the handler started", lines(started),
             [id3])
        w.kill_all(sig)  # KillMode=control-group: every process at once
        c.ok(wait_for(lambda: w.proc.poll() is not None, stop_ms / 1000.0),
             "control-group phase: the worker exited", None, "exited")
        w.stop()
        c.eq(lines(os.path.join(tmp, "cgroup.done")), [],
             "control-group phase: the handler was killed mid-item")
        c.eq(psql.run(f"SELECT count(*) FROM onceq_items WHERE id = "
                      f"'{id3}'"), "1",
             "control-group phase: the item was not acknowledged (so "
             "KillMode=mixed is what lets the drain finish it)")
        c.eq(psql.run("SELECT count(*) FROM onceq_sessions"), "0",
             "control-group phase: no session row left")
    except Exception as e:  # report, then clean up
        c.ok(False, "the test ran to the end", repr(e), "no exception")
    finally:
        for w in workers:
            w.stop()
        if c.failed:
            for w in workers:
                print(f"----- {os.path.basename(w.log_path)} (last 40 "
                      "lines) -----", file=sys.stderr)
                print(w.tail(), file=sys.stderr)
        try:
            if not c.failed:
                psql.drop_db(db, dsn=admin)
            else:
                print(f"kept database {db} for a post-mortem", file=sys.stderr)
        except Exception as e:
            print(f"cleanup: {e}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
