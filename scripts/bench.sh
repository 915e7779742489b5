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
if [ -x "$here/scripts/bench_tokenizer.sh" ]; then
  echo "== tokenizer: grag vs node tiktoken"
  bash "$here/scripts/bench_tokenizer.sh" "$BUILD"
fi
