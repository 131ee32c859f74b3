#!/usr/bin/env python3
"""check_k8s.py: deploy/k8s/*.yaml parse as YAML and have what they need.

  check_k8s.py [K8S_DIR]

No cluster is needed. The checks:
  - every file parses (yaml.safe_load_all) into objects with apiVersion,
    kind and metadata.name; kustomization.yaml lists files that exist;
  - a Secret (the example) with the key the pods read;
  - the worker Deployment: runs onceq-worker with --metrics-addr on
    0.0.0.0, terminationGracePeriodSeconds >= its drain budget
    (--shutdown-timeout + --kill-grace + margin), readiness and liveness
    probes that GET /healthz on the --metrics-addr port, ONCEQ_DATABASE_URL
    from that Secret via secretKeyRef;
  - the coordinator Deployment: `onceq coordinator`, 2 replicas, the same
    secretKeyRef; its status page (on --metrics-addr, bound to 0.0.0.0)
    guarded by ONCEQ_STATUS_TOKEN from a Secret via secretKeyRef (not
    optional, no literal --status-token in argv), and a liveness probe on
    /healthz at the metrics port;
  - no container other than the coordinator gets ONCEQ_STATUS_TOKEN (a
    worker would hand it to its --exec children);
  - the migrate Job: `onceq migrate`, restartPolicy OnFailure or Never,
    the same secretKeyRef;
  - every workload: selector labels match the pod template, images set,
    runAsNonRoot, and no literal database URL in any env value.
Self-tests: broken copies (a short grace period, a probe on another path,
a literal URL, one coordinator replica, a probe on the wrong port, a
coordinator without its token, a token as a literal value or argument, a
worker given the token) must fail. Exit 0 when all checks pass.
"""

import copy
import glob
import os
import sys

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402


def containers(obj):
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", []) + spec.get("initContainers", [])


def pod_spec(obj):
    return obj.get("spec", {}).get("template", {}).get("spec", {})


def argv_of(container):
    return [str(x) for x in (container.get("command") or []) +
            (container.get("args") or [])]


def port_number(container, port):
    """A probe's port (a number or a named container port) as a number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def secret_refs(c, name, obj, secrets):
    for ctr in containers(obj):
        env = {e.get("name"): e for e in ctr.get("env") or []}
        e = env.get("ONCEQ_DATABASE_URL")
        ref = ((e or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
        c.ok(ref.get("name") in secrets and
             ref.get("key") in secrets.get(ref.get("name"), set()),
             f"{name}/{ctr.get('name')}: ONCEQ_DATABASE_URL from a Secret "
             "via secretKeyRef", ref, sorted(
                 f"{s}/{k}" for s, ks in secrets.items() for k in ks))
        literal = [x.get("value") for x in ctr.get("env") or []
                   if "://" in str(x.get("value", ""))]
        c.eq(literal, [], f"{name}/{ctr.get('name')}: no literal URL in env")


def check_status_token(c, name, ctr, secrets):
    """The coordinator's status page shows payloads and errors: on 0.0.0.0
    it must want a bearer token, read from a Secret."""
    env = {e.get("name"): e for e in ctr.get("env") or []}
    e = env.get("ONCEQ_STATUS_TOKEN") or {}
    ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
    c.ok(ref.get("name") in secrets and
         ref.get("key") in secrets.get(ref.get("name"), set()) and
         not ref.get("optional", False),
         f"{name}/{ctr.get('name')}: ONCEQ_STATUS_TOKEN from a Secret via "
         "secretKeyRef (not optional)", e, sorted(
             f"{s}/{k}" for s, ks in secrets.items() for k in ks))
    argv = argv_of(ctr)
    c.ok(not any(a == "--status-token" or a.startswith("--status-token=")
                 for a in argv),
         f"{name}/{ctr.get('name')}: no --status-token in argv (ps shows "
         "it)", argv, "the token from the environment")


def check_workload(c, name, obj):
    sel = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
    labels = obj.get("spec", {}).get("template", {}).get("metadata", {}).get(
        "labels", {})
    if obj.get("kind") == "Deployment":
        c.ok(sel and all(labels.get(k) == v for k, v in sel.items()),
             f"{name}: selector matches the pod labels", (sel, labels),
             "matchLabels within template labels")
    for ctr in containers(obj):
        c.ok(bool(ctr.get("image")), f"{name}/{ctr.get('name')}: image set",
             ctr.get("image"), "an image")
    sc = pod_spec(obj).get("securityContext", {})
    c.ok(sc.get("runAsNonRoot") is True, f"{name}: runAsNonRoot",
         sc.get("runAsNonRoot"), True)


def check_docs(c, docs, k8s_dir):
    by_kind = {}
    for fname, obj in docs:
        c.ok(isinstance(obj, dict) and obj.get("apiVersion") and
             obj.get("kind") and (obj.get("kind") == "Kustomization" or
                                  obj.get("metadata", {}).get("name")),
             f"{fname}: apiVersion, kind and metadata.name",
             {k: obj.get(k) for k in ("apiVersion", "kind")}
             if isinstance(obj, dict) else obj, "all three")
        if isinstance(obj, dict):
            by_kind.setdefault(obj.get("kind"), []).append((fname, obj))

    secrets = {}
    for fname, obj in by_kind.get("Secret", []):
        keys = set((obj.get("stringData") or {}).keys()) | set(
            (obj.get("data") or {}).keys())
        secrets[obj["metadata"]["name"]] = keys
    c.ok(bool(secrets), "a Secret manifest (example) for the database URL",
         sorted(secrets), "onceq-db")

    deps = by_kind.get("Deployment", [])
    workers = [(f, o) for f, o in deps
               if any(argv_of(x)[:1] == ["onceq-worker"]
                      for x in pod_spec(o).get("containers", []))]
    coords = [(f, o) for f, o in deps
              if any(argv_of(x)[:2] == ["onceq", "coordinator"]
                     for x in pod_spec(o).get("containers", []))]
    jobs = [(f, o) for f, o in by_kind.get("Job", [])
            if any(argv_of(x)[:2] == ["onceq", "migrate"]
                   for x in pod_spec(o).get("containers", []))]
    c.ok(len(workers) >= 1, "a worker Deployment", len(workers), ">= 1")
    c.ok(len(coords) == 1, "a coordinator Deployment", len(coords), 1)
    c.ok(len(jobs) == 1, "a migrate Job", len(jobs), 1)

    for fname, obj in workers:
        name = obj["metadata"]["name"]
        check_workload(c, name, obj)
        secret_refs(c, name, obj, secrets)
        ctr = [x for x in pod_spec(obj)["containers"]
               if argv_of(x)[:1] == ["onceq-worker"]][0]
        argv = argv_of(ctr)
        budget, shut, grace = dl.drain_budget_ms(argv)
        tgps = pod_spec(obj).get("terminationGracePeriodSeconds", 30)
        c.ok(budget is not None and tgps * 1000 >= budget,
             f"{name}: terminationGracePeriodSeconds >= --shutdown-timeout "
             f"({shut} ms) + --kill-grace ({grace} ms) + "
             f"{dl.DRAIN_MARGIN_MS} ms", tgps * 1000, f">= {budget}")
        addr = dl.metrics_addr(argv)
        c.ok(addr is not None and addr[0] in ("0.0.0.0", ""),
             f"{name}: --metrics-addr on 0.0.0.0 (the kubelet probes the pod "
             "IP)", addr, "0.0.0.0:PORT")
        for probe in ("readinessProbe", "livenessProbe"):
            hg = (ctr.get(probe) or {}).get("httpGet") or {}
            port = port_number(ctr, hg.get("port"))
            c.ok(hg.get("path") == "/healthz" and addr is not None and
                 port == addr[1],
                 f"{name}: {probe} GETs /healthz on the metrics port",
                 (hg.get("path"), port), ("/healthz", addr and addr[1]))

    for fname, obj in coords:
        name = obj["metadata"]["name"]
        check_workload(c, name, obj)
        secret_refs(c, name, obj, secrets)
        c.eq(obj.get("spec", {}).get("replicas"), 2,
             f"{name}: 2 replicas (one leads by lease)")
        ctr = [x for x in pod_spec(obj)["containers"]
               if argv_of(x)[:2] == ["onceq", "coordinator"]][0]
        check_status_token(c, name, ctr, secrets)
        addr = dl.metrics_addr(argv_of(ctr))
        hg = (ctr.get("livenessProbe") or {}).get("httpGet") or {}
        c.ok(hg.get("path") == "/healthz" and addr is not None and
             port_number(ctr, hg.get("port")) == addr[1],
             f"{name}: livenessProbe GETs /healthz on the metrics port",
             (hg.get("path"), port_number(ctr, hg.get("port"))),
             ("/healthz", addr and addr[1]))

    for fname, obj in workers + jobs:
        for ctr in containers(obj):
            names = [e.get("name") for e in ctr.get("env") or []]
            c.ok("ONCEQ_STATUS_TOKEN" not in names,
                 f"{obj['metadata']['name']}/{ctr.get('name')}: no "
                 "ONCEQ_STATUS_TOKEN (the coordinator's alone)", names,
                 "without ONCEQ_STATUS_TOKEN")

    for fname, obj in jobs:
        name = obj["metadata"]["name"]
        check_workload(c, name, obj)
        secret_refs(c, name, obj, secrets)
        rp = pod_spec(obj).get("restartPolicy")
        c.ok(rp in ("OnFailure", "Never"), f"{name}: restartPolicy", rp,
             "OnFailure or Never")

    for fname, obj in by_kind.get("Kustomization", []):
        for r in obj.get("resources", []):
            c.ok(os.path.exists(os.path.join(k8s_dir, r)),
                 f"{fname}: resource {r} exists", None, r)


def main():
    k8s_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        dl.repo_root(), "deploy", "k8s")
    c = dl.Checks("check_k8s")
    docs = []
    files = sorted(glob.glob(os.path.join(k8s_dir, "*.yaml")) +
                   glob.glob(os.path.join(k8s_dir, "*.yml")))
    c.ok(len(files) >= 4, "manifests present", len(files), ">= 4")
    for f in files:
        try:
            loaded = [d for d in yaml.safe_load_all(open(f)) if d is not None]
            c.ok(bool(loaded), f"{os.path.basename(f)} parses as YAML",
                 len(loaded), ">= 1 document")
            docs += [(os.path.basename(f), d) for d in loaded]
        except yaml.YAMLError as e:
            c.ok(False, f"{os.path.basename(f)} parses as YAML", str(e), "")
    check_docs(c, docs, k8s_dir)

    def broken(label, mutate):
        d = copy.deepcopy(docs)
        for _, obj in d:
            if isinstance(obj, dict):
                mutate(obj)
        dl.self_test(c, label, lambda sub: check_docs(sub, d, k8s_dir))

    def worker_ctr(obj):
        if obj.get("kind") != "Deployment":
            return None
        for x in pod_spec(obj).get("containers", []):
            if argv_of(x)[:1] == ["onceq-worker"]:
                return x
        return None

    def set_tgps(obj):
        if worker_ctr(obj):
            pod_spec(obj)["terminationGracePeriodSeconds"] = 30

    def probe_path(obj):
        ctr = worker_ctr(obj)
        if ctr:
            ctr["livenessProbe"]["httpGet"]["path"] = "/metrics"

    def probe_port(obj):
        ctr = worker_ctr(obj)
        if ctr:
            ctr["readinessProbe"]["httpGet"]["port"] = 8080

    def literal_url(obj):
        ctr = worker_ctr(obj)
        if ctr:
            ctr["env"] = [{"name": "ONCEQ_DATABASE_URL",
                           "value": "postgresql://u:pw@db/x"}]

    def one_coordinator(obj):
        for x in pod_spec(obj).get("containers", []):
            if argv_of(x)[:2] == ["onceq", "coordinator"]:
                obj["spec"]["replicas"] = 1

    def coord_ctr(obj):
        if obj.get("kind") != "Deployment":
            return None
        for x in pod_spec(obj).get("containers", []):
            if argv_of(x)[:2] == ["onceq", "coordinator"]:
                return x
        return None

    def no_token(obj):
        ctr = coord_ctr(obj)
        if ctr:
            ctr["env"] = [e for e in ctr.get("env") or []
                          if e.get("name") != "ONCEQ_STATUS_TOKEN"]

    def literal_token(obj):
        ctr = coord_ctr(obj)
        if ctr:
            ctr["env"] = [e for e in ctr.get("env") or []
                          if e.get("name") != "ONCEQ_STATUS_TOKEN"]
            ctr["env"].append({"name": "ONCEQ_STATUS_TOKEN",
                               "value": "s3cret"})

    def token_in_argv(obj):
        ctr = coord_ctr(obj)
        if ctr:
            ctr["command"] = list(ctr["command"]) + ["--status-token", "x"]

    def optional_token(obj):
        ctr = coord_ctr(obj)
        for e in (ctr or {}).get("env") or []:
            if e.get("name") == "ONCEQ_STATUS_TOKEN":
                e["valueFrom"]["secretKeyRef"]["optional"] = True

    def worker_token(obj):
        ctr = worker_ctr(obj)
        if ctr:
            ctr.setdefault("env", []).append(
                {"name": "ONCEQ_STATUS_TOKEN",
                 "valueFrom": {"secretKeyRef": {"name": "onceq-status",
                                                "key": "token"}}})

    broken("a coordinator without ONCEQ_STATUS_TOKEN", no_token)
    broken("a literal ONCEQ_STATUS_TOKEN", literal_token)
    broken("--status-token in argv", token_in_argv)
    broken("an optional status-token Secret", optional_token)
    broken("a worker with ONCEQ_STATUS_TOKEN", worker_token)
    broken("terminationGracePeriodSeconds 30", set_tgps)
    broken("a liveness probe on /metrics", probe_path)
    broken("a readiness probe on port 8080", probe_port)
    broken("a literal database URL", literal_url)
    broken("one coordinator replica", one_coordinator)
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
