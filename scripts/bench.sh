#!/usr/bin/env bash
# Runs every benchmark of an optimised build: bench/*_bench (Google Benchmark) and the side-by-side
# comparisons that have a script of their own.
set -euo pipefail
BUILD=${1:-build-release}
here=$(cd "$(dirname "$0")/.." && pwd)
for b in "$BUILD"/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
done
if [ -x "$BUILD/bench/retrieval_eval" ]; then
  echo "== retrieval on HotpotQA-100 (no LLM): every method beside BM25"
  "$BUILD/bench/retrieval_eval"
fi
if [ -x "$BUILD/bench/resolution_eval" ]; then
  echo "== entity resolution on the labelled sets: precision and recall per mode"
  "$BUILD/bench/resolution_eval"
fi
if [ -x "$BUILD/bench/resolution_cost" ]; then
  echo "== entity resolution's cost in a full LLM index (Microsoft's extraction of the book replayed)"
  "$BUILD/bench/resolution_cost"
fi
if [ -x "$BUILD/bench/server_load" ]; then
  echo "== grag serve under load: 200 keep-alive clients during index jobs, beside the engine alone"
  # A failure (query errors, an unclean stop) fails the run, after the other benchmarks.
  "$BUILD/bench/server_load" || failed="server_load"
fi
if [ -x "$BUILD/bench/endpoint_scaling" ]; then
  echo "== model endpoints: throughput with 1, 2 and 3 equal endpoints (llm.endpoints)"
  "$BUILD/bench/endpoint_scaling" || failed="${failed:+$failed }endpoint_scaling"
fi
if [ -x "$here/scripts/bench_tokenizer.sh" ]; then
  echo "== tokenizer: grag vs node tiktoken"
  bash "$here/scripts/bench_tokenizer.sh" "$BUILD"
fi
if [ -n "${failed:-}" ]; then
  echo "bench: $failed FAILED (see above)" >&2
  exit 1
fi
