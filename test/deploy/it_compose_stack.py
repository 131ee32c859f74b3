#!/usr/bin/env python3
"""it_compose_stack.py: the postgres profile of docker-compose.yml, run
without Docker against a private database of the harness's PostgreSQL.

The commands come from the compose file itself (anchors, merges and
$$-escapes resolved as compose does), so the demo a newcomer starts is the
one tested:
  1. pg-init's SQL (the demo_ledger table) through psql;
  2. pg-migrate's command (`onceq migrate`);
  3. three pg-worker processes, as `--scale pg-worker=3` would start them,
     with only --metrics-addr moved to free 127.0.0.1 ports;
  4. the service's health check command (port rewritten) must pass for
     each worker;
  5. N enqueued items end up as exactly N demo_ledger rows with N distinct
     item ids (the --sql handler writes inside the ack transaction, and the
     table has no unique key, so a double ack would show);
  6. stop_signal to each worker: exit 0 within stop_grace_period, and no
     session row left.
Environment: ONCEQ_TEST_DSN (skips with 77 without it), ONCEQ_WORKER,
ONCEQ_CLI, ONCEQ_TEST_ISOLATION, ONCEQ_TEST_PGBIN.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402
from it_systemd_drain import Psql, wait_for  # noqa: E402

ITEMS = 300
WORKERS = 3


def interpolate(value):
    """Compose's interpolation for what the file uses: ${VAR:-default}
    (the default; tests never set ONCEQ_*_PORT) and $$ for a literal $."""
    if isinstance(value, str):
        value = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}",
                       lambda m: m.group(1), value)
        return value.replace("$$", "$")
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    admin = os.environ.get("ONCEQ_TEST_DSN")
    if not admin:
        print("SKIP: ONCEQ_TEST_DSN is not set; run ./test/run.sh --one "
              + os.environ.get("ONCEQ_TEST_NAME", "NAME"))
        return 77
    worker_bin = os.environ.get("ONCEQ_WORKER", "")
    cli_bin = os.environ.get("ONCEQ_CLI", "")
    iso = os.environ.get("ONCEQ_TEST_ISOLATION", "read committed")
    c = dl.Checks("it_compose_stack")

    compose = interpolate(yaml.safe_load(open(os.path.join(
        dl.repo_root(), "docker-compose.yml"))))
    svc = compose["services"]
    init_cmd = svc["pg-init"]["command"]
    c.ok("-c" in init_cmd, "pg-init runs psql -c SQL", init_cmd, "-c SQL")
    init_sql = init_cmd[init_cmd.index("-c") + 1]
    migrate_cmd = svc["pg-migrate"]["command"]
    worker_cmd = svc["pg-worker"]["command"]
    health = svc["pg-worker"]["healthcheck"]["test"]
    stop_sig = svc["pg-worker"].get("stop_signal", "SIGTERM")
    grace_ms = dl.parse_compose_duration_ms(
        svc["pg-worker"].get("stop_grace_period", "10s"))
    addr = dl.metrics_addr(worker_cmd)
    c.ok(addr is not None, "pg-worker has --metrics-addr", addr, "HOST:PORT")
    c.eq(migrate_cmd[:1], ["onceq"], "pg-migrate runs onceq")
    c.eq(worker_cmd[:1], ["onceq-worker"], "pg-worker runs onceq-worker")
    if c.failed:
        return c.report()

    db = f"deploy_stack_{os.getpid()}"
    psql = Psql(admin)
    tmp = tempfile.mkdtemp(prefix="onceq-deploy-stack.")
    procs = []
    try:
        psql.drop_db(db)
        psql.run(f"CREATE DATABASE {db}")
        psql.run(f"ALTER DATABASE {db} SET default_transaction_isolation = "
                 f"'{iso}'")
        dsn = f"{admin} dbname={db}"
        psql.dsn = dsn
        psql.run(init_sql)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "ONCEQ_DATABASE_URL": dsn}
        r = subprocess.run([cli_bin] + migrate_cmd[1:], capture_output=True,
                           text=True, env=env, timeout=60)
        if not c.eq(r.returncode, 0, "pg-migrate's command " +
                    r.stderr.strip()):
            return c.report()

        ports = []
        for i in range(WORKERS):
            port = free_port()
            ports.append(port)
            argv = [worker_bin] + [
                f"127.0.0.1:{port}" if a == f"{addr[0]}:{addr[1]}" else a
                for a in worker_cmd[1:]]
            log = open(os.path.join(tmp, f"worker-{i}.log"), "w")
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=log, env=env,
                                          start_new_session=True))
            log.close()

        # The service's health check, against each worker's port.
        test = health[1:] if health and health[0] in ("CMD", "CMD-SHELL") \
            else health
        if health and health[0] == "CMD-SHELL":
            test = ["/bin/sh", "-c"] + test

        def healthy(port):
            cmd = [a.replace(f"127.0.0.1/{addr[1]}", f"127.0.0.1/{port}")
                   .replace(f":{addr[1]}/", f":{port}/") for a in test]
            return subprocess.run(cmd, capture_output=True,
                                  timeout=10).returncode == 0

        for i, port in enumerate(ports):
            c.ok(wait_for(lambda: healthy(port), 20),
                 f"worker {i}: the compose health check passes", None,
                 "exit 0")

        psql.run("INSERT INTO onceq_items (queue, payload) SELECT 'demo', "
                 f"jsonb_build_object('n', g) FROM generate_series(1, {ITEMS})"
                 " g")
        c.ok(wait_for(lambda: psql.run("SELECT count(*) FROM onceq_items")
                      == "0", 90),
             "every item acknowledged", psql.run(
                 "SELECT count(*) FROM onceq_items"), "0")
        c.eq(psql.run("SELECT count(*) || ' ' || count(DISTINCT item_id) "
                      "FROM demo_ledger"), f"{ITEMS} {ITEMS}",
             "demo_ledger: one row per item (rows, distinct item ids)")
        c.eq(psql.run("SELECT count(*) FROM onceq_dead"), "0", "none dead")
        c.eq(psql.run("SELECT count(*) FROM onceq_sessions"), str(WORKERS),
             "one session per worker")

        sig = getattr(signal, stop_sig)
        t0 = time.monotonic()
        for p in procs:
            os.kill(p.pid, sig)
        for i, p in enumerate(procs):
            left = grace_ms / 1000.0 - (time.monotonic() - t0)
            done = wait_for(lambda: p.poll() is not None, max(left, 0))
            c.ok(done and p.returncode == 0,
                 f"worker {i}: exit 0 within stop_grace_period after "
                 f"{stop_sig}", p.returncode, 0)
        c.eq(psql.run("SELECT count(*) FROM onceq_sessions"), "0",
             "no session row left")
    except Exception as e:
        c.ok(False, "the test ran to the end", repr(e), "no exception")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        if c.failed:
            for i in range(len(procs)):
                path = os.path.join(tmp, f"worker-{i}.log")
                print(f"----- worker-{i}.log (last 30 lines) -----",
                      file=sys.stderr)
                print("".join(open(path).readlines()[-30:]), file=sys.stderr)
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
