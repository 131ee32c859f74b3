#!/usr/bin/env python3
"""check_dockerfile.py: deploy/Dockerfile, checked without a Docker engine.

  check_dockerfile.py [--binary PATH ...] [DOCKERFILE]

hadolint is not packaged for Debian 12 and the npm package "hadolint" is
only a wrapper around a binary it does not ship, so this is a structural
check (hadolint runs too, in addition, when it is on PATH):
  - two stages: `FROM debian:12 AS build`, then a `FROM debian:12-slim`
    runtime stage;
  - the build stage installs every package deploy/quickstart.sh builds with
    (BUILD_PACKAGES), copies CMakeLists.txt and every directory the root
    CMakeLists.txt adds (tests are off when test/ is not copied);
  - the runtime stage installs only libpq5, libcurl4, libmicrohttpd12,
    libjansson4 and ca-certificates (no compiler, make, cmake, build-essential, pkg-config
    or -dev package), with --no-install-recommends, and removes the apt
    lists;
  - the runtime stage copies onceq and onceq-worker from the build stage
    into a directory on PATH and the schema into /usr/share/onceq/schema;
  - its last USER is not root;
  - with --binary: every shared library the built binaries load (their
    NEEDED entries, resolved with ldd and mapped to Debian packages with
    dpkg -S) comes from a package the runtime stage installs or from libc6;
  - deploy/Dockerfile.dockerignore keeps build trees and .git out of the
    context.
Self-tests: broken copies (gcc in the runtime stage, no USER, USER root, a
single stage, a missing binary) must fail. Exit 0 when all checks pass.
"""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

RUNTIME_ALLOWED = {"libpq5", "libcurl4", "libmicrohttpd12", "libjansson4",
                   "ca-certificates"}
RUNTIME_REQUIRED = RUNTIME_ALLOWED
BASE_PACKAGES = {"libc6"}  # in debian:12-slim already (Essential)
FORBIDDEN = re.compile(r"^(gcc.*|g\+\+.*|cpp.*|clang.*|cc|cmake.*|make|"
                       r"build-essential|pkg-config|pkgconf|binutils.*|"
                       r".*-dev)$")


def instructions(text):
    """[(KEYWORD, args)] with continuations joined and comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        s = line.rstrip()
        if not buf and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if buf and s.lstrip().startswith("#"):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        parts = buf.strip().split(None, 1)
        out.append((parts[0].upper(), parts[1] if len(parts) > 1 else ""))
        buf = ""
    return out


def stages(instrs):
    """[{'from': image, 'name': alias, 'instrs': [...]}]"""
    st = []
    for kw, args in instrs:
        if kw == "FROM":
            m = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$", args,
                         re.I)
            st.append({"from": m.group(1) if m else args,
                       "name": m.group(2) if m else None, "instrs": []})
        elif st:
            st[-1]["instrs"].append((kw, args))
    return st


def apt_packages(stage):
    """Packages named by `apt-get install` in a stage's RUN lines, and
    whether every install uses --no-install-recommends."""
    pkgs, norec, lists_removed = [], True, False
    for kw, args in stage["instrs"]:
        if kw != "RUN":
            continue
        if "rm -rf /var/lib/apt/lists" in args:
            lists_removed = True
        for cmd in re.split(r"&&|;|\|\|", args):
            words = cmd.split()
            if "apt-get" not in words or "install" not in words:
                continue
            if "--no-install-recommends" not in words:
                norec = False
            after = words[words.index("install") + 1:]
            pkgs += [w for w in after if not w.startswith("-") and "=" not in w]
    return pkgs, norec, lists_removed


def quickstart_build_packages(root):
    text = open(os.path.join(root, "deploy", "quickstart.sh")).read()
    m = re.search(r'^BUILD_PACKAGES="([^"]*)"', text, re.M)
    return m.group(1).split() if m else []


def cmake_subdirs(root):
    text = open(os.path.join(root, "CMakeLists.txt")).read()
    dirs = re.findall(r"add_subdirectory\((\w+)\)", text)
    return [d for d in dirs if d != "test"]


def copies(stage):
    out = []
    for kw, args in stage["instrs"]:
        if kw == "COPY":
            words = args.split()
            flags = [w for w in words if w.startswith("--")]
            rest = [w for w in words if not w.startswith("--")]
            if rest:
                out.append((flags, rest[:-1], rest[-1]))
    return out


def check_text(c, text, root):
    st = stages(instructions(text))
    c.ok(len(st) >= 2, "multi-stage (a build and a runtime stage)", len(st),
         ">= 2")
    if len(st) < 2:
        return
    build, final = st[0], st[-1]
    c.ok(re.fullmatch(r"debian:12(-.*)?", build["from"]) is not None and
         (build["name"] or "").lower() == "build",
         "first stage: FROM debian:12 AS build",
         f"{build['from']} AS {build['name']}", "debian:12 AS build")
    c.eq(final["from"], "debian:12-slim", "runtime stage: FROM debian:12-slim")

    bpkgs, _, _ = apt_packages(build)
    for p in quickstart_build_packages(root):
        c.ok(p in bpkgs, f"build stage installs {p} (quickstart.sh "
             "BUILD_PACKAGES)", bpkgs, p)
    src_copied = {os.path.normpath(s).rstrip("/") for f, srcs, _ in
                  copies(build) if not f for s in srcs}
    for d in ["CMakeLists.txt"] + cmake_subdirs(root):
        c.ok(d in src_copied, f"build stage copies {d}", sorted(src_copied), d)
    runs = " ".join(a for k, a in build["instrs"] if k == "RUN")
    if "test" not in src_copied:
        c.ok("-DONCEQ_BUILD_TESTS=OFF" in runs,
             "build stage configures with -DONCEQ_BUILD_TESTS=OFF (test/ is "
             "not copied)", None, "-DONCEQ_BUILD_TESTS=OFF")

    fpkgs, norec, lists_removed = apt_packages(final)
    bad = [p for p in fpkgs if FORBIDDEN.match(p) or p not in RUNTIME_ALLOWED]
    c.eq(bad, [], "runtime stage installs no compiler, build tool or other "
         "package beyond " + ", ".join(sorted(RUNTIME_ALLOWED)))
    for p in sorted(RUNTIME_REQUIRED):
        c.ok(p in fpkgs, f"runtime stage installs {p}", fpkgs, p)
    c.ok(norec, "runtime apt-get install uses --no-install-recommends",
         norec, True)
    c.ok(lists_removed, "runtime stage removes /var/lib/apt/lists",
         lists_removed, True)
    fromc = [(f, s, d) for f, s, d in copies(final)
             if any(x.lower() == "--from=build" for x in f)]
    for binary in ("onceq", "onceq-worker"):
        hit = [d for f, srcs, d in fromc
               if any(os.path.basename(s) == binary for s in srcs)]
        c.ok(bool(hit) and all(h.startswith(("/usr/local/bin", "/usr/bin"))
                               for h in hit),
             f"runtime stage: COPY --from=build {binary} onto PATH", hit,
             "/usr/local/bin/...")
    c.ok(any(d.rstrip("/") == "/usr/share/onceq/schema" and
             any("schema" in s for s in srcs)
             for _, srcs, d in copies(final)),
         "runtime stage: schema into /usr/share/onceq/schema", None,
         "COPY ... schema ... /usr/share/onceq/schema/")
    users = [a.strip() for k, a in final["instrs"] if k == "USER"]
    last = users[-1] if users else None
    c.ok(last is not None and last.split(":")[0] not in ("root", "0"),
         "runtime stage: USER is not root", last, "a non-root user")


def check_binaries(c, binaries, fpkgs):
    """Every NEEDED library of the binaries comes from an installed package."""
    if not shutil.which("dpkg-query") or not shutil.which("ldd"):
        c.ok(False, "dpkg-query and ldd available for the library check",
             None, "Debian tools")
        return
    for b in binaries:
        r = subprocess.run(["readelf", "-d", b], capture_output=True,
                           text=True)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            r.stdout)
        c.ok(bool(needed), f"{os.path.basename(b)}: readelf lists NEEDED "
             "libraries", r.stderr.strip() or needed, "some")
        ldd = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        paths = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
        for lib in needed:
            path = paths.get(lib)
            pkg = None
            if path:
                real = os.path.realpath(path)
                for cand in {path, real, "/usr" + path if not
                             path.startswith("/usr") else path,
                             "/usr" + real if not real.startswith("/usr")
                             else real}:
                    r = subprocess.run(["dpkg-query", "-S", cand],
                                       capture_output=True, text=True)
                    if r.returncode == 0:
                        pkg = r.stdout.split(":")[0].strip()
                        break
            c.ok(pkg is not None and (pkg in fpkgs or pkg in BASE_PACKAGES),
                 f"{os.path.basename(b)}: {lib} comes from a runtime "
                 "package", pkg, "one of " + ", ".join(sorted(set(fpkgs) |
                                                              BASE_PACKAGES)))


def main():
    args = sys.argv[1:]
    binaries = []
    while "--binary" in args:
        i = args.index("--binary")
        binaries.append(args[i + 1])
        del args[i:i + 2]
    root = dl.repo_root()
    path = args[0] if args else os.path.join(root, "deploy", "Dockerfile")
    text = open(path).read()
    c = dl.Checks("check_dockerfile")

    hadolint = shutil.which("hadolint")
    if hadolint:
        r = subprocess.run([hadolint, path], capture_output=True, text=True)
        c.eq(r.returncode, 0, "hadolint " + (r.stdout + r.stderr).strip())
    else:
        print("note: hadolint is not installed (not in Debian 12; the npm "
              "package only wraps a binary it does not ship): structural "
              "checks only")

    check_text(c, text, root)
    if binaries:
        fpkgs, _, _ = apt_packages(stages(instructions(text))[-1])
        check_binaries(c, binaries, fpkgs)

    ign = os.path.join(os.path.dirname(path), "Dockerfile.dockerignore")
    ign_lines = open(ign).read().split() if os.path.exists(ign) else []
    for pat in ("build", ".git"):
        c.ok(pat in ign_lines, f"Dockerfile.dockerignore excludes {pat}",
             ign_lines, pat)

    def broken(label, new_text):
        dl.self_test(c, label, lambda sub: check_text(sub, new_text, root))

    slim = text.index("FROM debian:12-slim")
    broken("gcc in the runtime stage", text[:slim] + text[slim:].replace(
        "libpq5 ", "libpq5 gcc ", 1))
    broken("build-essential in the runtime stage",
           text[:slim] + text[slim:].replace("libpq5 ",
                                             "libpq5 build-essential ", 1))
    broken("no USER", re.sub(r"^USER .*$", "", text, flags=re.M))
    broken("USER root", text + "\nUSER root\n")
    broken("a single stage", text[slim:])
    broken("no onceq-worker copied", re.sub(
        r"^COPY --from=build \S*onceq-worker .*$", "", text, flags=re.M))
    broken("a runtime stage without libmicrohttpd12",
           text[:slim] + text[slim:].replace("libmicrohttpd12 ", "", 1))
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
