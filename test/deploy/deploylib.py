"""deploylib.py: shared helpers of the deploy checks (test/deploy/*.py).

Terms:
  - check: one named assertion; a failed check prints what was seen and
    what was wanted, and the script exits 1 after running all of them;
  - drain budget: how long a stopping onceq-worker may need, from its own
    flags: --shutdown-timeout (in-flight work) + --kill-grace (SIGTERM to
    SIGKILL of handler children) + DRAIN_MARGIN_MS (last acks, session
    delete). Every supervisor's stop timeout must be at least this.
  - self-test: each checker also runs its checks on deliberately broken
    copies of its input and requires them to fail, so a check that can no
    longer fail is itself a failure.

The worker defaults mirror worker/src/config.c (shutdown 30s, kill grace
5s); durations use onceq's syntax (docs/design.md §6: 250ms, 5s, 2m, 1h).
"""

import os
import re
import shlex
import sys

WORKER_SHUTDOWN_DEFAULT_MS = 30000  # worker/src/config.c
WORKER_KILL_GRACE_DEFAULT_MS = 5000  # worker/src/config.c
DRAIN_MARGIN_MS = 5000  # final acks + session delete


class Checks:
    """Collects check results; report() prints a summary and the exit code."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = []
        self.quiet = False

    def ok(self, cond, what, got=None, want=None):
        if cond:
            self.passed += 1
            if not self.quiet:
                print(f"ok: {what}")
            return True
        msg = what
        if got is not None or want is not None:
            msg += f": got {got!r}, want {want!r}"
        self.failed.append(msg)
        if not self.quiet:
            print(f"FAIL: {msg}", file=sys.stderr)
        return False

    def eq(self, got, want, what):
        return self.ok(got == want, what, got, want)

    def report(self):
        print(f"{self.name}: {self.passed} checks passed, "
              f"{len(self.failed)} failed")
        for f in self.failed:
            print(f"  FAILED: {f}", file=sys.stderr)
        return 1 if self.failed else 0


def self_test(checks, label, run):
    """Run `run(sub)` on a fresh quiet Checks; the outer check passes only
    if the broken input made at least one inner check fail."""
    sub = Checks(label)
    sub.quiet = True
    run(sub)
    checks.ok(len(sub.failed) > 0,
              f"self-test: the checks reject {label}",
              "no check failed" if not sub.failed else sub.failed[0],
              "at least one failure")


# ---------------------------------------------------------------- durations
_DUR = re.compile(r"^(\d+)(ms|s|m|h)$")


def parse_duration_ms(text):
    """onceq's durations: 250ms, 5s, 2m, 1h. None if malformed."""
    m = _DUR.match(str(text).strip())
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2)
    return n * {"ms": 1, "s": 1000, "m": 60000, "h": 3600000}[unit]


_COMPOSE_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")


def parse_compose_duration_ms(text):
    """Compose durations: "45s", "1m30s", "500ms". None if malformed."""
    text = str(text).strip()
    if not text or _COMPOSE_DUR.sub("", text) != "":
        return None
    total = 0.0
    for n, unit in _COMPOSE_DUR.findall(text):
        total += float(n) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000,
                             "h": 3600000}[unit]
    return int(total)


_SD_UNITS = {
    "us": 0.001, "usec": 0.001, "ms": 1, "msec": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60000, "min": 60000, "minute": 60000, "minutes": 60000,
    "h": 3600000, "hr": 3600000, "hour": 3600000, "hours": 3600000,
}


def parse_systemd_timespan_ms(text):
    """systemd.time(7) spans: "45", "45s", "1min 30s", "2m". A bare number
    is seconds. None if malformed or "infinity"."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return int(float(text) * 1000)
    if not re.fullmatch(r"(\s*\d+(\.\d+)?\s*[a-z]+)+\s*", text):
        return None
    total = 0.0
    for m in re.finditer(r"(\d+(?:\.\d+)?)\s*([a-z]+)", text):
        if m.group(2) not in _SD_UNITS:
            return None
        total += float(m.group(1)) * _SD_UNITS[m.group(2)]
    return int(total)


# ---------------------------------------------------------------- worker
def worker_flags(argv):
    """The onceq-worker flags in argv (argv[0] may be the program), up to
    --exec, whose rest is the handler's command. Returns a dict of flag ->
    value (flags without a value map to True) and the --exec command."""
    flags, i, handler_cmd = {}, 0, None
    args = list(argv)
    if args and not args[0].startswith("-"):
        args = args[1:]
    no_value = {"--drain", "--history", "--insecure"}
    while i < len(args):
        a = args[i]
        if a == "--exec":
            flags["--exec"] = True
            handler_cmd = args[i + 1:]
            break
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            flags[k] = v
        elif a in no_value:
            flags[a] = True
        elif a.startswith("--") and i + 1 < len(args):
            flags[a] = args[i + 1]
            i += 1
        else:
            flags[a] = True
        i += 1
    return flags, handler_cmd


def drain_budget_ms(argv):
    """(budget_ms, shutdown_ms, kill_grace_ms) from a worker command line;
    (None, ...) if a duration flag is malformed."""
    flags, _ = worker_flags(argv)
    shutdown = parse_duration_ms(flags.get("--shutdown-timeout", "30s"))
    grace = parse_duration_ms(flags.get("--kill-grace", "5s"))
    if shutdown is None or grace is None:
        return None, shutdown, grace
    return shutdown + grace + DRAIN_MARGIN_MS, shutdown, grace


def handler_of(argv):
    """Which handler a worker command line uses: "sql", "exec", "http" or
    None."""
    flags, _ = worker_flags(argv)
    for h in ("sql", "exec", "http"):
        if f"--{h}" in flags:
            return h
    return None


def metrics_addr(argv):
    """(host, port) of --metrics-addr, or None."""
    flags, _ = worker_flags(argv)
    addr = flags.get("--metrics-addr")
    if not isinstance(addr, str) or ":" not in addr:
        return None
    host, port = addr.rsplit(":", 1)
    try:
        return host, int(port)
    except ValueError:
        return None


# ---------------------------------------------------------------- systemd
def parse_unit(text):
    """A systemd unit file as {section: [(key, value), ...]}, with
    backslash-continued lines joined and comments dropped."""
    sections, cur = {}, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            cur = s[1:-1]
            sections.setdefault(cur, [])
            continue
        if "=" in s and cur is not None:
            k, v = s.split("=", 1)
            sections[cur].append((k.strip(), v.strip()))
    return sections


def unit_values(unit, section, key):
    return [v for k, v in unit.get(section, []) if k == key]


def unit_value(unit, section, key):
    """The last assignment of key (systemd: the last one wins), or None."""
    vals = unit_values(unit, section, key)
    return vals[-1] if vals else None


def systemd_exec_argv(cmdline, instance, env):
    """Split an ExecStart= line the way systemd does for the cases our
    units use: shell-like quoting, the %i/%I/%% specifiers, "$VAR" as a
    word (replaced by the value split at whitespace, zero words if unset or
    empty) and "${VAR}" (one word). A leading -/@/+/!/: prefix is dropped."""
    cmdline = cmdline.lstrip("-@+!:")
    words = shlex.split(cmdline, posix=True)
    out = []
    for w in words:
        w = w.replace("%%", "\x00").replace("%i", instance).replace(
            "%I", instance).replace("\x00", "%")
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
        if m:
            out.extend(env.get(m.group(1), "").split())
            continue
        w = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                   lambda mm: env.get(mm.group(1), ""), w)
        out.append(w)
    return out


def parse_env_file(text):
    """systemd EnvironmentFile= syntax (the subset we write): KEY=VALUE
    lines, # and ; comments, optional single or double quotes."""
    env = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#;" or "=" not in s:
            continue
        k, v = s.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        env[k.strip()] = v
    return env


def repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", ".."))
