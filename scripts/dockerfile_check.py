#!/usr/bin/env python3
"""Checks the Dockerfile (the dockerfile_check test). Without a container engine here, the image
cannot be built in CI, so its rules are checked instead: known instructions, base images pinned
to Debian 12, COPY sources that exist, apt used the lean way, the build stage installing through
scripts/setup.sh --build-only and building targets CMake defines, and a final stage that runs
`grag serve` on 0.0.0.0:8080 as an unprivileged user with a health check on /health.

    scripts/dockerfile_check.py [--build]

--build (or GRAG_TEST_DOCKER=1) also builds the image and runs it on a copy of the book, when
`docker info` answers: it compiles grag inside the image (tens of minutes on 2 cores), so it is
not part of the default suite. Exit 0 when everything holds, 1 with one line per problem.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN = {"FROM", "RUN", "COPY", "ARG", "ENV", "WORKDIR", "USER", "EXPOSE", "VOLUME",
         "HEALTHCHECK", "ENTRYPOINT", "CMD", "LABEL", "STOPSIGNAL", "SHELL"}


def instructions(text):
    """(line number, keyword, arguments) per instruction, continuation lines joined."""
    out, current, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not current:
            start = n
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, args = current.partition(" ")
        out.append((start, keyword.upper(), args.strip()))
        current = ""
    return out


def cmake_targets():
    names = set()
    for path in [os.path.join(ROOT, "CMakeLists.txt")] + glob.glob(os.path.join(ROOT, "*/CMakeLists.txt")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        names.update(re.findall(r"add_(?:executable|library|custom_target)\(\s*([\w-]+)", text))
    return names


def check(dockerfile):
    problems = []
    with open(dockerfile, encoding="utf-8") as f:
        steps = instructions(f.read())
    stages = []  # per stage: its instructions
    for n, kw, args in steps:
        if kw not in KNOWN:
            problems.append(f"line {n}: unknown instruction {kw}")
        if kw == "FROM":
            image = args.split()[0]
            if not re.fullmatch(r"debian:12(-slim)?", image):
                problems.append(f"line {n}: base image {image} is not Debian 12 (debian:12, debian:12-slim)")
            stages.append([])
        if not stages:
            problems.append(f"line {n}: {kw} before the first FROM")
            continue
        stages[-1].append((n, kw, args))
        if kw == "WORKDIR" and not args.startswith("/"):
            problems.append(f"line {n}: WORKDIR {args} is not absolute")
        if kw == "COPY" and "--from=" not in args:
            parts = [p for p in args.split() if not p.startswith("--")]
            for src in parts[:-1]:
                if not glob.glob(os.path.join(ROOT, src)):
                    problems.append(f"line {n}: COPY source {src} is not in the tree")
        if kw == "RUN":
            if "apt-get install" in args and "--no-install-recommends" not in args:
                problems.append(f"line {n}: apt-get install without --no-install-recommends")
            if "apt-get update" in args and "rm -rf /var/lib/apt/lists" not in args:
                problems.append(f"line {n}: apt-get update without removing /var/lib/apt/lists after")
            if "sudo " in args:
                problems.append(f"line {n}: sudo in RUN")
            for target in re.findall(r"--target ([^&]+)", args):
                for t in target.split():
                    if t.startswith("-") or t == "\\":
                        break
                    if t not in cmake_targets():
                        problems.append(f"line {n}: --target {t} is not a CMake target")
    if len(stages) < 2:
        problems.append("expected two stages: a build and the image")
        return problems
    build_runs = " ".join(a for _, kw, a in stages[0] if kw == "RUN")
    if "scripts/setup.sh --build-only" not in build_runs:
        problems.append("the build stage does not install through scripts/setup.sh --build-only")
    final = stages[-1]
    kws = {kw: a for _, kw, a in final}
    user = kws.get("USER", "root")
    if user in ("root", "0"):
        problems.append("the image runs as root (no USER in its last stage)")
    if "8080" not in kws.get("EXPOSE", ""):
        problems.append("the image does not EXPOSE 8080")
    if "/health" not in kws.get("HEALTHCHECK", ""):
        problems.append("no HEALTHCHECK on /health")
    try:
        entry = json.loads(kws.get("ENTRYPOINT", "null"))
    except json.JSONDecodeError:
        entry = None
    if not (isinstance(entry, list) and entry[:2] == ["grag", "serve"] and "0.0.0.0" in entry):
        problems.append("ENTRYPOINT is not the exec form of `grag serve --host 0.0.0.0 ...`")
    ignore = os.path.join(ROOT, ".dockerignore")
    if not os.path.exists(ignore):
        problems.append(".dockerignore is missing (the context would carry builds and .git)")
    else:
        with open(ignore, encoding="utf-8") as f:
            lines = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        for needed in (".git", ".deps", "build*"):
            if needed not in lines:
                problems.append(f".dockerignore does not leave out {needed}")
    return problems


def build_and_run():
    """Builds the image and serves a copy of the book from it; problems, or None if no engine."""
    if shutil.which("docker") is None or subprocess.run(
            ["docker", "info"], capture_output=True).returncode != 0:
        return None
    tag = "grag-dockerfile-check"
    built = subprocess.run(["docker", "build", "-t", tag, ROOT])
    if built.returncode != 0:
        return ["docker build failed"]
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "input"))
        shutil.copy(os.path.join(ROOT, "tests/data/christmas_carol/christmas_carol.txt"),
                    os.path.join(tmp, "input"))
        os.chmod(tmp, 0o777)
        os.chmod(os.path.join(tmp, "input"), 0o777)
        indexed = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp}:/data", "--entrypoint",
                                  "grag", tag, "--no-llm", "index", "--no-progress"])
        if indexed.returncode != 0:
            return ["grag index in the image failed"]
        run = subprocess.run(["docker", "run", "-d", "--rm", "-p", "127.0.0.1:18080:8080", "-v",
                              f"{tmp}:/data", "-e", "GRAG_API_KEYS=k", tag],
                             capture_output=True, text=True)
        if run.returncode != 0:
            return ["docker run failed: " + run.stderr]
        container = run.stdout.strip()
        try:
            for _ in range(60):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:18080/health", timeout=2):
                        break
                except OSError:
                    time.sleep(1)
            request = urllib.request.Request(
                "http://127.0.0.1:18080/v1/search",
                data=json.dumps({"question": "Who is Jacob Marley?"}).encode(),
                headers={"Authorization": "Bearer k", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as r:
                body = r.read().decode()
            if "Marley" not in body:
                return ["the image's server did not find Marley"]
        finally:
            subprocess.run(["docker", "stop", container], capture_output=True)
    return []


def main():
    problems = check(os.path.join(ROOT, "Dockerfile"))
    if "--build" in sys.argv[1:] or os.environ.get("GRAG_TEST_DOCKER") == "1":
        built = build_and_run()
        if built is None:
            print("dockerfile_check: no container engine answers (docker info); not built")
        else:
            problems += built
    for p in problems:
        print("Dockerfile: " + p)
    if not problems:
        print("dockerfile_check: the Dockerfile holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
