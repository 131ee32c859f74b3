#!/usr/bin/env python3
"""check_compose.py: docker-compose.yml, checked without a Docker engine.

  check_compose.py [COMPOSE_FILE]      (default: the repository's)

1. `docker-compose config` (Debian's docker-compose 1.29) must accept the
   file, alone and with `--profile postgres`; it prints the resolved model
   (anchors, merges and ${VAR:-default} applied), which the checks read.
2. The resolved model must have:
   - the CockroachDB cluster: roach1..3 on a pinned image at or after the
     SKIP LOCKED fixes (v24.1.5 / v24.2.3; docs/design.md §3), each
     `start --insecure --join=` naming all three, each with a health check
     (/health?ready=1 or `cockroach node status`);
   - a one-shot `init` (`cockroach init`, restart "no");
   - a one-shot `migrate` (`onceq migrate`) that waits for init to complete
     successfully and for the nodes to be healthy;
   - a scalable `worker`: no container_name, no published port, SIGTERM,
     stop_grace_period >= its drain budget, a --sql or --exec handler,
     a health check on /healthz at its --metrics-addr port;
   - a `coordinator` (`onceq coordinator`);
   - onceq services built from deploy/Dockerfile with ONCEQ_DATABASE_URL;
   - the postgres profile: the same stack on PostgreSQL 15, only in the
     profile;
   - every published port bound to 127.0.0.1.
3. Self-tests: broken copies of the model (a fixed container name, a port
   on 0.0.0.0, a short grace period, no health check, an old CockroachDB)
   must fail the checks.
Exit 0 when every check passed, 1 otherwise.
"""

import copy
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

CRDB_STACK = ["roach1", "roach2", "roach3", "init", "migrate", "worker",
              "coordinator"]
PG_STACK = {"pg": None, "pg-migrate": "migrate", "pg-worker": "worker",
            "pg-coordinator": "coordinator"}
# First fixed CockroachDB release per line for SKIP LOCKED (docs/design.md §3).
CRDB_MIN = {(24, 1): (24, 1, 5), (24, 2): (24, 2, 3)}


def compose_config(path, profiles):
    exe = shutil.which("docker-compose")
    if not exe:
        print("FAIL: docker-compose is not installed; add the Debian "
              "package docker-compose to ONCEQ_APT_PACKAGES in test/run.sh",
              file=sys.stderr)
        sys.exit(1)
    cmd = [exe, "-f", path]
    for p in profiles:
        cmd += ["--profile", p]
    cmd.append("config")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ONCEQ_") and not k.startswith("DOCKER_")}
    env["COMPOSE_PROJECT_NAME"] = "onceqcheck"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       cwd=os.path.dirname(os.path.abspath(path)),
                       timeout=120)
    return r.returncode, r.stdout, r.stderr


def cmd_words(value):
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value).split()


def published_ports(svc):
    """[(host_ip, published, target)] of a service's ports."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append((p.get("host_ip", ""), p.get("published"),
                        p.get("target")))
            continue
        s = str(p).split("/")[0]
        parts = s.rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
        elif len(parts) == 2:
            out.append(("", parts[0], parts[1]))
        else:
            out.append(("", None, parts[0]))
    return out


def depends(svc):
    d = svc.get("depends_on") or {}
    if isinstance(d, list):
        return {k: "service_started" for k in d}
    return {k: (v or {}).get("condition", "service_started")
            for k, v in d.items()}


def image_version(image):
    m = re.fullmatch(r"cockroachdb/cockroach:v(\d+)\.(\d+)\.(\d+)", image or "")
    return tuple(int(x) for x in m.groups()) if m else None


def check_onceq_service(c, name, svc, root):
    build = svc.get("build") or {}
    ctx = build.get("context") if isinstance(build, dict) else build
    c.ok(ctx is not None and os.path.normpath(str(ctx)) == root,
         f"{name}: built from the repository root", ctx, root)
    c.eq(build.get("dockerfile") if isinstance(build, dict) else None,
         "deploy/Dockerfile", f"{name}: build.dockerfile")
    env = svc.get("environment") or {}
    url = env.get("ONCEQ_DATABASE_URL") if isinstance(env, dict) else None
    c.ok(bool(url), f"{name}: ONCEQ_DATABASE_URL in its environment", url,
         "a database URL")
    words = " ".join(cmd_words(svc.get("entrypoint")) +
                     cmd_words(svc.get("command")))
    c.ok("password" not in words.lower() and "--db" not in words,
         f"{name}: no database URL or password on the command line", words,
         "none")


def check_worker(c, name, svc, migrate_name):
    c.ok("container_name" not in svc, f"{name}: no container_name "
         "(--scale needs generated names)", svc.get("container_name"), None)
    c.eq(published_ports(svc), [], f"{name}: publishes no host port "
         "(--scale would collide)")
    argv = cmd_words(svc.get("entrypoint")) + cmd_words(svc.get("command"))
    c.ok(argv[:1] == ["onceq-worker"], f"{name}: runs onceq-worker", argv[:1],
         ["onceq-worker"])
    c.ok(dl.handler_of(argv) in ("sql", "exec"),
         f"{name}: a --sql or --exec demo handler", dl.handler_of(argv),
         "sql or exec")
    c.eq(svc.get("stop_signal"), "SIGTERM", f"{name}: stop_signal")
    budget, shut, grace = dl.drain_budget_ms(argv)
    grace_ms = dl.parse_compose_duration_ms(svc.get("stop_grace_period", "10s"))
    c.ok(budget is not None and grace_ms is not None and grace_ms >= budget,
         f"{name}: stop_grace_period >= --shutdown-timeout + --kill-grace + "
         f"{dl.DRAIN_MARGIN_MS} ms", grace_ms, f">= {budget}")
    addr = dl.metrics_addr(argv)
    c.ok(addr is not None and addr[0] in ("0.0.0.0", ""),
         f"{name}: --metrics-addr on all interfaces (probe-able)", addr,
         "0.0.0.0:PORT")
    hc = " ".join(cmd_words((svc.get("healthcheck") or {}).get("test")))
    c.ok("/healthz" in hc and addr is not None and str(addr[1]) in hc,
         f"{name}: health check on /healthz at the metrics port", hc,
         f"/healthz on {addr[1] if addr else '?'}")
    c.eq(depends(svc).get(migrate_name), "service_completed_successfully",
         f"{name}: waits for {migrate_name} to complete")


def check_model(c, model, root, with_pg):
    services = model.get("services") or {}
    for s in CRDB_STACK:
        c.ok(s in services, f"service {s} exists", sorted(services), s)
    if not all(s in services for s in CRDB_STACK):
        return
    for s in CRDB_STACK:
        c.ok(not services[s].get("profiles"),
             f"{s}: in the default stack (no profile)",
             services[s].get("profiles"), None)

    nodes = ["roach1", "roach2", "roach3"]
    for n in nodes:
        svc = services[n]
        ver = image_version(svc.get("image"))
        minimum = CRDB_MIN.get(ver[:2]) if ver else None
        c.ok(ver is not None and (ver >= minimum if minimum else
                                  ver[:2] > (24, 2)),
             f"{n}: CockroachDB pinned at or after v24.1.5 / v24.2.3",
             svc.get("image"), "cockroachdb/cockroach:vX.Y.Z, fixed")
        words = cmd_words(svc.get("command"))
        joined = " ".join(words)
        c.ok(words[:1] == ["start"] and "--insecure" in words,
             f"{n}: start --insecure", joined, "start --insecure ...")
        join = re.search(r"--join=(\S+)", joined)
        members = [h.split(":")[0] for h in join.group(1).split(",")] \
            if join else []
        c.eq(sorted(members), nodes, f"{n}: --join names all three nodes")
        hc = " ".join(cmd_words((svc.get("healthcheck") or {}).get("test")))
        c.ok("health?ready=1" in hc or "node status" in hc,
             f"{n}: health check (/health?ready=1 or node status)", hc,
             "curl -f http://localhost:8080/health?ready=1")

    init = services["init"]
    init_words = " ".join(cmd_words(init.get("entrypoint")) +
                          cmd_words(init.get("command")))
    c.ok("init --insecure" in init_words, "init: runs cockroach init",
         init_words[:80], "cockroach init --insecure")
    c.ok(str(init.get("restart", "no")) == "no", "init: one-shot",
         init.get("restart"), "no")
    c.ok(all(n in depends(init) for n in nodes),
         "init: starts after the nodes", depends(init), nodes)

    mig = services["migrate"]
    c.eq(cmd_words(mig.get("entrypoint")) + cmd_words(mig.get("command")),
         ["onceq", "migrate"], "migrate: runs onceq migrate")
    c.ok(str(mig.get("restart", "no")) == "no", "migrate: one-shot",
         mig.get("restart"), "no")
    dep = depends(mig)
    c.eq(dep.get("init"), "service_completed_successfully",
         "migrate: waits for init to complete successfully")
    c.ok(all(dep.get(n) == "service_healthy" for n in nodes),
         "migrate: waits for healthy nodes", dep, "roach1..3 service_healthy")
    check_onceq_service(c, "migrate", mig, root)

    check_worker(c, "worker", services["worker"], "migrate")
    check_onceq_service(c, "worker", services["worker"], root)
    coord = services["coordinator"]
    c.eq((cmd_words(coord.get("entrypoint")) +
          cmd_words(coord.get("command")))[:2], ["onceq", "coordinator"],
         "coordinator: runs onceq coordinator")
    check_onceq_service(c, "coordinator", coord, root)

    for name, svc in services.items():
        for host_ip, pub, target in published_ports(svc):
            c.eq(host_ip, "127.0.0.1",
                 f"{name}: port {pub}->{target} bound to 127.0.0.1 only")

    if not with_pg:
        return
    for name, role in PG_STACK.items():
        c.ok(name in services, f"postgres profile: service {name}",
             sorted(services), name)
        if name not in services:
            continue
        svc = services[name]
        c.eq(svc.get("profiles"), ["postgres"],
             f"{name}: only in the postgres profile")
        if role is None:
            m = re.fullmatch(r"postgres:(\d+)(\..*|-.*)?", svc.get("image", ""))
            c.ok(m is not None and m.group(1) == "15",
                 f"{name}: PostgreSQL 15", svc.get("image"), "postgres:15...")
            c.ok(bool(svc.get("healthcheck")), f"{name}: health check",
                 None, "pg_isready")
        elif role == "worker":
            check_worker(c, name, svc, "pg-migrate")
            check_onceq_service(c, name, svc, root)
        else:
            check_onceq_service(c, name, svc, root)
    for name, svc in services.items():
        if svc.get("image", "").startswith("postgres:"):
            c.eq(svc.get("profiles"), ["postgres"],
                 f"{name}: PostgreSQL only in the postgres profile")


def main():
    root = dl.repo_root()
    path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(root, "docker-compose.yml"))
    root = os.path.dirname(path)
    c = dl.Checks("check_compose")

    models = {}
    for label, profiles in (("default", []), ("postgres", ["postgres"])):
        rc, out, err = compose_config(path, profiles)
        c.eq(rc, 0, f"docker-compose config ({label} profiles) accepts "
             f"{os.path.basename(path)}" + (f" [{err.strip()}]" if rc else ""))
        if rc == 0:
            models[label] = yaml.safe_load(out)
    if "default" in models:
        check_model(c, models["default"], root, with_pg=False)
    if "postgres" in models:
        print("-- with --profile postgres")
        check_model(c, models["postgres"], root, with_pg=True)

        base = models["postgres"]

        def broken(label, mutate):
            m = copy.deepcopy(base)
            mutate(m["services"])
            dl.self_test(c, label, lambda sub: check_model(sub, m, root, True))

        broken("a worker with container_name",
               lambda s: s["worker"].__setitem__("container_name", "w1"))
        broken("a worker with a published port",
               lambda s: s["worker"].__setitem__("ports", ["9090:9090"]))
        broken("roach1's UI on 0.0.0.0",
               lambda s: s["roach1"].__setitem__("ports",
                                                 ["0.0.0.0:8080:8080/tcp"]))
        broken("a 10s stop_grace_period",
               lambda s: s["worker"].__setitem__("stop_grace_period", "10s"))
        broken("a node without a health check",
               lambda s: s["roach2"].pop("healthcheck"))
        broken("CockroachDB v24.2.2",
               lambda s: s["roach3"].__setitem__(
                   "image", "cockroachdb/cockroach:v24.2.2"))
        broken("migrate not waiting for init",
               lambda s: s["migrate"]["depends_on"].pop("init"))
        broken("PostgreSQL outside its profile",
               lambda s: s["pg"].pop("profiles"))
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
