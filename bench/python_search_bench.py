#!/usr/bin/env python3
"""What calling grag from Python costs: `search` called N times from Python (the call, the GIL
released and taken back, the result objects built from the engine's result) beside the same N
Engine::Search calls in a C++ loop with no Python and no JSON between them
(Engine._search_loop), in the same process, on the same index, alternating, several rounds;
medians and their ratio (issue 41: at most 1.2x). A third side, the baseline, takes the path
search() took before its objects were built in C++: the engine's JSON, json.loads, the object.

    make python release   # or any build with GRAG_BUILD_PYTHON=ON
    PYTHONPATH=build-python python3 bench/python_search_bench.py [--n 1000] [--rounds 5]

The index is the demo's (the book, no LLM), built in a temporary folder unless --root names one.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import grag  # noqa: E402
from conftest import new_project  # noqa: E402  (the book without Gutenberg's header)

QUESTIONS = ["Who is Jacob Marley?", "What does the Ghost of Christmas Yet to Come show Scrooge?",
             "Where does Bob Cratchit live?"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="searches per round and side")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--method", default="hybrid")
    ap.add_argument("--root", help="an indexed project (default: the demo index, built here)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="grag-pybench-") as tmp:
        root = args.root
        if not root:
            root = new_project(os.path.join(tmp, "demo"))
            grag.Engine(root, no_llm=True).index()
        engine = grag.Engine(root, no_llm=True)
        per_q = max(1, args.n // len(QUESTIONS))
        n = per_q * len(QUESTIONS)
        for q in QUESTIONS:  # warm: the index opened, the retrieval images built
            engine.search(q, k=args.k, method=args.method)
        raw = engine._engine  # the compiled module's engine, for the JSON path
        py, native, via_json = [], [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for q in QUESTIONS:
                for _ in range(per_q):
                    engine.search(q, k=args.k, method=args.method)
            py.append(time.perf_counter() - start)
            start = time.perf_counter()
            for q in QUESTIONS:
                for _ in range(per_q):
                    grag.SearchResult(json.loads(raw.search(q, args.k, args.method, True)))
            via_json.append(time.perf_counter() - start)
            native.append(sum(engine._search_loop(q, args.k, args.method, per_q)
                              for q in QUESTIONS))
        mp, mn = statistics.median(py), statistics.median(native)
        mj = statistics.median(via_json)
        print(f"{n} searches ({args.method}, k={args.k}) on the demo index, {args.rounds} rounds:")
        print(f"  engine alone (C++ loop):  median {mn * 1000:8.1f} ms  ({mn / n * 1e6:7.1f} us/search)")
        print(f"  from Python (search()):   median {mp * 1000:8.1f} ms  ({mp / n * 1e6:7.1f} us/search)")
        print(f"  via the engine's JSON:    median {mj * 1000:8.1f} ms  ({mj / n * 1e6:7.1f} us/search)")
        print(f"  ratio Python / engine:    {mp / mn:.3f}  (rounds: " +
              ", ".join(f"{p / q:.3f}" for p, q in zip(py, native)) + ")")
        print(f"  ratio via JSON / engine:  {mj / mn:.3f}  (rounds: " +
              ", ".join(f"{p / q:.3f}" for p, q in zip(via_json, native)) + ")")


if __name__ == "__main__":
    main()
