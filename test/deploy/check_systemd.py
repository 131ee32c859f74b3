#!/usr/bin/env python3
"""check_systemd.py: deploy/systemd/*, checked without running systemd.

  check_systemd.py --worker BIN --cli BIN [UNIT_DIR]

1. The units' settings match onceq-worker's drain contract:
   onceq-worker@.service runs `onceq-worker --queue %i`, KillSignal=SIGTERM,
   KillMode=mixed (SIGTERM to the main process only: the worker stops its
   handlers' process groups itself), TimeoutStopSec >= --shutdown-timeout +
   --kill-grace + margin (from its own ExecStart), Restart=on-failure, the
   database URL from EnvironmentFile=/etc/onceq/onceq.env and never in the
   unit. onceq-coordinator.service runs `onceq coordinator` the same way.
   onceq.env.example sets ONCEQ_DATABASE_URL and says to install it 0600.
2. `systemd-analyze verify` accepts both units (an instance of the
   template), on copies whose /usr/local paths point at the built binaries
   (verify fails when an ExecStart binary does not exist) and whose
   handler is /bin/true; any "ignoring" warning about our files fails too.
   Where systemd-analyze is missing, this part is reported as skipped.
3. Self-tests: KillMode=control-group, a short TimeoutStopSec,
   Restart=always, a password in the unit, and a misspelt directive (for
   systemd-analyze) must fail.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

WORKER_BIN = "/usr/local/bin/onceq-worker"
CLI_BIN = "/usr/local/bin/onceq"
HANDLER_DIR = "/usr/local/libexec/onceq/"
ENV_FILE = "/etc/onceq/onceq.env"


def check_common(c, name, unit, text):
    svc = "Service"
    c.eq(dl.unit_value(unit, svc, "KillSignal"), "SIGTERM",
         f"{name}: KillSignal (drain on SIGTERM)")
    c.eq(dl.unit_value(unit, svc, "KillMode"), "mixed",
         f"{name}: KillMode=mixed (SIGTERM to the main process only)")
    c.eq(dl.unit_value(unit, svc, "Restart"), "on-failure",
         f"{name}: Restart=on-failure (a drained exit 0 stays stopped)")
    envfiles = [v.lstrip("-") for v in
                dl.unit_values(unit, svc, "EnvironmentFile")]
    c.ok(ENV_FILE in envfiles, f"{name}: EnvironmentFile={ENV_FILE}",
         envfiles, ENV_FILE)
    envs = " ".join(dl.unit_values(unit, svc, "Environment"))
    c.ok("ONCEQ_DATABASE_URL" not in envs and "DATABASE_URL" not in envs,
         f"{name}: no database URL in Environment=", envs, "none")
    c.ok(re.search(r"postgres(ql)?://[^\s@]*:[^\s@]*@", text) is None,
         f"{name}: no password anywhere in the unit", None, "none")
    c.eq(len(dl.unit_values(unit, svc, "ExecStart")), 1,
         f"{name}: one ExecStart")
    c.ok(dl.unit_value(unit, "Install", "WantedBy") == "multi-user.target",
         f"{name}: WantedBy=multi-user.target",
         dl.unit_value(unit, "Install", "WantedBy"), "multi-user.target")


def check_worker_unit(c, text):
    unit = dl.parse_unit(text)
    name = "onceq-worker@.service"
    check_common(c, name, unit, text)
    exec_start = dl.unit_value(unit, "Service", "ExecStart") or ""
    argv = dl.systemd_exec_argv(exec_start, "QUEUE", {})
    c.eq(argv[:1], [WORKER_BIN], f"{name}: runs {WORKER_BIN}")
    flags, handler = dl.worker_flags(argv)
    c.eq(flags.get("--queue"), "QUEUE", f"{name}: --queue %i (one queue per "
         "instance)")
    c.ok(dl.handler_of(argv) is not None, f"{name}: a handler", None,
         "--exec, --http or --sql")
    budget, shut, grace = dl.drain_budget_ms(argv)
    stop = dl.parse_systemd_timespan_ms(
        dl.unit_value(unit, "Service", "TimeoutStopSec") or "")
    c.ok(budget is not None and stop is not None and stop >= budget,
         f"{name}: TimeoutStopSec >= --shutdown-timeout ({shut} ms) + "
         f"--kill-grace ({grace} ms) + {dl.DRAIN_MARGIN_MS} ms", stop,
         f">= {budget}")
    prevent = (dl.unit_value(unit, "Service", "RestartPreventExitStatus")
               or "").split()
    c.ok("2" in prevent, f"{name}: RestartPreventExitStatus=2 (bad "
         "configuration does not restart-loop)", prevent, "2")
    return unit


def check_coordinator_unit(c, text):
    unit = dl.parse_unit(text)
    name = "onceq-coordinator.service"
    check_common(c, name, unit, text)
    argv = dl.systemd_exec_argv(
        dl.unit_value(unit, "Service", "ExecStart") or "", "", {})
    c.eq(argv[:2], [CLI_BIN, "coordinator"], f"{name}: runs onceq coordinator")
    stop = dl.parse_systemd_timespan_ms(
        dl.unit_value(unit, "Service", "TimeoutStopSec") or "")
    c.ok(stop is not None and stop >= 10000, f"{name}: TimeoutStopSec leaves "
         "time to give up the lease", stop, ">= 10000")
    return unit


def check_env_example(c, text):
    env = dl.parse_env_file(text)
    url = env.get("ONCEQ_DATABASE_URL", "")
    c.ok(url.startswith(("postgresql://", "postgres://", "host=")),
         "onceq.env.example: sets ONCEQ_DATABASE_URL", url, "a URL")
    c.ok("0600" in text, "onceq.env.example: says to install it mode 0600",
         None, "0600")
    c.ok("CHANGE-ME" in url, "onceq.env.example: a placeholder password",
         url, "CHANGE-ME")


def verify(c, unit_dir, worker_bin, cli_bin, texts, label, expect_ok=True):
    """systemd-analyze verify on rewritten copies; returns True if clean."""
    exe = shutil.which("systemd-analyze")
    if not exe:
        print("SKIP: systemd-analyze is not installed (Debian package "
              "systemd): `systemd-analyze verify` did not run")
        return None
    with tempfile.TemporaryDirectory(prefix="onceq-sdv.") as tmp:
        paths = []
        for fname, text in texts.items():
            t = text.replace(WORKER_BIN, worker_bin)
            t = re.sub(re.escape(CLI_BIN) + r"(?=\s)", cli_bin, t)
            t = t.replace(HANDLER_DIR + "%i", "/bin/true")
            with open(os.path.join(tmp, fname), "w") as f:
                f.write(t)
            if fname.endswith("@.service"):
                inst = fname.replace("@.service", "@email.service")
                os.symlink(fname, os.path.join(tmp, inst))
                paths.append(os.path.join(tmp, inst))
            else:
                paths.append(os.path.join(tmp, fname))
        env = dict(os.environ, SYSTEMD_LOG_LEVEL="notice",
                   SYSTEMD_LOG_COLOR="0")
        r = subprocess.run([exe, "verify", "--man=no"] + paths,
                           capture_output=True, text=True, env=env,
                           timeout=120)
        ours = [ln for ln in (r.stdout + r.stderr).splitlines()
                if tmp in ln or "onceq" in ln]
        clean = r.returncode == 0 and not ours
        if expect_ok:
            c.ok(clean, f"systemd-analyze verify {label}",
                 f"exit {r.returncode}: " + " | ".join(ours)[:400],
                 "exit 0, no warnings about our units")
        return clean


def main():
    args = sys.argv[1:]
    opts = {}
    for flag in ("--worker", "--cli"):
        if flag in args:
            i = args.index(flag)
            opts[flag] = os.path.abspath(args[i + 1])
            del args[i:i + 2]
    unit_dir = args[0] if args else os.path.join(dl.repo_root(), "deploy",
                                                 "systemd")
    c = dl.Checks("check_systemd")
    wname, cname = "onceq-worker@.service", "onceq-coordinator.service"
    wtext = open(os.path.join(unit_dir, wname)).read()
    ctext = open(os.path.join(unit_dir, cname)).read()
    etext = open(os.path.join(unit_dir, "onceq.env.example")).read()

    check_worker_unit(c, wtext)
    check_coordinator_unit(c, ctext)
    check_env_example(c, etext)

    def broken(label, new_text, fn):
        dl.self_test(c, label, lambda sub: fn(sub, new_text))

    broken("KillMode=control-group",
           wtext.replace("KillMode=mixed", "KillMode=control-group"),
           check_worker_unit)
    broken("TimeoutStopSec=20s",
           re.sub(r"^TimeoutStopSec=.*$", "TimeoutStopSec=20s", wtext,
                  flags=re.M), check_worker_unit)
    broken("--shutdown-timeout 60s under TimeoutStopSec=45s",
           wtext.replace("--shutdown-timeout 30s", "--shutdown-timeout 60s"),
           check_worker_unit)
    broken("Restart=always",
           wtext.replace("Restart=on-failure", "Restart=always"),
           check_worker_unit)
    broken("a password in Environment=",
           wtext.replace("[Service]\n", "[Service]\nEnvironment=ONCEQ_DATABASE"
                         "_URL=postgresql://u:secret@h/db\n"),
           check_worker_unit)
    broken("KillSignal=SIGKILL",
           ctext.replace("KillSignal=SIGTERM", "KillSignal=SIGKILL"),
           check_coordinator_unit)

    if "--worker" in opts and "--cli" in opts:
        res = verify(c, unit_dir, opts["--worker"], opts["--cli"],
                     {wname: wtext, cname: ctext}, "(both units)")
        if res is not None:
            bad = verify(c, unit_dir, opts["--worker"], opts["--cli"],
                         {wname: wtext.replace("KillMode=mixed",
                                               "KillMode=mixd")},
                         "self-test", expect_ok=False)
            c.ok(bad is False, "self-test: systemd-analyze verify rejects "
                 "KillMode=mixd", bad, False)
            bad = verify(c, unit_dir, "/nonexistent/onceq-worker",
                         opts["--cli"], {wname: wtext}, "self-test",
                         expect_ok=False)
            c.ok(bad is False, "self-test: systemd-analyze verify rejects a "
                 "missing ExecStart binary", bad, False)
    else:
        print("note: no --worker/--cli binaries: systemd-analyze verify "
              "skipped")
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
