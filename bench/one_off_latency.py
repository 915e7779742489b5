#!/usr/bin/env python3
"""Wall time of one-off grag commands (a process per question), two builds side by side.

A one-off `grag search` pays for everything a server pays once: starting the process, opening
the index, reading the query images and loading the vectors. This runs each build's command
alternately (the machine is shared and noisy: alternating puts both under the same load) and
prints the median and the ratio.

  python3 bench/one_off_latency.py --runs 21 \\
      --build before=/tmp/grag-before:/tmp/medical-before \\
      --build after=build-rel/grag:/tmp/medical-after \\
      -- --no-llm search --method hybrid "What are the symptoms of chronic obstructive pulmonary disease?"

Each --build is NAME=BINARY:ROOT (a build reads the index its own `grag index` wrote: query
images change layout between builds). The arguments after `--` follow `grag --root ROOT`.
"""
import argparse
import statistics
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", required=True, metavar="NAME=BINARY:ROOT")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    if not args:
        ap.error("give the grag arguments after --")
    builds = []
    for spec in a.build:
        name, _, rest = spec.partition("=")
        binary, _, root = rest.partition(":")
        if not name or not binary or not root:
            ap.error(f"--build {spec}: expected NAME=BINARY:ROOT")
        builds.append((name, [binary, "--root", root] + args))
    times = {name: [] for name, _ in builds}
    for i in range(a.warmup + a.runs):
        for name, cmd in builds:
            start = time.perf_counter()
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wall = time.perf_counter() - start
            if done.returncode != 0:
                sys.stderr.write(f"{name}: exit {done.returncode}: {done.stderr.decode()}\n")
                return 1
            if i >= a.warmup:
                times[name].append(wall * 1000)
    base = statistics.median(times[builds[0][0]])
    for name, _ in builds:
        ts = sorted(times[name])
        med = statistics.median(ts)
        print(f"{name:12s} median {med:7.1f} ms  (p10 {ts[len(ts) // 10]:.1f}, "
              f"p90 {ts[(len(ts) * 9) // 10]:.1f}; {len(ts)} runs)  ratio {med / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
